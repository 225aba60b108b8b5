"""Every head against transformers in float64 on tiny random configs, dropout off:
the logits, the loss, and every parameter gradient, with labels (backward() differentiates the
loss) and without (upstream gradients by output name).  Tolerance: REL_TOL = 1e-9, normwise
relative error per array (see head_helpers.py for why); analytically zero gradients are checked
with an absolute bound relative to their layer's gradient scale (head_helpers.analytically_zero)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from head_helpers import (REL_TOL, analytically_zero, assert_close, assert_grads_close, make_models, t,  # noqa: E402
                         torch_grads)

B, T, C_CHOICES = 3, 7, 4
V = 29


def _padding_mask(rng, B, T):
    """Right padding: row 0 full, the others shorter (at least 2 tokens)."""
    lengths = [T] + list(rng.integers(2, T, size=B - 1))
    return (np.arange(T)[None, :] < np.array(lengths)[:, None]).astype(np.int64)


def _sparse_labels(rng, shape, high, keep=0.25, mask=None):
    """Integer labels in [0, high), most of them -100 (only `keep` of them counted, never
    all -100: the first position always counts), and -100 wherever `mask` is 0."""
    labels = rng.integers(0, high, size=shape)
    ignore = rng.random(shape) >= keep
    ignore.reshape(-1)[0] = False
    if mask is not None:
        ignore |= mask == 0
    return np.where(ignore, -100, labels)


def _inputs(rng, shape=(B, T)):
    mask = _padding_mask(rng, shape[0], shape[-1]) if len(shape) == 2 else None
    ids = rng.integers(1, V, size=shape)
    inputs = dict(input_ids=ids, token_type_ids=rng.integers(0, 2, size=shape))
    if mask is not None:
        ids[mask == 0] = 0   # [PAD]
        inputs["attention_mask"] = mask
    return inputs


# (case id, class name, config overrides, builder rng -> (inputs, labels))
def _pretraining(rng):
    x = _inputs(rng)
    return x, dict(labels=_sparse_labels(rng, (B, T), V, mask=x["attention_mask"]),
                   next_sentence_label=rng.integers(0, 2, size=B))


def _masked_lm(rng):
    x = _inputs(rng)
    return x, dict(labels=_sparse_labels(rng, (B, T), V, keep=0.2, mask=x["attention_mask"]))


def _causal_lm(rng):
    x = _inputs(rng)
    return x, dict(labels=np.where(x["attention_mask"] == 1, x["input_ids"], -100))


def _nsp(rng):
    return _inputs(rng), dict(labels=rng.integers(0, 2, size=B))


def _single_label(rng):
    return _inputs(rng), dict(labels=np.array([2, 0, 1], dtype=np.int64))


def _single_label_int32_ignored(rng):
    return _inputs(rng), dict(labels=np.array([2, -100, 1], dtype=np.int32))


def _multi_label(rng):
    return _inputs(rng), dict(labels=(rng.random((B, 4)) < 0.5).astype(np.float64))


def _regression(rng):
    return _inputs(rng), dict(labels=rng.normal(size=B))


def _regression_2d(rng):
    return _inputs(rng), dict(labels=rng.normal(size=(B, 3)))


def _token(rng):
    x = _inputs(rng)
    return x, dict(labels=_sparse_labels(rng, (B, T), 5, keep=0.4, mask=x["attention_mask"]))


def _multiple_choice(rng):
    shape = (B, C_CHOICES, T)
    ids = rng.integers(1, V, size=shape)
    lengths = rng.integers(3, T + 1, size=(B, C_CHOICES))
    mask = (np.arange(T) < lengths[..., None]).astype(np.int64)
    ids[mask == 0] = 0
    return (dict(input_ids=ids, attention_mask=mask, token_type_ids=rng.integers(0, 2, size=shape)),
            dict(labels=np.array([3, 0, 2])))


def _qa(rng):
    # row 0: an ordinary span; row 1: start beyond the window (clamped to T, ignored) and end
    # at T - 1; row 2: both beyond (ignored), and a negative end (clamped to 0, counted)
    return _inputs(rng), dict(start_positions=np.array([1, 50, T]), end_positions=np.array([4, T - 1, -3]))


CASES = [
    ("pretraining", "BertForPreTraining", {}, _pretraining),
    ("masked_lm", "BertForMaskedLM", {}, _masked_lm),
    ("causal_lm_padding", "BertLMHeadModel", dict(is_decoder=True), _causal_lm),
    ("nsp", "BertForNextSentencePrediction", {}, _nsp),
    ("seq_single_label", "BertForSequenceClassification", dict(num_labels=3), _single_label),
    ("seq_single_label_int32_ignored", "BertForSequenceClassification", dict(num_labels=3),
     _single_label_int32_ignored),
    ("seq_multi_label", "BertForSequenceClassification", dict(num_labels=4), _multi_label),
    ("seq_regression", "BertForSequenceClassification", dict(num_labels=1), _regression),
    ("seq_regression_3", "BertForSequenceClassification", dict(num_labels=3, problem_type="regression"),
     _regression_2d),
    ("token", "BertForTokenClassification", dict(num_labels=5), _token),
    ("multiple_choice", "BertForMultipleChoice", {}, _multiple_choice),
    ("qa_positions_beyond", "BertForQuestionAnswering", {}, _qa),
]

OUTPUT_NAMES = {"BertForPreTraining": ("prediction_logits", "seq_relationship_logits"),
                "BertForQuestionAnswering": ("start_logits", "end_logits")}


def _outputs(cls_name):
    return OUTPUT_NAMES.get(cls_name, ("logits",))


def _torch_call(model, inputs, labels=None):
    return model(**{k: t(v) for k, v in inputs.items()}, **{k: t(v) for k, v in (labels or {}).items()})


def _causal_reference_loss(logits, labels):
    """transformers 4.x's shifted loss in float64: logits at t predict labels at t + 1.
    (5.x computes the same after `logits.float()`, i.e. in float32; see test below.)"""
    shifted = logits[:, :-1, :].reshape(-1, logits.shape[-1])
    return torch.nn.functional.cross_entropy(shifted, t(labels)[:, 1:].reshape(-1), ignore_index=-100)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_loss_and_every_gradient(case):
    _, cls_name, overrides, build = case
    ours, theirs = make_models(cls_name, **overrides)
    inputs, labels = build(np.random.default_rng(7))

    out = ours(**inputs, **labels)
    grads = ours.backward()
    if labels.get("labels") is not None and labels["labels"].dtype == np.int32:
        labels_torch = dict(labels=labels["labels"].astype(np.int64))   # torch's cross-entropy refuses int32
    else:
        labels_torch = labels
    if cls_name == "BertLMHeadModel":
        tout = _torch_call(theirs, inputs)
        tloss = _causal_reference_loss(tout.logits, labels["labels"])
    else:
        tout = _torch_call(theirs, inputs, labels_torch)
        tloss = tout.loss
    tloss.backward()

    for name in _outputs(cls_name):
        assert_close(getattr(out, name), getattr(tout, name).detach().numpy(), name)
    assert np.asarray(out.loss).dtype == np.float64
    assert np.isfinite(out.loss)
    assert_close(out.loss, tloss.item(), "loss")
    tgrads = torch_grads(theirs)
    assert_grads_close(grads, tgrads, zero=analytically_zero(tgrads, cls_name, loss=True))


def test_causal_lm_loss_matches_transformers_own_float32_loss():
    """transformers 5.x's BertLMHeadModel casts the logits to float32 before the loss: its loss
    agrees with ours (float64 throughout) to float32 round-off, 1e-6 relative (eps32 = 1.2e-7
    times the ~V terms of a log-sum-exp)."""
    ours, theirs = make_models("BertLMHeadModel", is_decoder=True)
    inputs, labels = _causal_lm(np.random.default_rng(3))
    out = ours(**inputs, **labels)
    tout = _torch_call(theirs, inputs, labels)
    assert abs(float(out.loss) - tout.loss.item()) <= 1e-6 * abs(tout.loss.item())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_upstream_gradients_by_output_name(case):
    """No labels: backward(<output>=dOut) is the gradient of sum(output * dOut)."""
    _, cls_name, overrides, build = case
    ours, theirs = make_models(cls_name, **overrides)
    inputs, _ = build(np.random.default_rng(11))
    out = ours(**inputs)
    assert out.loss is None and "loss" not in out
    rng = np.random.default_rng(12)
    upstream = {name: rng.normal(size=getattr(out, name).shape) for name in _outputs(cls_name)}
    grads = ours.backward(**upstream)

    tout = _torch_call(theirs, inputs)
    total = sum((getattr(tout, name) * t(d)).sum() for name, d in upstream.items())
    total.backward()
    for name in _outputs(cls_name):
        assert_close(getattr(out, name), getattr(tout, name).detach().numpy(), name)
    tgrads = torch_grads(theirs)
    assert_grads_close(grads, tgrads, zero=analytically_zero(tgrads, cls_name, loss=False))


@pytest.mark.parametrize("cls_name,overrides,shape", [
    ("BertForMaskedLM", {}, (B, T)),
    ("BertForMultipleChoice", {}, (2, 3, T)),
    ("BertForQuestionAnswering", {}, (B, T)),
])
def test_inputs_embeds_gradient(cls_name, overrides, shape):
    """With inputs_embeds, model.inputs_embeds_grad equals torch's inputs_embeds.grad (for
    multiple choice shaped (B, C, T, H) as the input), and the tied word embedding gets only
    its decoder gradient (the lookup was not used)."""
    ours, theirs = make_models(cls_name, **overrides)
    rng = np.random.default_rng(5)
    embeds = rng.normal(size=shape + (ours.config.hidden_size,))
    out = ours(inputs_embeds=embeds)
    name = _outputs(cls_name)[0]
    dout = rng.normal(size=getattr(out, name).shape)
    grads = ours.backward(**{name: dout})

    temb = t(embeds).requires_grad_(True)
    tout = theirs(inputs_embeds=temb)
    (getattr(tout, name) * t(dout)).sum().backward()
    assert ours.inputs_embeds_grad.shape == embeds.shape
    assert_close(ours.inputs_embeds_grad, temb.grad.numpy(), "inputs_embeds gradient")
    tgrads = torch_grads(theirs)
    assert_grads_close(grads, tgrads, zero=analytically_zero(tgrads, cls_name, loss=False))


def test_hidden_states_and_attentions_pass_through():
    """A head forwards output_hidden_states / output_attentions and their upstream gradients."""
    ours, theirs = make_models("BertForTokenClassification", num_labels=3)
    inputs, _ = _token(np.random.default_rng(2))
    out = ours(**inputs, output_hidden_states=True, output_attentions=True)
    tout = theirs(**{k: t(v) for k, v in inputs.items()}, output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2
    for a, b in zip(out.hidden_states, tout.hidden_states):
        assert_close(a, b.detach().numpy(), "hidden_states")
    for a, b in zip(out.attentions, tout.attentions):
        assert_close(a, b.detach().numpy(), "attentions")
    rng = np.random.default_rng(3)
    dlogits = rng.normal(size=out.logits.shape)
    dhidden = [rng.normal(size=h.shape) for h in out.hidden_states]
    dattn = [rng.normal(size=a.shape) for a in out.attentions]
    grads = ours.backward(logits=dlogits, hidden_states=dhidden, attentions=dattn)
    total = (tout.logits * t(dlogits)).sum()
    total = total + sum((h * t(d)).sum() for h, d in zip(tout.hidden_states, dhidden))
    total = total + sum((a * t(d)).sum() for a, d in zip(tout.attentions, dattn))
    total.backward()
    tgrads = torch_grads(theirs)
    assert_grads_close(grads, tgrads, zero=analytically_zero(tgrads, "BertForTokenClassification", loss=False))


def test_all_labels_ignored_gives_nan_loss_and_zero_gradients_as_torch():
    """Every label -100: torch's mean over zero elements is NaN, and its gradient is zero."""
    ours, theirs = make_models("BertForMaskedLM")
    inputs, _ = _masked_lm(np.random.default_rng(4))
    labels = np.full((B, T), -100)
    out = ours(**inputs, labels=labels)
    grads = ours.backward()
    tout = _torch_call(theirs, inputs, dict(labels=labels))
    tout.loss.backward()
    assert np.isnan(out.loss) and np.isnan(tout.loss.item())
    tgrads = torch_grads(theirs)
    for name, g in grads.items():
        assert not g.any(), name
        assert not tgrads[name].any(), name


