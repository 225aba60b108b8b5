"""Losses computed outside the model, as tutorials write them (issue "Tutorial code from anywhere"):

    loss = loss_fct(outputs.logits, labels); loss = loss / accumulation_steps; loss.backward()

npbert.nn's losses against torch's on the same expressions: the values on plain arrays, and the
parameters' .grad after backward() against transformers' model with the same weights and torch
autograd, float64.  Tolerances: the values are the same formula in another order of sums (1e-12
relative); the gradients go through a whole BERT's backward on both sides, each a few 1e-16
per operation, REL_TOL of head_helpers (1e-9 relative to each gradient's largest entry)."""
import numpy as np
import pytest

import npbert
from npbert import nn
from npbert.nn import functional as F
from heads.head_helpers import REL_TOL, analytically_zero, assert_grads_close, make_models, t, torch_grads

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def logits_and_targets(shape=(5, 4), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape) * 2
    y = rng.integers(0, shape[1], size=(shape[0],) + shape[2:])
    return x, y


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"ignore_index": 2}, {"label_smoothing": 0.1},
                                    {"weight": [0.5, 2.0, 1.0, 0.1]},
                                    {"weight": [0.5, 2.0, 1.0, 0.1], "label_smoothing": 0.2, "ignore_index": 1},
                                    {"reduction": "none"}])
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 6), (4,)])
def test_cross_entropy_values_equal_torchs(kwargs, shape):
    if len(shape) == 1:                                                # one example, no batch axis
        x, y = np.random.default_rng(0).normal(size=shape) * 2, np.int64(1)
    else:
        x, y = logits_and_targets(shape)
    tk = dict(kwargs)
    if "weight" in tk:
        tk["weight"] = torch.tensor(tk["weight"], dtype=torch.float64)
    want = TF.cross_entropy(t(x), torch.as_tensor(np.asarray(y)), **tk).numpy()
    got = F.cross_entropy(x, y, **kwargs)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(nn.CrossEntropyLoss(**kwargs)(x, y), got)   # (nan where torch's is: every target ignored)


def test_probability_targets_and_the_other_losses_equal_torchs():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 3))
    q = rng.dirichlet(np.ones(3), size=6)
    np.testing.assert_allclose(F.cross_entropy(x, q, label_smoothing=0.1),
                               TF.cross_entropy(t(x), t(q), label_smoothing=0.1).numpy(), rtol=1e-12)
    y = rng.normal(size=(6, 3))
    for red in ("mean", "sum"):
        np.testing.assert_allclose(F.mse_loss(x, y, reduction=red), TF.mse_loss(t(x), t(y), reduction=red).numpy(),
                                   rtol=1e-12)
    b = (rng.random((6, 3)) < 0.5).astype(np.float64)
    pw, w = np.array([1.0, 3.0, 0.5]), rng.random((6, 3))
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(x * 20, b, weight=w, pos_weight=pw),
                               TF.binary_cross_entropy_with_logits(t(x * 20), t(b), weight=t(w),
                                                                   pos_weight=t(pw)).numpy(), rtol=1e-12)


def torch_step(theirs, ids, mask, expression):
    theirs.zero_grad()
    out = theirs(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(mask))
    expression(out, torch).backward()
    return torch_grads(theirs)


def npbert_step(ours, ids, mask, expression):
    ours.zero_grad()
    out = ours(input_ids=ids, attention_mask=mask)
    expression(out, None).backward()
    return {n: (p.grad if p.grad is not None else np.zeros(p.shape)) for n, p in ours.named_parameters()}


ids = np.array([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0], [2, 9, 8, 11, 3]])
mask = (ids > 0).astype(np.int64)
labels = np.array([1, 0, 2])


def ce(out, lib):
    """the tutorial's loop: cross-entropy over the logits, divided by the accumulation steps"""
    if lib is None:
        return nn.CrossEntropyLoss()(out.logits, labels) / 4
    return torch.nn.CrossEntropyLoss()(out.logits, torch.as_tensor(labels)) / 4


def smoothed_plus_scaled(out, lib):
    """two losses of one forward added, one scaled, a constant added"""
    if lib is None:
        a = F.cross_entropy(out.logits, labels, label_smoothing=0.1, weight=np.array([1.0, 2.0, 0.5]))
        return 0.5 * a + F.mse_loss(out.logits[:, 0], labels.astype(np.float64)) - 1.0
    a = TF.cross_entropy(out.logits, torch.as_tensor(labels), label_smoothing=0.1,
                         weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64))
    return 0.5 * a + TF.mse_loss(out.logits[:, 0], torch.as_tensor(labels, dtype=torch.float64)) - 1.0


def with_the_models_own(out, lib):
    """the model's own loss plus one computed from its logits (labels passed to neither: own = CE here)"""
    if lib is None:
        return F.cross_entropy(out.logits, labels) + F.binary_cross_entropy_with_logits(
            out.logits, np.eye(3)[labels])
    return TF.cross_entropy(out.logits, torch.as_tensor(labels)) + TF.binary_cross_entropy_with_logits(
        out.logits, torch.as_tensor(np.eye(3)[labels]))


@pytest.mark.parametrize("expression", [ce, smoothed_plus_scaled, with_the_models_own])
def test_backward_of_a_loss_computed_from_the_logits_equals_torch_autograd(expression):
    ours, theirs = make_models("BertForSequenceClassification", num_labels=3)
    want = torch_step(theirs, ids, mask, expression)
    got = npbert_step(ours, ids, mask, expression)
    assert_grads_close(got, want, zero=analytically_zero(want, "BertForSequenceClassification", loss=False),
                       tol=REL_TOL)


def test_token_logits_reshaped_as_tutorials_do():
    """loss_fct(logits.view(-1, K), labels.view(-1)) with -100 on padding: a reshape of the output."""
    ours, theirs = make_models("BertForTokenClassification", num_labels=3)
    token_labels = np.where(mask == 1, np.arange(15).reshape(3, 5) % 3, -100)

    def expression(out, lib):
        if lib is None:
            return nn.CrossEntropyLoss()(out.logits.reshape(-1, 3), token_labels.reshape(-1))
        return torch.nn.CrossEntropyLoss()(out.logits.view(-1, 3), torch.as_tensor(token_labels).view(-1))
    want = torch_step(theirs, ids, mask, expression)
    got = npbert_step(ours, ids, mask, expression)
    assert_grads_close(got, want, zero=analytically_zero(want, "BertForTokenClassification", loss=False),
                       tol=REL_TOL)


def test_what_cannot_be_differentiated_says_so():
    ours, _ = make_models("BertForSequenceClassification", num_labels=3)
    out = ours(input_ids=ids, attention_mask=mask)
    loss = F.cross_entropy(out.logits, labels)
    assert isinstance(loss * 2, type(loss)) and isinstance(loss + loss, type(loss))
    assert not isinstance(loss * loss, type(loss))                     # a product of losses: a plain float
    plain = F.cross_entropy(np.array(out.logits), labels)             # a copy: no longer the model's output
    with pytest.raises(RuntimeError, match="not computed from a model's outputs"):
        plain.backward()
    assert float(plain) == pytest.approx(float(loss), rel=1e-15)
    ours(input_ids=ids, attention_mask=mask)                           # a new forward: the old logits' is gone
    with pytest.raises(RuntimeError, match="called again since"):
        loss.backward()
    with pytest.raises(TypeError, match="class indices"):
        F.cross_entropy(out.logits, labels.astype(bool))
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(out.logits, out.logits, reduction="avg")
