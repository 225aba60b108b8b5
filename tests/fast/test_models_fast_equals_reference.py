"""The fast path computes what the reference path computes, for BertModel and every head, in
training mode with dropout on everywhere: outputs (hidden states and attentions included), the
loss, every parameter gradient and `inputs_embeds_grad`.

Tolerances (normwise: max |fast - reference| / max |reference|, per tensor):
- float64: outputs and gradients <= 1e-12.  Measured: the outputs of the fixed tiny configs below
  bit-equal (the same operations per row; the stacked Q/K/V GEMM happens to give the same sums
  as three GEMMs there), of drawn configs up to 6e-16; gradients up to 2e-15 (the stacked GEMMs,
  the halves' two weight-gradient GEMMs and the one-hot embedding GEMM sum in another order).
  Which ops are bit-equal on their own: tests/fast/test_ops_fast_equals_reference.py.
- float32: outputs <= 256 ulp of the tensor's largest entry, gradients <= 512 ulp of their layer's
  largest gradient entry (measured over 1500 drawn configs: up to 24 and 133 ulp; the fixed
  configs below: 8 and 30; over 300 draws that hypothesis derandomized, outputs up to 196 ulp,
  99 % below 26: the pooler output of a 2-layer config with LayerNorm eps 1e-12 and
  initializer_range 0.02, where the differences grow the most; 196 before the attention's
  softmax dropped its row-max shift, 192 after): the fast float32 GELU is 17 fused passes
  within 2e-7 |x| of x Phi(x) where the reference rounds x Phi(x) once (npbert/fast/gelu.py), its
  derivative within 2.4e-7 in absolute terms, the attention's softmax is not shifted by the row
  max (npbert/fast/softmax.py), and every sum runs in another order; the
  differences grow through the layers and the backward.  (Against the layer's scale, not each
  gradient's own: where the GELU derivative is near 0 for every token, at GELU's minimum
  x = -0.75, the intermediate weight's gradient is near 0 too and its own relative error
  unbounded, as for any float32 GELU.)
A gradient that is zero in exact arithmetic (the key biases, and with a loss the biases a softmax
ignores: heads/head_helpers.analytically_zero) holds only round-off on both sides: it is judged
against its layer's largest gradient entry (<= 1e-9 of it float64, 1e-4 float32: measured 3e-7
over the drawn configs), not against itself.
So is any gradient smaller than 1e-6 of the model's largest gradient entry (a drawn config with
a LayerNorm over 2 features, whose output is +-1 whatever its input, has every gradient below it
zero in exact arithmetic): its scale is then 1e-6 of that entry.

`assert_paths_agree` is the comparison; test_a_wrong_fast_op_is_caught shows it failing when a
fast op is subtly wrong.
"""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npbert
import npbert.fast
import npbert.testing as nt
from heads.head_helpers import analytically_zero, randomize, tiny_config

CLASSES = ["BertModel", "BertForPreTraining", "BertForMaskedLM", "BertLMHeadModel", "BertForNextSentencePrediction",
           "BertForSequenceClassification", "BertForTokenClassification", "BertForMultipleChoice",
           "BertForQuestionAnswering"]
EPS32 = float(np.finfo(np.float32).eps)
TOL = {np.float64: dict(outputs=1e-12, grads=1e-12, zero=1e-9),
       np.float32: dict(outputs=256 * EPS32, grads=512 * EPS32, zero=1e-4)}
DROPOUT = dict(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3, classifier_dropout=0.25)


def labels_for(cls_name, B, T, V, rng):
    if cls_name == "BertForPreTraining":
        return dict(labels=rng.integers(0, V, (B, T)), next_sentence_label=rng.integers(0, 2, B))
    if cls_name in ("BertForMaskedLM", "BertLMHeadModel"):
        return dict(labels=np.where(rng.random((B, T)) < 0.5, rng.integers(0, V, (B, T)), -100))
    if cls_name == "BertForTokenClassification":
        return dict(labels=rng.integers(0, 2, (B, T)))
    if cls_name in ("BertForNextSentencePrediction", "BertForSequenceClassification", "BertForMultipleChoice"):
        return dict(labels=rng.integers(0, 2, B))
    if cls_name == "BertForQuestionAnswering":
        return dict(start_positions=rng.integers(0, T, B), end_positions=rng.integers(0, T, B))
    return {}


