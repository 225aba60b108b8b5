"""Every fast op (npbert/fast) computes what its reference (npbert/ops) computes, on shapes,
masks and dtypes drawn by hypothesis (masks from npbert.testing), and accepts the reference's
cache (the two caches are the same, so a backward may run on the other path than its forward).

Bit-equal, because the arithmetic is the same operation for operation:
    softmax_forward                                   (in place, the same ufuncs)
    the attention backward's dv                       (per batch row: the same GEMMs)
    gelu_forward / gelu_backward in float64           (the fast twin is the reference there)
    dropout_forward / _backward, keep_mask            (the same bits, drawn in pieces)
    embedding_backward with more than 256 distinct ids (np.add.at on both)
Equal to round-off, because sums run in another order:
    layer_norm_forward and layer_norm_backward's dx (a row's sums are einsums on the fast path): entry by entry within the bounds of layer_norm_forward_bounds and
    layer_norm_backward_bound (C-term sums in another order, carried through rstd).
    layer_norm_backward's parameter gradients (einsum over the rows) and embedding_backward with
    few distinct ids (a one-hot GEMM), normwise (max |fast - ref| / max |ref|): float64 <= 1e-12,
    float32 <= 16 ulp (measured <= 4).
    softmax_forward_unshifted (exp(x) / sum exp(x), not shifted by the row max) and so
    attention_forward's probabilities and context: entry by entry within unshifted_bound
    (the reference's shifted exponent x - max(x) is itself rounded), carried through probs v.
    Its fallbacks (scores too large, underflowed rows, NaN) are the reference's, bit-equal.
    softmax_backward and the attention backward's dq, dk (the row sums s = sum(dy y) are an
    einsum): entry by entry within the bound of a T-term sum taken in another order,
    2 (T + 2) eps y (|dy| + sum |dy y|), carried through dscores @ k and dscores^T @ q.  (A
    normwise bound would not do: where one probability is near 1, dy - s cancels and the whole
    gradient is tiny against the terms it came from.)
Approximated on the fast path: the float32 GELU (17 passes, npbert/fast/gelu.py): within
    3e-7 |x| of the reference forward (2.5 ulp of x; measured 2.0e-7) and 4e-7 |dy| backward.
"""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npbert.fast as fast
import npbert.ops as ref
import npbert.testing as nt
from npbert.fast.softmax import softmax_forward_unshifted
from npbert.ops.dropout import DropoutKey

EPS32 = float(np.finfo(np.float32).eps)
ROUND_OFF = {np.float64: 1e-12, np.float32: 16 * EPS32}
SETTINGS = settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
dtypes = st.sampled_from([np.float64, np.float32])


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    scale = np.abs(b).max() if b.size else 0.0
    diff = np.abs(a - b).max() if a.size else 0.0
    return diff / scale if scale else diff


def arrays(draw, shape, dtype, scale=2.0):
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


@st.composite
def rows(draw, max_leading=3, max_features=40):
    lead = draw(st.lists(st.integers(1, 6), min_size=1, max_size=max_leading))
    return tuple(lead) + (draw(st.integers(1, max_features)),)


def layer_norm_forward_bounds(x, cache, weight, bias):
    """How far two LayerNorm forwards that take a row's sums in other orders can be apart, entry
    by entry.  Each mean of C terms (the reference's pairwise sum / C, the fast einsum with a
    rounded 1/C) is within (C + 2) eps max|x| of the exact one, so the two means differ by
    dm <= 2 (C + 2) eps max|x|, and xhat by dm rstd = 2 (C + 2) eps s with s = max|x| rstd (large
    where the row's mean dwarfs its spread: cancellation, on both paths).  The variances (sums of
    squares) differ by 2 (C + 2) eps relative, plus what dm does to them, so rstd and through it
    xhat by (C + 2) eps (1 + s) relative.  Doubled for the roundings of sqrt, divide and the
    final multiply-add.  Returns the bounds on (xhat, rstd, y)."""
    xhat, rstd, _ = cache
    C = x.shape[-1]
    eps = np.finfo(x.dtype).eps
    s = np.abs(x).max(axis=-1, keepdims=True) * rstd                                # (..., 1)
    b_rstd = 4 * (C + 2) * eps * (1 + s) * rstd
    b_xhat = 4 * (C + 2) * eps * (s * (1 + np.abs(xhat)) + np.abs(xhat))
    b_y = np.abs(weight) * b_xhat + 4 * eps * (np.abs(weight * xhat) + np.abs(bias))
    return b_xhat, b_rstd, b_y


