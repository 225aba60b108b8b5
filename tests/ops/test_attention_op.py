"""npbert.ops.attention (= npbert.functional.attention_forward/backward): what BertSelfAttention
computes between its projections, and its fast twin npbert.fast.attention (a test taking `F`,
tests/ops/conftest.py, runs on both).

Checked against the plain formula softmax(q k^T / sqrt(D) + mask) v written out here in float64
(equal to 1e-12: the op runs the same float64 operations per batch row, only split over threads),
against finite differences (cs231n relative error < 1e-7, five-point stencil as for softmax: the
probabilities span orders of magnitude), with dropout and a head mask, and against torch's
scaled_dot_product_attention.  The model parity tests in tests/modeling check the module's own
steps (the reference BertSelfAttention) and the fast twin's use of the fast op.
"""
import numpy as np
import pytest

import npbert.fast
import npbert.functional
import npbert.ops.attention
from npbert.gradcheck import check_forward_backward
from npbert.ops.dropout import keep_mask

FD_TOL = 1e-7
FD_FINE = dict(h=1e-3, order=4)


def plain_attention(q, k, v, mask=None, head_mask=None, keep=None, p=0.0):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask
    e = np.exp(scores - scores.max(-1, keepdims=True))
    probs = e / e.sum(-1, keepdims=True)
    if keep is not None:
        probs = probs * keep / (1.0 - p)
    if head_mask is not None:
        probs = probs * head_mask[None, :, None, None]
    return probs @ v, probs


def qkv(seed, B=2, N=3, F_=4, T=5, D=6):
    r = np.random.default_rng(seed)
    return r.standard_normal((B, N, F_, D)), r.standard_normal((B, N, T, D)), r.standard_normal((B, N, T, D))


def padding_mask(B, T, lengths, dtype=np.float64):
    keep = np.arange(T)[None, :] < np.asarray(lengths)[:, None]                 # (B, T)
    return ((1.0 - keep) * np.finfo(dtype).min).astype(dtype)[:, None, None, :]  # (B, 1, 1, T)


def test_functional_is_the_reference_op_and_fast_its_twin():
    assert npbert.functional.attention_forward is npbert.ops.attention.attention_forward
    assert npbert.functional.attention_backward is npbert.ops.attention.attention_backward
    assert npbert.fast.attention_forward is npbert.fast.attention.attention_forward


@pytest.mark.parametrize("mask_kind", ["none", "padding", "full", "broadcast"])
def test_forward_equals_the_formula(F, mask_kind):
    q, k, v = qkv(0)
    mask = {"none": None, "padding": padding_mask(2, 5, [5, 2]),
            "full": np.random.default_rng(1).standard_normal((2, 3, 4, 5)),
            "broadcast": np.random.default_rng(2).standard_normal(5)}[mask_kind]
    context, cache = F.attention_forward(q, k, v, mask)
    want, want_probs = plain_attention(q, k, v, None if mask is None else np.broadcast_to(mask, (2, 3, 4, 5)))
    np.testing.assert_allclose(context, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cache["probs"], want_probs, rtol=1e-12, atol=1e-12)
    if mask_kind == "padding":
        assert np.all(cache["probs"][1, :, :, 2:] == 0.0)                           # masked keys get nothing


def test_forward_with_dropout_and_head_mask_equals_the_formula(F):
    q, k, v = qkv(3)
    head_mask = np.array([1.0, 0.0, 0.5])
    context, cache = F.attention_forward(q, k, v, None, head_mask, 0.25, np.random.default_rng(7), True)
    keep = keep_mask(np.random.default_rng(7), (2, 3, 4, 5), 0.25)                 # the same draws
    want, _ = plain_attention(q, k, v, None, head_mask, keep, 0.25)
    np.testing.assert_allclose(context, want, rtol=1e-12, atol=1e-12)
    assert np.all(context[:, 1] == 0.0)


def test_large_logits_stay_finite(F):
    q, k, v = qkv(4)
    context, cache = F.attention_forward(q * 300, k * 300, v, padding_mask(2, 5, [3, 1]))
    assert np.all(np.isfinite(context)) and np.allclose(cache["probs"].sum(-1), 1.0)