def run(path, cls_name, config, dtype, inputs, seed=1):
    """One training forward (hidden states and attentions returned) and one backward of the loss
    (or, for BertModel, of its two outputs) plus every hidden state and attention, on `path`."""
    with npbert.using_path(path), warnings.catch_warnings():
        warnings.simplefilter("ignore")                         # is_decoder warnings of the LM heads
        model = randomize(getattr(npbert, cls_name)(config, dtype=dtype), seed=seed).train()
        out = model(**inputs, output_hidden_states=True, output_attentions=True)
        up = np.random.default_rng(seed + 1)
        upstream = dict(hidden_states=[up.standard_normal(h.shape) for h in out.hidden_states],
                        attentions=[up.standard_normal(a.shape) for a in out.attentions])
        if cls_name == "BertModel":
            upstream.update(last_hidden_state=up.standard_normal(out.last_hidden_state.shape),
                            pooler_output=up.standard_normal(out.pooler_output.shape))
        else:
            upstream["loss"] = 1.0
        grads = model.backward(**upstream)
        return out, grads, model.inputs_embeds_grad


def _layer(name):
    """"encoder.layer.3", "embeddings", "pooler", "cls", "classifier", ... of a parameter name."""
    parts = name.removeprefix("bert.").split(".")
    return ".".join(parts[:3]) if parts[0] == "encoder" else parts[0]


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    diff = np.abs(a - b).max() if a.size else 0.0
    scale = np.abs(b).max() if b.size else 0.0
    return diff / scale if scale else (0.0 if diff == 0.0 else np.inf)


def assert_outputs_agree(out_f, out_r, cls_name, tol):
    """Every output (each hidden state and attention of the tuples) within tol["outputs"]."""
    assert list(out_f) == list(out_r)
    for key in out_r:
        pairs = zip(out_f[key], out_r[key]) if isinstance(out_r[key], tuple) else [(out_f[key], out_r[key])]
        for i, (a, b) in enumerate(pairs):
            assert _rel(a, b) <= tol["outputs"], f"{cls_name} {key}[{i}]: {_rel(a, b):.2e}"


def assert_paths_agree(cls_name, config, dtype, inputs):
    fast, reference = (run(path, cls_name, config, dtype, inputs) for path in ("fast", "reference"))
    tol = TOL[dtype]
    (out_f, grads_f, embeds_f), (out_r, grads_r, embeds_r) = fast, reference
    assert_outputs_agree(out_f, out_r, cls_name, tol)
    assert_grads_agree(grads_f, grads_r, cls_name, dtype, tol)
    err = np.abs(embeds_f - embeds_r).max() / max(np.abs(embeds_r).max(), 1e-6 * _largest(grads_r))
    assert err <= tol["grads"], f"inputs_embeds_grad: {err:.2e}"


def _largest(grads):
    return max(np.abs(g).max() for g in grads.values())


def assert_grads_agree(grads_f, grads_r, cls_name, dtype, tol):
    """Every parameter gradient within tol["grads"] of its scale (float32: its layer's largest entry);
    one zero in exact arithmetic within tol["zero"] of its layer's scale (module docstring)."""
    assert list(grads_f) == list(grads_r)
    zero = {n for n in analytically_zero(grads_r, cls_name, loss=cls_name != "BertModel")
            if not n.endswith("LayerNorm.bias")}     # the last hidden state has an upstream gradient here too
    floor = 1e-6 * max(np.abs(g).max() for g in grads_r.values())
    layer_scale = {}
    for name, g in grads_r.items():
        layer_scale[_layer(name)] = max(layer_scale.get(_layer(name), 0.0), np.abs(g).max())
    for name, b in grads_r.items():
        a = grads_f[name]
        if name in zero:
            scale = max(layer_scale[_layer(name)], floor)
            assert max(np.abs(a).max(), np.abs(b).max()) <= tol["zero"] * scale, name
        else:
            scale = layer_scale[_layer(name)] if dtype == np.float32 else np.abs(b).max()
            err = np.abs(a - b).max() / max(scale, floor)
            assert err <= tol["grads"], f"{cls_name} gradient of {name}: {err:.2e}"