def layer_norm_backward_bound(dy, cache):
    """The same for dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy weight, on one cache:
    the two row means differ by 2 (C + 2) eps max|g| and 2 (C + 2) eps max|g xhat|, and the
    terms are rounded in another order (a few eps of each), all times rstd; doubled."""
    xhat, rstd, weight = cache
    C = dy.shape[-1]
    eps = np.finfo(dy.dtype).eps
    g = np.abs(dy * weight)
    gx = np.abs(dy * weight * xhat)
    sums = (C + 2) * (g.max(axis=-1, keepdims=True) + np.abs(xhat) * gx.max(axis=-1, keepdims=True))
    terms = g + g.mean(axis=-1, keepdims=True) + np.abs(xhat) * gx.mean(axis=-1, keepdims=True)
    return 2 * rstd * (2 * eps * sums + 6 * eps * terms)


@SETTINGS
@given(data=st.data(), dtype=dtypes, eps=st.sampled_from([1e-12, 1e-5]),
       offset=st.sampled_from([0.0, 30.0]))
def test_layer_norm(data, dtype, eps, offset):
    """The fast LayerNorm's row sums are dot products (einsums), the reference's pairwise sums:
    equal within the bounds above, entry by entry; rows with a mean 15 times their spread
    (offset 30) included, where both cancel."""
    shape = data.draw(rows())
    C = shape[-1]
    x = arrays(data.draw, shape, dtype) + dtype(offset)
    dy = arrays(data.draw, shape, dtype)
    w, b = arrays(data.draw, (C,), dtype), arrays(data.draw, (C,), dtype)
    y_r, cache_r = ref.layer_norm_forward(x, w, b, eps)
    y_f, cache_f = fast.layer_norm_forward(x, w, b, eps)
    b_xhat, b_rstd, b_y = layer_norm_forward_bounds(x, cache_r, w, b)
    assert np.all(np.abs(y_f - y_r) <= b_y)
    assert np.all(np.abs(cache_f[0] - cache_r[0]) <= b_xhat)
    assert np.all(np.abs(cache_f[1] - cache_r[1]) <= b_rstd)
    for cache in (cache_f, cache_r):                     # the fast backward takes either cache
        dx_f, g_f = fast.layer_norm_backward(dy, cache)
        dx_r, g_r = ref.layer_norm_backward(dy, cache)
        assert np.all(np.abs(dx_f - dx_r) <= layer_norm_backward_bound(dy, cache))
        for k in ("weight", "bias"):
            assert g_f[k].shape == g_r[k].shape == (C,)
            assert rel(g_f[k], g_r[k]) <= ROUND_OFF[dtype], k
    dx_frozen, g_frozen = fast.layer_norm_backward(dy, cache_r, param_grads=False)   # a frozen LayerNorm
    assert g_frozen == {}
    np.testing.assert_array_equal(dx_frozen, fast.layer_norm_backward(dy, cache_r)[0])


def softmax_backward_bound(dy, y):
    """How far two softmax backwards that sum s = sum(dy y) in different orders can be apart,
    entry by entry: s is off by at most T eps sum |dy y| each, dx = y (dy - s) carries it."""
    T, eps = y.shape[-1], np.finfo(y.dtype).eps
    return 2 * (T + 2) * eps * y * (np.abs(dy) + (np.abs(dy) * y).sum(axis=-1, keepdims=True))


@SETTINGS
@given(data=st.data(), dtype=dtypes)
def test_softmax(data, dtype):
    shape = data.draw(rows(max_features=20))
    x, dy = arrays(data.draw, shape, dtype, scale=5.0), arrays(data.draw, shape, dtype)
    y_r, cache_r = ref.softmax_forward(x)
    y_f, cache_f = fast.softmax_forward(x)
    np.testing.assert_array_equal(y_f, y_r)
    diff = np.abs(fast.softmax_backward(dy, cache_r) - ref.softmax_backward(dy, cache_r))
    assert np.all(diff <= softmax_backward_bound(dy, y_r))


def unshifted_bound(x, y, dtype):
    """How far exp(x) / sum exp(x) can be from the reference's exp(x - m) / sum exp(x - m) (m the
    row max), entry by entry, y the reference's output.  The reference's exponent x - m is rounded
    (relative error eps/2 of |x - m|, which exp turns into a relative error of its result), each
    exp is within 4 eps of its exact value (NumPy's SIMD exp: under 4 ulp), each T-term sum within
    T eps, each quotient within eps; the sum carries its terms' errors weighted by y.  In float64
    (|x - m| of a masked entry is about float32's max); 2 tiny as a floor for subnormal exps."""
    eps, tiny = float(np.finfo(dtype).eps), float(np.finfo(dtype).tiny)
    x, y = x.astype(np.float64), y.astype(np.float64)
    gap = np.abs(x - x.max(axis=-1, keepdims=True))                                # |x - m|
    weighted = np.where(y > 0, y * gap, 0).sum(axis=-1, keepdims=True)            # the sum's share
    return np.where(y > 0, y * eps * (gap + weighted + 2 * x.shape[-1] + 20), 0) + 2 * tiny