def test_problem_type_is_inferred_and_kept_as_transformers():
    for overrides, labels, expected in [
        (dict(num_labels=1), np.array([0.5, 1.0, -2.0]), "regression"),
        (dict(num_labels=1), np.array([1, 0, 2]), "regression"),                         # ints, K == 1
        (dict(num_labels=3), np.array([1, 0, 2], dtype=np.int64), "single_label_classification"),
        (dict(num_labels=3), np.array([1, 0, 2], dtype=np.int32), "single_label_classification"),
        (dict(num_labels=3), np.eye(3), "multi_label_classification"),
    ]:
        ours, theirs = make_models("BertForSequenceClassification", **overrides)
        inputs, _ = _nsp(np.random.default_rng(0))
        out = ours(**inputs, labels=labels)
        # transformers infers single-label for int32 too, but torch's cross-entropy then refuses
        # int32 targets; npbert accepts them.  Give torch int64.
        torch_labels = labels.astype(np.int64) if labels.dtype == np.int32 else labels
        tout = _torch_call(theirs, inputs, dict(labels=torch_labels))
        assert ours.config.problem_type == theirs.config.problem_type == expected
        assert_close(out.loss, tout.loss.item(), f"loss ({expected})")


def test_multiple_choice_logits_are_per_choice_scores():
    """Scoring the choices one at a time as separate batches gives the same logits column by
    column: the flattening keeps (b, c) order."""
    ours, _ = make_models("BertForMultipleChoice")
    inputs, _ = _multiple_choice(np.random.default_rng(9))
    out = ours(**inputs)
    assert out.logits.shape == (B, C_CHOICES)
    for c in range(C_CHOICES):
        single = ours(**{k: v[:, c:c + 1] for k, v in inputs.items()})
        np.testing.assert_allclose(single.logits[:, 0], out.logits[:, c], rtol=REL_TOL, atol=0)