def tiny_inputs(cls_name, config, B=4, T=7, seed=0):
    rng = np.random.default_rng(seed)
    shape = (B, 2, T) if cls_name == "BertForMultipleChoice" else (B, T)
    ids = rng.integers(1, config.vocab_size, shape)
    mask = np.ones(shape, dtype=np.int64)
    mask[..., -2:] = rng.integers(0, 2, mask[..., -2:].shape)          # some padding
    return dict(input_ids=ids, attention_mask=mask, **labels_for(cls_name, B, T, config.vocab_size, rng))


def config_for(cls_name, **overrides):
    return tiny_config(**DROPOUT, num_labels=2, is_decoder=cls_name == "BertLMHeadModel", **overrides)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cls_name", CLASSES)
def test_every_model_computes_the_same_on_both_paths(cls_name, dtype):
    config = config_for(cls_name)
    assert_paths_agree(cls_name, config, dtype, tiny_inputs(cls_name, config))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_with_a_head_mask_a_3d_mask_and_inputs_embeds(dtype):
    config = config_for("BertModel", num_hidden_layers=3)
    rng = np.random.default_rng(5)
    B, T, H = 3, 6, config.hidden_size
    inputs = dict(inputs_embeds=rng.standard_normal((B, T, H)).astype(dtype),
                  attention_mask=(rng.random((B, T, T)) < 0.8).astype(np.int64) | np.eye(T, dtype=np.int64),
                  head_mask=np.array([[1.0, 0.0], [0.5, 1.0], [1.0, 1.0]]))
    assert_paths_agree("BertModel", config, dtype, inputs)


@settings(deadline=None, max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), dtype=st.sampled_from([np.float64, np.float32]))
def test_drawn_configs_masks_and_inputs(data, dtype):
    """Configs (every activation, dropout 0, 0.1 or 0.5, eps 1e-12 or 1e-5), batches with padding
    and one-token sequences, from npbert.testing.  Hidden sizes below 4 are left out: a LayerNorm
    over 1 or 2 features is (nearly) constant, so every gradient below it is (nearly) zero in
    exact arithmetic and pure amplified round-off on both paths, with no scale to judge it by."""
    config = data.draw(nt.bert_configs(dropout=True).filter(lambda c: c.hidden_size >= 4))
    inputs = data.draw(nt.model_inputs(config, max_batch=4, max_seq=8))
    assert_paths_agree("BertModel", config, dtype, inputs)


# ---- the comparison can fail -----------------------------------------------------------------
def _wrong_gelu_backward(dy, cache, out=None, y=None):
    """The fast GELU's backward, 1e-9 too large (a slightly wrong constant)."""
    return _GOOD["gelu_backward"](dy, cache, out=out, y=y) * (1 + 1e-9)


def _wrong_keep_mask(rng, shape, p):
    """Keyed masks one row off (rows counted from the wrong first row)."""
    if isinstance(rng, npbert.ops.DropoutKey):
        rng = rng._replace(first_row=rng.first_row + 1)
    return _GOOD["keep_mask"](rng, shape, p)


def _wrong_layer_norm_backward(dy, cache, **kwargs):
    """dbias summed over all rows but the last."""
    dx, grads = _GOOD["layer_norm_backward"](dy, cache, **kwargs)
    if "bias" in grads:
        grads["bias"] = grads["bias"] - dy.reshape(-1, dy.shape[-1])[-1]
    return dx, grads


