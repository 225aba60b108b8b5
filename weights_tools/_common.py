"""Shared pieces of the weights_tools commands."""
import json
import os
import sys

from npbert import io
from npbert.io.names import fix_legacy_name

BASE_PREFIX = "bert."
TIED = "cls.predictions.decoder.weight"
DECODER_BIAS = "cls.predictions.decoder.bias"


class ToolError(Exception):
    """Bad input to a command: printed as `error: ...`, exit status 2."""


def fail(prog, message):
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def find_config(weights_file, explicit=None):
    """The config dict for a checkpoint: --config, the npbert .h5's own,
    or config.json / bert_config.json beside the weights.  None if absent."""
    if explicit:
        try:
            with open(explicit, encoding="utf-8") as f:
                return json.load(f), explicit
        except (OSError, ValueError) as e:
            raise ToolError(f"cannot read config {explicit}: {e}") from e
    if io.detect_format(weights_file) == io.NPBERT_H5:
        return io.read_npbert_h5_config(weights_file), weights_file
    directory = os.path.dirname(os.path.abspath(weights_file))
    for name in ("config.json", "bert_config.json"):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            try:
                with open(candidate, encoding="utf-8") as f:
                    return json.load(f), candidate
            except (OSError, ValueError) as e:
                raise ToolError(f"cannot read config {candidate}: {e}") from e
    return None, None


def canonical_name(key):
    """Checkpoint key -> the name it has in a head class (bert. prefix, weight/bias)."""
    key = fix_legacy_name(key)
    if not key.startswith(BASE_PREFIX) and not key.startswith("cls.") and "." in key \
            and key.split(".")[0] in ("embeddings", "encoder", "pooler"):
        key = BASE_PREFIX + key
    return key


def is_counted(key, keys):
    """Parameters as transformers counts them: no buffers, a tied weight once."""
    if key.endswith("position_ids") or key.endswith("token_type_ids"):
        return False
    if key == TIED:
        return False
    if key == DECODER_BIAS and "cls.predictions.bias" in keys:
        return False
    return True


def module_of(canonical):
    """The module a parameter belongs to, for per-module counts."""
    parts = canonical.split(".")
    if parts[0] == "bert":
        if parts[1] == "encoder" and len(parts) > 3 and parts[2] == "layer":
            return f"bert.encoder.layer.{parts[3]}"
        return ".".join(parts[:2])
    if parts[0] == "cls":
        return ".".join(parts[:2])
    return parts[0]


def key_convention(fmt, keys):
    """A one-line description of how a checkpoint spells its names."""
    if fmt == io.TF_CHECKPOINT:
        notes = ["Google TF variable names (bert/encoder/layer_N/..., kernel/gamma/beta), "
                 "mapped to transformers' and kernels transposed"]
    elif fmt == io.KERAS_H5:
        notes = ["Keras weight names (.../layer_._N/.../kernel:0), mapped to transformers' "
                 "and kernels transposed"]
    else:
        notes = ["transformers PyTorch names"]
    if any(k.startswith(BASE_PREFIX) for k in keys):
        notes.append("with the 'bert.' prefix (a head-class checkpoint)")
    elif any(k.startswith(("embeddings.", "encoder.")) for k in keys):
        notes.append("without the 'bert.' prefix (a BertModel checkpoint)")
    if any(k.endswith((".gamma", ".beta")) for k in keys):
        notes.append("legacy LayerNorm gamma/beta")
    if any(k.endswith("position_ids") for k in keys):
        notes.append("a stray position_ids buffer")
    if TIED in keys:
        notes.append("the tied decoder weight stored")
    return "; ".join(notes)


def expected_for_class(class_name, config):
    """{name: shape} of npbert.<class_name>(config).named_parameters()."""
    import npbert
    cls = getattr(npbert, class_name, None)
    if cls is None or not isinstance(cls, type) or not hasattr(cls, "named_parameters"):
        raise ToolError(f"unknown model class {class_name!r}")
    if config is None:
        raise ToolError("a config is needed to build the class's parameter list "
                        "(none found beside the weights; pass --config)")
    try:
        bert_config = npbert.BertConfig(**config) if isinstance(config, dict) else config
    except (TypeError, ValueError) as e:
        raise ToolError(f"bad config: {e}") from e
    try:   # allocate without drawing random weights when the model supports it
        from npbert.modeling.pretrained import _no_init
    except ImportError:  # pragma: no cover
        import contextlib
        _no_init = contextlib.nullcontext
    with _no_init():
        model = cls(bert_config)
    return {k: tuple(v.shape) for k, v in model.named_parameters()}, cls.base_model_prefix


class Progress:
    """A one-line progress display on stderr (only for big jobs on a TTY,
    unless forced)."""

    def __init__(self, label, enabled):
        self.label, self.enabled, self.last = label, enabled, -1

    def __call__(self, done, total):
        if not self.enabled or total <= 0:
            return
        percent = int(100 * done / total)
        if percent != self.last:
            self.last = percent
            sys.stderr.write(f"\r{self.label}: {percent:3d}% ({done / 1e6:.1f}/{total / 1e6:.1f} MB)")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()
