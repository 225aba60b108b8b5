"""Parameter names: matching a checkpoint to a model, and the three naming
conventions BERT checkpoints use.

transformers (PyTorch) names, the ones npbert uses everywhere::

    bert.encoder.layer.0.attention.self.query.weight        (out, in)
    bert.encoder.layer.0.attention.output.LayerNorm.weight

Google's original TensorFlow names (``bert_model.ckpt``)::

    bert/encoder/layer_0/attention/self/query/kernel         (in, out)
    bert/encoder/layer_0/attention/output/LayerNorm/gamma

Keras names written by transformers' TF classes (``tf_model.h5``)::

    bert/encoder/layer_._0/attention/self/query/kernel:0     (in, out)
    bert/encoder/layer_._0/attention/output/LayerNorm/gamma:0

Both TF conventions store Dense kernels as (in, out); torch's Linear weight
is (out, in), so the mappers below say when a transpose is due.
"""
import re
from dataclasses import dataclass, field

import numpy as np

TIED_DECODER_WEIGHT = "cls.predictions.decoder.weight"
DECODER_BIAS_ALIAS = "cls.predictions.decoder.bias"
PREDICTIONS_BIAS = "cls.predictions.bias"


@dataclass
class MatchResult:
    """The outcome of `match_state_dict`.

    Attributes:
        state_dict: expected name -> checkpoint array, for every expected key
            found with the right shape.
        missing: expected keys with no matching checkpoint key (keys listed in
            `mismatched` are not repeated here).
        unexpected: checkpoint keys (as spelled in the checkpoint) that were
            not used and are not silently ignorable.
        mismatched: ``(key, checkpoint_shape, expected_shape)`` for keys found
            with the wrong shape; ``key`` is the expected name.
        renamed: checkpoint key -> expected key, for every key that needed a
            rename (prefix added/removed, gamma/beta, decoder.bias alias).
        ignored: checkpoint keys dropped on purpose (``position_ids`` buffers,
            the tied decoder weight, a duplicate decoder bias).
    """

    state_dict: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)
    unexpected: list = field(default_factory=list)
    mismatched: list = field(default_factory=list)
    renamed: dict = field(default_factory=dict)
    ignored: list = field(default_factory=list)


def fix_legacy_name(key):
    """Old transformers/TF-converted checkpoints call LayerNorm's affine
    parameters gamma/beta: ``...LayerNorm.gamma`` -> ``...LayerNorm.weight``."""
    if key.endswith(".gamma"):
        return key[: -len("gamma")] + "weight"
    if key.endswith(".beta"):
        return key[: -len("beta")] + "bias"
    return key


def _candidates(key, prefix):
    """Names a (legacy-fixed) checkpoint key may mean, best first."""
    yield key
    if key.startswith(prefix + "."):
        yield key[len(prefix) + 1:]   # a head-class checkpoint into BertModel
    else:
        yield prefix + "." + key      # a BertModel checkpoint into a head class


def match_state_dict(checkpoint, expected, base_model_prefix="bert"):
    """Match checkpoint keys to a model's parameter names.

    Args:
        checkpoint: ``{name: np.ndarray}`` as read from a file, torch layout,
            transformers names (with or without the ``bert.`` prefix, maybe
            with legacy ``gamma``/``beta``).
        expected: ``{name: shape}``, the target class's ``named_parameters()``
            names; a tied weight is listed once (``cls.predictions.decoder.weight``
            is normally absent: it is ``bert.embeddings.word_embeddings.weight``).
        base_model_prefix: the attribute holding the base model in head
            classes (``"bert"``).

    Returns:
        A `MatchResult`.  Nothing is raised: the caller decides which missing
        keys are an error and which a warning.

    An exact name wins over a renamed one: if a checkpoint holds both
    ``bert.x`` and ``x``, the one spelled as expected is used and the other is
    reported unexpected.
    """
    expected = {k: tuple(v) for k, v in expected.items()}
    result = MatchResult()
    claimed = {}          # expected key -> checkpoint key
    pending = []          # checkpoint keys to try after exact matches

    for key in checkpoint:
        if key.endswith("position_ids") and key not in expected:
            result.ignored.append(key)       # an old persistent buffer
            continue
        if key == TIED_DECODER_WEIGHT and key not in expected:
            result.ignored.append(key)       # the tied copy of word_embeddings
            continue
        if key in expected:
            claimed[key] = key
        else:
            pending.append(key)

    decoder_bias = None
    for key in pending:
        if key == DECODER_BIAS_ALIAS:
            decoder_bias = key               # decided below, once all else is matched
            continue
        fixed = fix_legacy_name(key)
        target = next((c for c in _candidates(fixed, base_model_prefix)
                       if c in expected and c not in claimed), None)
        if target is None:
            result.unexpected.append(key)
        else:
            claimed[target] = key
            result.renamed[key] = target

    if decoder_bias is not None:
        # `cls.predictions.decoder.bias` is the same Parameter as
        # `cls.predictions.bias` in transformers; use it only when the
        # canonical name is absent.
        if PREDICTIONS_BIAS in expected and PREDICTIONS_BIAS not in claimed:
            claimed[PREDICTIONS_BIAS] = decoder_bias
            result.renamed[decoder_bias] = PREDICTIONS_BIAS
        elif PREDICTIONS_BIAS in expected:
            result.ignored.append(decoder_bias)
        else:
            result.unexpected.append(decoder_bias)

    for name, shape in expected.items():
        if name not in claimed:
            result.missing.append(name)
            continue
        array = checkpoint[claimed[name]]
        if tuple(np.shape(array)) != shape:
            result.mismatched.append((name, tuple(np.shape(array)), shape))
        else:
            result.state_dict[name] = array
    return result