_GOOD = {name: getattr(npbert.fast, name) for name in ("gelu_backward", "keep_mask", "layer_norm_backward")}
WRONG = {"gelu_backward": _wrong_gelu_backward, "keep_mask": _wrong_keep_mask,
         "layer_norm_backward": _wrong_layer_norm_backward}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_fast_op_is_caught(monkeypatch, name):
    """The comparison above fails when one fast op is subtly wrong: a GELU derivative off by 1e-9
    relative, dropout masks keyed one row off, a LayerNorm bias gradient missing one row."""
    config = config_for("BertForSequenceClassification")
    inputs = tiny_inputs("BertForSequenceClassification", config)
    assert_paths_agree("BertForSequenceClassification", config, np.float64, inputs)     # correct: passes
    target = npbert.fast if name != "keep_mask" else npbert.fast.dropout
    monkeypatch.setattr(target, name, WRONG[name])
    if name == "gelu_backward":             # float64's GELU is the activation module's (self.ops.get_activation)
        good = npbert.fast.get_activation
        monkeypatch.setattr(npbert.fast, "get_activation",
                            lambda act: (good(act)[0], WRONG[name]) if act == "gelu" else good(act))
    with pytest.raises(AssertionError):
        assert_paths_agree("BertForSequenceClassification", config, np.float64, inputs)


# ---- the last layer's [CLS] row alone ----------------------------------------------------------
# A head that reads only the pooled output (sequence classification, next sentence, multiple
# choice) lets the fast path's last layer compute row 0 alone, in eval mode without hidden states
# or attentions returned (BertEncoder.forward's read_rows; the reference path computes every row).  The numbers are
# the reference's, within the tolerances above: the same sums, fewer of them.

POOLED_ONLY = ["BertForSequenceClassification", "BertForNextSentencePrediction", "BertForMultipleChoice"]


def run_eval(path, cls_name, config, dtype, inputs, intermediate_grads=False):
    with npbert.using_path(path):
        model = randomize(getattr(npbert, cls_name)(config, dtype=dtype), seed=1).eval()
        model.state.need_inputs_embeds_grad = True
        out = model(**inputs)
        result = model.backward(loss=1.0, return_intermediate_grads=intermediate_grads)
        grads, igrads = result if intermediate_grads else (result, None)
        return out, grads, model.inputs_embeds_grad, igrads


@pytest.mark.parametrize("B", [1, 4])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cls_name", POOLED_ONLY)
def test_the_last_layer_computes_the_cls_row_alone(monkeypatch, cls_name, dtype, B):
    """Eval mode, padding, B = 1 (one run) and 4 (the encoder's two halves): logits, loss, every
    gradient and inputs_embeds_grad as the reference's; the fast last layer ran on row 0 only
    (a spy on FastBertSelfAttention._forward_rows) and no other layer did."""
    from npbert.modeling.fast import FastBertSelfAttention
    config = config_for(cls_name)
    inputs = tiny_inputs(cls_name, config, B=B)
    calls = []
    original = FastBertSelfAttention._forward_rows

    def spy(self, hidden_states, *args):
        calls.append((self.prefix, args[-1]))
        return original(self, hidden_states, *args)
    monkeypatch.setattr(FastBertSelfAttention, "_forward_rows", spy)
    (out_f, grads_f, embeds_f, _), (out_r, grads_r, embeds_r, _) = (
        run_eval(path, cls_name, config, dtype, inputs) for path in ("fast", "reference"))
    last = f"bert.encoder.layer.{config.num_hidden_layers - 1}.attention.self."
    halves = 2 if (B * (2 if cls_name == "BertForMultipleChoice" else 1)) >= 2 else 1
    assert calls == [(last, (0, 1))] * halves
    tol = TOL[dtype]
    for key in ("logits", "loss"):
        assert _rel(out_f[key], out_r[key]) <= tol["outputs"], key
    assert_grads_agree(grads_f, grads_r, cls_name, dtype, tol)
    assert _rel(embeds_f, embeds_r) <= tol["grads"], "inputs_embeds_grad"