@SETTINGS
@given(data=st.data(), dtype=dtypes, case=st.sampled_from(["plain", "large", "underflow", "nan", "masked"]))
def test_softmax_unshifted(data, dtype, case):
    """Within unshifted_bound of the reference where it runs; the reference's numbers, bit-equal,
    where it falls back (a batch row whose scores could overflow, a row whose exps underflow, NaN),
    those batch rows only; and each batch row's numbers its own (the same computed alone)."""
    n, lead, T = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 12))
    x = arrays(data.draw, (n, lead, T), dtype, scale=5.0)
    odd = data.draw(st.integers(0, n - 1))                                        # the batch row made odd
    if case == "large":
        x[odd] += dtype(100 if dtype == np.float32 else 800)
    elif case == "underflow":
        x[odd, 0] -= dtype(60)
    elif case == "nan":
        x[odd, 0, 0] = np.nan
    elif case == "masked":
        x[..., :T // 2] += np.finfo(dtype).min
    y_r, _ = ref.softmax_forward(x)
    again = []

    def scores_again(i):
        again.append(i)
        y_f[i] = x[i]
    y_f = x.copy()
    softmax_forward_unshifted(y_f, scores_again)
    for i in range(n):
        if case in ("large", "underflow", "nan") and i == odd:
            np.testing.assert_array_equal(y_f[i], y_r[i])                            # the reference's, NaN too
        else:
            assert np.all(np.abs(y_f[i] - y_r[i]) <= unshifted_bound(x[i], y_r[i], dtype)), i
            alone = x[i:i + 1].copy()
            softmax_forward_unshifted(alone, lambda _: None)
            np.testing.assert_array_equal(alone[0], y_f[i])                       # its own numbers
    assert again == ([odd] if case == "underflow" else [])


def test_softmax_unshifted_bound_can_fail():
    """A planted error of 1e-5 relative in one probability breaks the float32 bound (about
    (|x - m| + 40) eps ~ 1e-5 only for gaps near 40; 3e-5 is past it)."""
    x = np.random.default_rng(0).normal(size=(1, 2, 6)).astype(np.float32)
    y_r, _ = ref.softmax_forward(x)
    y_f = x.copy()
    softmax_forward_unshifted(y_f, lambda _: None)
    assert np.all(np.abs(y_f - y_r) <= unshifted_bound(x, y_r, np.float32))
    y_f[0, 0, 0] *= np.float32(1 + 3e-5)
    assert not np.all(np.abs(y_f - y_r) <= unshifted_bound(x, y_r, np.float32))


@SETTINGS
@given(data=st.data(), dtype=dtypes, p=st.sampled_from([0.0, 0.1, 0.5]), training=st.booleans())
def test_attention(data, dtype, p, training):
    B, N, T, D = (data.draw(st.integers(1, n)) for n in (4, 3, 7, 5))
    q, k, v, dcontext = (arrays(data.draw, (B, N, T, D), dtype) for _ in range(4))
    padding = data.draw(nt.attention_masks(B, T))                                   # (B, T) 0/1
    mask = ((1.0 - padding[:, None, None, :]) * np.finfo(dtype).min).astype(dtype)  # (B, 1, 1, T)
    head_mask = data.draw(st.none() | st.just(np.array([1.0, 0.0, 0.5][:N], dtype)))
    key = DropoutKey(data.draw(st.integers(0, 2 ** 64 - 1)), "encoder.layer.0.attention.self.dropout",
                     data.draw(st.integers(0, 1000)))
    args = (q, k, v, mask, head_mask, p, key, training)
    context_r, cache_r = ref.attention_forward(*args)
    context_f, cache_f = fast.attention_forward(*args)
    # the softmax within unshifted_bound; dropout's 1 / (1 - p) and the head mask (<= 1) scale
    # it, rounding once more; probs v carries it, plus each side's own T-term sums.
    scores = q @ k.transpose(0, 1, 3, 2) * cache_r["scale"] + mask                  # (B, N, T, T)
    eps = float(np.finfo(dtype).eps)
    dA = unshifted_bound(scores, cache_r["softmax"], dtype) / (1 - p if training else 1)
    dP = dA + 2 * eps * np.abs(cache_r["probs"])
    assert np.all(np.abs(cache_f["softmax"] - cache_r["softmax"]) <= unshifted_bound(scores, cache_r["softmax"],
                                                                                       dtype))
    assert np.all(np.abs(cache_f["probs"] - cache_r["probs"]) <= dP)
    assert np.all(np.abs(context_f - context_r) <= dP @ np.abs(v) + 2 * T * eps * (np.abs(cache_r["probs"]) @ np.abs(v)))
    assert set(cache_f) == set(cache_r)
    dprobs = arrays(data.draw, (B, N, T, T), dtype)
    dq_r, dk_r, dv_r = ref.attention_backward(dcontext, cache_r, dprobs)
    dq_f, dk_f, dv_f = fast.attention_backward(dcontext, dict(cache_r), dprobs)
    np.testing.assert_array_equal(dv_f, dv_r)
    # dscores = scale * softmax_backward(dA, A): its entries differ by at most the softmax bound,
    # and dq = dscores k, dk = dscores^T q carry that (plus their own T-term sums' round-off).
    A = cache_r["softmax"]
    dA = ref.dropout_backward(dprobs + dcontext @ v.transpose(0, 1, 3, 2) if head_mask is None
                              else (dprobs + dcontext @ v.transpose(0, 1, 3, 2)) * head_mask[None, :, None, None],
                              cache_r["dropout"])
    scale = cache_r["scale"]
    bound = np.abs(scale) * softmax_backward_bound(dA, A) * 2                      # (B, N, F, T)
    dscores = np.abs(scale * ref.softmax_backward(dA, A))
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(dq_f - dq_r) <= bound @ np.abs(k) + 2 * T * eps * (dscores @ np.abs(k)))
    assert np.all(np.abs(dk_f - dk_r) <= bound.transpose(0, 1, 3, 2) @ np.abs(q)
                  + 2 * T * eps * (dscores.transpose(0, 1, 3, 2) @ np.abs(q)))