@pytest.mark.parametrize("extras", ["plain", "mask_and_head_mask", "dropout"])
def test_backward_finite_differences(F, extras):
    q, k, v = qkv(5)
    mask = padding_mask(2, 5, [5, 3]) if extras != "plain" else None
    head_mask = np.array([1.0, 0.3, 0.0]) if extras == "mask_and_head_mask" else None
    p, seed = (0.3, 11) if extras == "dropout" else (0.0, None)

    def forward(q, k, v):
        return F.attention_forward(q, k, v, mask, head_mask, p, np.random.default_rng(seed) if seed else None, p > 0)

    def backward(dcontext, cache):
        dq, dk, dv = F.attention_backward(dcontext, cache)
        return {"q": dq, "k": dk, "v": dv}

    # judged by npbert.gradcheck's verdict (c.ok, c.error: small entries against the scale of the
    # whole gradient), not cs231n's rel_error, whose 1e-8 floor judges an entry near 0 (dk has a
    # direction that is 0 in exact arithmetic: the softmax ignores a shift of every key) by its
    # own round-off
    for name, c in check_forward_backward(forward, backward, {"q": q, "k": k, "v": v}, **FD_FINE).items():
        assert c.ok and c.error < FD_TOL, (extras, name, c.error, c.bad, c.note)


def test_backward_with_an_upstream_gradient_of_the_probabilities(F):
    """dprobs (someone used the returned attentions in a loss) adds to the path through v."""
    q, k, v = qkv(6)
    r = np.random.default_rng(8)
    dcontext, dprobs = r.standard_normal((2, 3, 4, 6)), r.standard_normal((2, 3, 4, 5))

    def loss(q):
        context, cache = F.attention_forward(q, k, v)
        return np.sum(context * dcontext) + np.sum(cache["probs"] * dprobs)

    _, cache = F.attention_forward(q, k, v)
    dq, _, _ = F.attention_backward(dcontext, cache, dprobs)
    from npbert.gradcheck import numerical_gradient, rel_error
    assert rel_error(numerical_gradient(loss, q.copy(), **FD_FINE), dq) < FD_TOL


def test_fast_out_arrays_and_free():
    """The fast op writes the context into `out=` and the gradients into `out=(dq, dk, dv)`, and
    with free=True empties its cache; the numbers are those of the plain call."""
    from npbert.fast.attention import attention_backward, attention_forward
    q, k, v = qkv(9)
    out = np.full((2, 4, 3, 6), np.nan).transpose(0, 2, 1, 3)                       # a (B, N, F, D) view
    context, cache = attention_forward(q, k, v, out=out)
    assert context is out and np.allclose(out, plain_attention(q, k, v)[0])
    dcontext = np.random.default_rng(10).standard_normal(context.shape)
    want = attention_backward(dcontext, dict(cache))
    outs = tuple(np.empty_like(a) for a in (q, k, v))
    got = attention_backward(dcontext, cache, out=outs, free=True)
    assert all(g is o for g, o in zip(got, outs)) and cache == {}
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_float32_stays_float32_and_inputs_unchanged(F):
    q, k, v = (a.astype(np.float32) for a in qkv(12))
    before = [a.copy() for a in (q, k, v)]
    mask = padding_mask(2, 5, [4, 5], np.float32)
    context, cache = F.attention_forward(q, k, v, mask)
    grads = F.attention_backward(np.ones_like(context), cache)
    assert context.dtype == np.float32 and all(g.dtype == np.float32 for g in grads)
    assert all(np.array_equal(a, b) for a, b in zip(before, (q, k, v)))


@pytest.mark.parametrize("bad, match", [
    (dict(q=np.zeros((2, 3, 4))), r"q must be \(B, N, T, D\)"),
    (dict(k=np.zeros((2, 3, 5, 7))), "do not agree"),
    (dict(mask=np.zeros((2, 1, 1, 6))), "does not broadcast"),
    (dict(head_mask=np.ones(4)), r"head_mask must be \(3,\)"),
    (dict(dropout_p=0.1, training=True), "needs a generator"),
])
def test_bad_input_is_named(F, bad, match):
    q, k, v = qkv(13)
    args = dict(q=q, k=k, v=k.copy(), mask=None, head_mask=None, dropout_p=0.0, rng=None, training=False)
    args.update(bad)
    if "k" in bad:
        args["v"] = bad["k"]
    with pytest.raises(ValueError, match=match):
        F.attention_forward(**args)


def test_equals_torch_scaled_dot_product_attention(F):
    torch = pytest.importorskip("torch")
    q, k, v = qkv(14)
    mask = padding_mask(2, 5, [5, 2])
    want = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)),
                                                            attn_mask=torch.tensor(mask)).numpy()
    np.testing.assert_allclose(F.attention_forward(q, k, v, mask)[0], want, rtol=1e-10, atol=1e-12)


def test_scale_given_replaces_the_default(F):
    """BertSelfAttention passes its `scaling`; given, it is what q k^T is multiplied by."""
    q, k, v = qkv(15)
    context, cache = F.attention_forward(q, k, v, scale=0.5)
    want, _ = plain_attention(q * (0.5 * np.sqrt(q.shape[-1])), k, v)     # plain_attention divides by sqrt(D)
    np.testing.assert_allclose(context, want, rtol=1e-12, atol=1e-12)
    assert cache["scale"] == 0.5