def test_the_cls_row_alone_with_intermediate_grads_and_a_3d_mask():
    """model.backward(return_intermediate_grads=True) after a forward whose last layer ran on row 0:
    the attention probabilities' gradients come back (B, N, T, T) (zero in the other query rows,
    as the reference's), the head-mask and hidden-state gradients as the reference's; a (B, T, T)
    attention mask is cut to the row too.  float64, 1e-12."""
    cls_name = "BertForSequenceClassification"
    config = config_for(cls_name)
    rng = np.random.default_rng(3)
    B, T = 4, 6
    inputs = dict(input_ids=rng.integers(1, config.vocab_size, (B, T)), labels=rng.integers(0, 2, B),
                  attention_mask=(rng.random((B, T, T)) < 0.8).astype(np.int64) | np.eye(T, dtype=np.int64))
    (_, grads_f, _, ig_f), (_, grads_r, _, ig_r) = (
        run_eval(path, cls_name, config, np.float64, inputs, intermediate_grads=True) for path in ("fast", "reference"))
    assert_grads_agree(grads_f, grads_r, cls_name, np.float64, TOL[np.float64])
    for field in ("hidden_states", "attentions", "head_mask"):
        for i, (a, b) in enumerate(zip(getattr(ig_f, field), getattr(ig_r, field))):
            assert _rel(a, b) <= 1e-12, f"{field}[{i}]"
    last = ig_r.attentions[-1]
    assert np.abs(last[:, :, 1:]).max() == 0 and np.abs(last[:, :, 0]).max() > 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_cls_row_alone_after_every_query_row_s_attention(monkeypatch, dtype):
    """With output_attentions (head importance reads every head's probabilities), the last layer
    runs every query row's attention and the rest of the layer on row 0 alone (a spy sees the
    last self-attention called with query_rows=(0, 1) and output_attentions, in both halves): the
    attentions, logits, loss, every gradient, and the head-mask and attention-probability
    gradients of return_intermediate_grads as the reference's (tolerances above)."""
    from npbert.modeling.fast import FastBertSelfAttention
    cls_name = "BertForSequenceClassification"
    config = config_for(cls_name)
    inputs = tiny_inputs(cls_name, config, B=4)
    seen = []
    original = FastBertSelfAttention.forward

    def spy(self, *args):
        seen.append((self.prefix, args[4:]))                 # (output_attentions, query_rows)
        return original(self, *args)
    monkeypatch.setattr(FastBertSelfAttention, "forward", spy)
    results = {}
    for path in ("fast", "reference"):
        with npbert.using_path(path):
            model = randomize(npbert.BertForSequenceClassification(config, dtype=dtype), seed=1).eval()
            out = model(**inputs, output_attentions=True)
            grads, igrads = model.backward(loss=1.0, return_intermediate_grads=True)
            results[path] = (out, grads, igrads)
    last = f"bert.encoder.layer.{config.num_hidden_layers - 1}.attention.self."
    assert [a for p, a in seen if p == last] == [(True, (0, 1))] * 2          # the last layer, both halves
    (out_f, grads_f, ig_f), (out_r, grads_r, ig_r) = results["fast"], results["reference"]
    tol = TOL[dtype]
    for key in ("logits", "loss"):
        assert _rel(out_f[key], out_r[key]) <= tol["outputs"], key
    for i, (a, b) in enumerate(zip(out_f.attentions, out_r.attentions)):
        assert _rel(a, b) <= tol["outputs"], f"attentions[{i}]"
    assert_grads_agree(grads_f, grads_r, cls_name, dtype, tol)
    for field in ("attentions", "head_mask"):
        for i, (a, b) in enumerate(zip(getattr(ig_f, field), getattr(ig_r, field))):
            assert _rel(a, b) <= tol["grads"], f"{field}[{i}]"