@SETTINGS
@given(data=st.data(), dtype=dtypes)
def test_gelu(data, dtype):
    shape = data.draw(rows())
    x, dy = arrays(data.draw, shape, dtype, scale=4.0), arrays(data.draw, shape, dtype)
    y_r, cache_r = ref.gelu_forward(x)
    y_f, cache_f = fast.gelu_forward(x)
    dx_r = ref.gelu_backward(dy, cache_r)
    dx_f = fast.gelu_backward(dy, cache_f)
    dx_from_y = fast.gelu_backward(dy, cache_f, y=y_f)
    if dtype == np.float64:
        np.testing.assert_array_equal(y_f, y_r)
        np.testing.assert_array_equal(dx_f, dx_r)
        np.testing.assert_array_equal(dx_from_y, dx_r)
    else:
        assert np.all(np.abs(y_f - y_r) <= 3e-7 * np.abs(x))
        assert np.all(np.abs(dx_f - dx_r) <= 4e-7 * np.abs(dy))
        assert np.all(np.abs(dx_from_y - dx_r) <= 1.2e-6 * np.abs(dy))     # y / x: two roundings more


@SETTINGS
@given(data=st.data(), dtype=dtypes, V=st.sampled_from([7, 300, 2000]))
def test_embedding_backward(data, dtype, V):
    B, T, C = (data.draw(st.integers(1, n)) for n in (5, 40, 6))
    ids = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1))).integers(0, V, (B, T))
    weight, dout = arrays(data.draw, (V, C), dtype), arrays(data.draw, (B, T, C), dtype)
    out_r, cache = ref.embedding_forward(ids, weight)
    out_f, cache_f = fast.embedding_forward(ids, weight)
    np.testing.assert_array_equal(out_f, out_r)
    for padding_idx in (None, 0):
        dw_r = ref.embedding_backward(dout, cache, padding_idx)
        dw_f = fast.embedding_backward(dout, cache, padding_idx)
        if len(np.unique(ids)) > 256:
            np.testing.assert_array_equal(dw_f, dw_r)
        else:
            assert rel(dw_f, dw_r) <= ROUND_OFF[dtype]


@SETTINGS
@given(data=st.data(), dtype=dtypes, p=st.sampled_from([0.1, 0.5, 1.0]), keyed=st.booleans())
def test_dropout(data, dtype, p, keyed):
    shape = data.draw(rows(max_features=300))
    x, dy = arrays(data.draw, shape, dtype), arrays(data.draw, shape, dtype)
    seed = data.draw(st.integers(0, 2 ** 64 - 1))

    def source():
        if keyed:
            return DropoutKey(seed, "embeddings.dropout", 17)
        return np.random.default_rng(seed)
    y_r, cache_r = ref.dropout_forward(x, p, source(), True)
    y_f, cache_f = fast.dropout_forward(x, p, source(), True)
    np.testing.assert_array_equal(y_f, y_r)
    np.testing.assert_array_equal(fast.dropout_backward(dy, cache_r), ref.dropout_backward(dy, cache_r))


def test_the_fast_namespace_has_every_reference_name():
    """A module reads F.<name> from either path (npbert/modeling/module.py: ops_for_path)."""
    assert [n for n in ref.OP_NAMES if not hasattr(fast, n)] == []