# --- Google's TF checkpoint names -> transformers -----------------------------

# Variables that are training state, not weights.
_GOOGLE_SKIP = ("adam_v", "adam_m", "AdamWeightDecayOptimizer", "AdamWeightDecayOptimizer_1",
                "global_step")


def google_to_hf(name):
    """Map a variable name of Google's BERT checkpoint to transformers'.

    Returns ``(hf_name, transpose)``, or ``None`` for optimizer slots and
    ``global_step``, which are skipped as transformers' converter skips them.
    ``transpose`` is True for Dense kernels, stored (in, out) by TF.

    The rules follow transformers' ``load_tf_weights_in_bert``: split on
    ``/``; ``layer_N`` -> ``layer.N``; ``kernel`` and ``gamma`` -> ``weight``;
    ``output_bias`` and ``beta`` -> ``bias``; ``output_weights`` -> ``weight``;
    ``squad`` -> ``classifier``; ``_embeddings`` suffixes -> ``.weight``.
    """
    parts = name.split("/")
    if any(p in _GOOGLE_SKIP for p in parts):
        return None
    out = []
    for part in parts:
        m = re.fullmatch(r"([A-Za-z]+)_(\d+)", part)
        if m:
            out += [m.group(1), m.group(2)]
        elif part in ("kernel", "gamma"):
            out.append("weight")
        elif part in ("output_bias", "beta"):
            out.append("bias")
        elif part == "output_weights":
            out.append("weight")
        elif part == "squad":
            out.append("classifier")
        else:
            out.append(part)
    if parts[-1].endswith("_embeddings"):
        out.append("weight")
    # Only Dense kernels are (in, out); `output_weights` (the NSP and
    # classifier heads) are already (out, in) in Google's code.
    return ".".join(out), parts[-1] == "kernel"


# --- Keras (transformers TF classes) names -> transformers ---------------------

def keras_to_hf(name):
    """Map a Keras weight name from a transformers ``tf_model.h5`` to PyTorch.

    Returns ``(hf_name, transpose)``, following transformers' TF->PT rules
    (``convert_tf_weight_name_to_pt_weight_name``), step by step::

        tf_bert_for_pre_training/mlm___cls/predictions/transform/dense/kernel:0
        -> drop ":0"
        -> "scope___name" -> "name"          .../cls/predictions/transform/dense/kernel
        -> "_._" -> "/"  (layer_._0 -> layer/0)
        -> drop the first level (the Keras model's own scope)
        -> last part kernel/embeddings/gamma -> weight, beta -> bias
        -> join with "."                     cls.predictions.transform.dense.weight

    ``transpose`` is True for a ``kernel`` (Dense, stored (in, out)).
    """
    name = re.sub(r":\d+$", "", name)
    name = re.sub(r"/[^/]*___([^/]*)/", r"/\1/", name)
    name = name.replace("_._", "/")
    name = re.sub(r"//+", "/", name)
    parts = name.split("/")
    if len(parts) > 1:
        parts = parts[1:]
    transpose = parts[-1] == "kernel"
    if parts[-1] in ("kernel", "embeddings", "gamma"):
        parts[-1] = "weight"
    elif parts[-1] == "beta":
        parts[-1] = "bias"
    return ".".join(parts), transpose
