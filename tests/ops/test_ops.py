"""Leaf ops: linear, embedding, layer_norm, softmax, dropout, on both paths (a test taking `F`,
tests/ops/conftest.py, runs for the reference ops and for their fast twins).

For each: finite differences in float64 on every input and parameter (cs231n relative error
< 1e-7, the plain 2-point centred difference with h = 1e-6 except for softmax, see FD_FINE), gradient shapes equal to the parameter shapes, the dtype kept in float32
and float64, inputs and dout never mutated, and the same numbers as torch where torch has
the op.  (Activations are in test_activations.py.)
"""
import numpy as np
import pytest

from npbert.gradcheck import check_forward_backward, numerical_gradient, rel_error
from npbert.ops.dropout import DropoutKey
from npbert.ops.linear import linear_backward, linear_forward

FD_TOL = 1e-7      # cs231n relative error of the 2-point difference (h = 1e-6) in float64
# Softmax outputs span many orders of magnitude, so some gradient entries are ~1e-5; the 2-point
# difference's absolute round-off (~eps |f| / h = 5e-11) is then 2e-6 of such an entry.  The
# five-point stencil at h = 1e-3 (round-off ~1e-13, truncation ~h^4 = 1e-12) resolves them.
FD_FINE = dict(h=1e-3, order=4)
DTYPES = [np.float32, np.float64]


def rng(seed=0):
    return np.random.default_rng(seed)


def assert_fd(results):
    for name, c in results.items():
        assert c.rel_error < FD_TOL, (name, c.rel_error)


def assert_unchanged(before, after):
    """Forward and backward must not write into their arguments."""
    for name, a in before.items():
        assert np.array_equal(a, after[name]), f"{name} was modified"


# ---- linear ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_finite_differences(F, shape, bias):
    r = rng(1)
    inputs = {"x": r.standard_normal(shape), "weight": r.standard_normal((3, 4)),
              "bias": r.standard_normal(3) if bias else None}

    def backward(dy, cache):
        dx, g = F.linear_backward(dy, cache)
        assert set(g) == ({"weight", "bias"} if bias else {"weight"})
        return {"x": dx, **g}

    assert_fd(check_forward_backward(F.linear_forward, backward, inputs))


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_dtype_shapes_no_mutation(F, dtype):
    r = rng(2)
    x, W, b = (r.standard_normal(s).astype(dtype) for s in [(2, 3, 4), (5, 4), (5,)])
    dy = r.standard_normal((2, 3, 5)).astype(dtype)
    before = {k: v.copy() for k, v in dict(x=x, W=W, b=b, dy=dy).items()}
    y, cache = F.linear_forward(x, W, b)
    dx, g = F.linear_backward(dy, cache)
    assert y.dtype == dx.dtype == g["weight"].dtype == g["bias"].dtype == dtype
    assert y.shape == (2, 3, 5) and dx.shape == x.shape
    assert g["weight"].shape == W.shape and g["bias"].shape == b.shape
    assert_unchanged(before, dict(x=x, W=W, b=b, dy=dy))


def test_linear_vs_torch(F):
    """Torch layout W (out, in): y = x @ W.T + b, and autograd's gradients, float64."""
    torch = pytest.importorskip("torch")
    r = rng(3)
    x, W, b, dy = r.standard_normal((2, 3, 4)), r.standard_normal((5, 4)), r.standard_normal(5), r.standard_normal((2, 3, 5))
    tx, tW, tb = (torch.tensor(a, requires_grad=True) for a in (x, W, b))
    ty = torch.nn.functional.linear(tx, tW, tb)
    ty.backward(torch.tensor(dy))
    y, cache = F.linear_forward(x, W, b)
    dx, g = F.linear_backward(dy, cache)
    # The same products summed by two BLAS libraries: a few ulps apart.
    assert rel_error(y, ty.detach().numpy()) < 1e-12
    assert rel_error(dx, tx.grad.numpy()) < 1e-12
    assert rel_error(g["weight"], tW.grad.numpy()) < 1e-12
    assert rel_error(g["bias"], tb.grad.numpy()) < 1e-12


# ---- embedding -------------------------------------------------------------------------
def test_embedding_finite_differences_repeated_ids(F):
    """Repeated ids add up (scatter-add); unused rows get exactly 0."""
    r = rng(4)
    ids = np.array([[1, 3, 3, 0], [3, 5, 1, 1]])
    W = r.standard_normal((7, 3))
    results = check_forward_backward(lambda weight: F.embedding_forward(ids, weight),
                                     lambda d, c: {"weight": F.embedding_backward(d, c)}, {"weight": W})
    assert_fd(results)
    dW = results["weight"].analytic
    assert np.all(dW[[2, 4, 6]] == 0)                     # rows never looked up


def test_embedding_padding_idx_row_gets_no_gradient(F):
    """As torch's padding_idx: the forward reads the pad row, the backward leaves it at 0;
    every other row equals finite differences."""
    r = rng(5)
    ids = np.array([[0, 2, 0], [2, 1, 0]])
    W = r.standard_normal((4, 3))
    dout = r.standard_normal((2, 3, 3))
    _, cache = F.embedding_forward(ids, W)
    dW = F.embedding_backward(dout, cache, padding_idx=0)
    numerical = numerical_gradient(lambda w: np.sum(F.embedding_forward(ids, w)[0] * dout), W)
    assert np.all(dW[0] == 0) and np.abs(numerical[0]).max() > 0.1      # used, yet no gradient
    assert rel_error(dW[1:], numerical[1:]) < FD_TOL


def test_embedding_vs_torch(F):
    torch = pytest.importorskip("torch")
    r = rng(6)
    ids = np.array([[0, 2, 2, 4], [4, 0, 1, 2]])
    W, dout = r.standard_normal((6, 3)), r.standard_normal((2, 4, 3))
    tW = torch.tensor(W, requires_grad=True)
    ty = torch.nn.functional.embedding(torch.tensor(ids), tW, padding_idx=0)
    ty.backward(torch.tensor(dout))
    y, cache = F.embedding_forward(ids, W)
    assert np.array_equal(y, ty.detach().numpy())                      # a lookup: exact
    # a scatter-add of the same terms, perhaps in another order: a few ulps
    assert rel_error(F.embedding_backward(dout, cache, padding_idx=0), tW.grad.numpy()) < 1e-14


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_dtype_shapes_no_mutation(F, dtype):
    r = rng(7)
    ids = np.array([[1, 1, 2]])
    W, dout = r.standard_normal((4, 5)).astype(dtype), r.standard_normal((1, 3, 5)).astype(dtype)
    before = dict(ids=ids.copy(), W=W.copy(), dout=dout.copy())
    y, cache = F.embedding_forward(ids, W)
    dW = F.embedding_backward(dout, cache, padding_idx=3)
    assert y.dtype == dW.dtype == dtype and dW.shape == W.shape and y.shape == (1, 3, 5)
    assert_unchanged(before, dict(ids=ids, W=W, dout=dout))


# ---- layer norm ------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [1e-12, 1e-5])
@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6)])
def test_layer_norm_finite_differences(F, eps, shape):
    r = rng(8)
    inputs = {"x": r.standard_normal(shape) * 2 + 1, "weight": 1 + 0.3 * r.standard_normal(6),
              "bias": 0.3 * r.standard_normal(6), "eps": eps}

    def backward(dy, cache):
        dx, g = F.layer_norm_backward(dy, cache)
        return {"x": dx, **g}

    assert_fd(check_forward_backward(F.layer_norm_forward, backward, inputs))


@pytest.mark.parametrize("eps", [1e-12, 1e-5])
def test_layer_norm_vs_torch(F, eps):
    """Biased variance, eps inside the sqrt, as torch.nn.functional.layer_norm (float64)."""
    torch = pytest.importorskip("torch")
    r = rng(9)
    x, w, b, dy = r.standard_normal((2, 3, 6)), r.standard_normal(6), r.standard_normal(6), r.standard_normal((2, 3, 6))
    # a row with a tiny variance, where eps matters for 1e-5 and the formula's precision shows
    x[0, 0] = 3.0 + 1e-3 * r.standard_normal(6)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.layer_norm(tx, (6,), tw, tb, eps)
    ty.backward(torch.tensor(dy))
    y, cache = F.layer_norm_forward(x, w, b, eps)
    dx, g = F.layer_norm_backward(dy, cache)
    # Same formula, different summation orders: ~1e-15 relative; in the low-variance row
    # x - mean cancels 3 of 16 digits (|x| ~ 3, deviations ~1e-3) and dx cancels again, so
    # ~1e-11 there (measured 1.3e-11): bound 1e-10.
    assert rel_error(y, ty.detach().numpy()) < 1e-10
    assert rel_error(dx, tx.grad.numpy()) < 1e-10
    assert rel_error(g["weight"], tw.grad.numpy()) < 1e-10
    assert rel_error(g["bias"], tb.grad.numpy()) < 1e-10


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_dtype_shapes_no_mutation(F, dtype):
    r = rng(10)
    x, w, b, dy = (r.standard_normal(s).astype(dtype) for s in [(2, 3, 5), (5,), (5,), (2, 3, 5)])
    before = dict(x=x.copy(), w=w.copy(), b=b.copy(), dy=dy.copy())
    y, cache = F.layer_norm_forward(x, w, b, 1e-12)
    dx, g = F.layer_norm_backward(dy, cache)
    assert y.dtype == dx.dtype == g["weight"].dtype == g["bias"].dtype == dtype
    assert g["weight"].shape == w.shape and g["bias"].shape == b.shape and dx.shape == x.shape
    assert_unchanged(before, dict(x=x, w=w, b=b, dy=dy))


# ---- softmax ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 5), (2, 2, 4, 4)])
def test_softmax_finite_differences(F, shape):
    r = rng(11)
    assert_fd(check_forward_backward(F.softmax_forward, lambda d, c: {"x": F.softmax_backward(d, c)},
                                     {"x": r.standard_normal(shape) * 2}, **FD_FINE))


def test_softmax_with_additive_mask_finite_differences(F):
    """Masked positions (+ finfo.min, as BertModel's mask) get probability 0 and gradient 0."""
    r = rng(12)
    mask = np.where(np.array([1, 1, 0, 1, 0]) == 1, 0.0, np.finfo(np.float64).min)
    x = r.standard_normal((3, 5))
    results = check_forward_backward(lambda x: F.softmax_forward(x + mask),
                                     lambda d, c: {"x": F.softmax_backward(d, c)}, {"x": x}, **FD_FINE)
    assert_fd(results)
    assert np.all(results["x"].analytic[:, [2, 4]] == 0)
    assert np.all(F.softmax_forward(x + mask)[0][:, [2, 4]] == 0)


def test_softmax_vs_torch_and_large_inputs(F):
    torch = pytest.importorskip("torch")
    r = rng(13)
    x, dy = r.standard_normal((2, 3, 6)) * 30 + 500, r.standard_normal((2, 3, 6))   # would overflow exp
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.softmax(tx, dim=-1)
    ty.backward(torch.tensor(dy))
    y, cache = F.softmax_forward(x.copy())
    assert np.all(np.isfinite(y))
    # probabilities down to exp(-100): rel_error is ~1e-15 on each; 1e-12 allows the exp's ulps
    assert rel_error(y, ty.detach().numpy()) < 1e-12
    # dx = y (dy - sum(dy y)): where y ~ 1 the bracket cancels to ~1e-6 of |dy|, so the two
    # summation orders differ by ~1e-16 / 1e-6 relative there (measured 3e-11): bound 1e-9.
    assert rel_error(F.softmax_backward(dy, cache), tx.grad.numpy()) < 1e-9


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_softmax_in_place(dtype):
    """The fast softmax_forward(x, out=x) and softmax_backward(dy, y, out=dy) (the fast attention's)
    give the numbers of the default call, in the given memory."""
    from npbert.fast.softmax import softmax_backward, softmax_forward
    r = rng(20)
    x = r.standard_normal((3, 5, 9)).astype(dtype)
    expected_y, _ = softmax_forward(x)
    y, cache = softmax_forward(x, out=x)
    assert y is x and np.array_equal(y, expected_y)
    dy = r.standard_normal((3, 5, 9)).astype(dtype)
    expected = softmax_backward(dy, cache)
    dx = softmax_backward(dy, cache, out=dy)
    assert dx is dy and np.array_equal(dy, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_dtype_no_mutation(F, dtype):
    r = rng(14)
    x, dy = r.standard_normal((2, 4)).astype(dtype), r.standard_normal((2, 4)).astype(dtype)
    before = dict(x=x.copy(), dy=dy.copy())
    y, cache = F.softmax_forward(x)
    y_before = y.copy()
    dx = F.softmax_backward(dy, cache)
    assert y.dtype == dx.dtype == dtype and dx.shape == x.shape
    assert_unchanged(before, dict(x=x, dy=dy))
    assert np.array_equal(y, y_before)                      # the cache (= the output) untouched


# ---- dropout ---------------------------------------------------------------------------
def test_dropout_finite_differences_fixed_mask(F):
    """The backward of dropout with its mask held fixed: the same seed gives the same mask."""
    x = rng(15).standard_normal((3, 8))

    def forward(x):
        return F.dropout_forward(x, 0.3, np.random.default_rng(42), True)

    assert_fd(check_forward_backward(forward, lambda d, c: {"x": F.dropout_backward(d, c)}, {"x": x}))


def test_dropout_formula_and_modes(F):
    """Inverted dropout as torch: kept entries scaled by 1/(1-p), dropped ones 0; the mask comes
    from the generator; eval or p=0 is the identity; p=1 drops everything."""
    x = rng(16).standard_normal((200, 50))
    y, (keep, scale) = F.dropout_forward(x, 0.25, np.random.default_rng(0), True)
    assert keep.dtype == bool and keep.shape == x.shape
    assert rel_error(y, np.where(keep, x / 0.75, 0.0)) < 1e-15   # x * (1 / 0.75) vs x / 0.75: an ulp
    assert abs(keep.mean() - 0.75) < 0.01                  # 10000 Bernoulli draws: std 0.004
    y2, _ = F.dropout_forward(x, 0.25, np.random.default_rng(0), True)
    assert np.array_equal(y, y2)                           # same seed, same mask
    y3, _ = F.dropout_forward(x, 0.25, np.random.default_rng(1), True)
    assert not np.array_equal(y, y3)
    for training, p in [(False, 0.25), (True, 0.0)]:
        y, cache = F.dropout_forward(x, p, np.random.default_rng(0), training)
        assert np.array_equal(y, x) and np.array_equal(F.dropout_backward(x, cache), x)
    y, cache = F.dropout_forward(x, 1.0, np.random.default_rng(0), True)
    assert np.all(y == 0) and np.all(F.dropout_backward(x, cache) == 0)


def _source(kind, seed):
    """A mask's source: a caller's generator, or a model's DropoutKey (step seed, site, first row)."""
    if kind == "generator":
        return np.random.default_rng(seed)
    return DropoutKey(seed, "encoder.layer.0.attention.self.dropout", 0)


@pytest.mark.parametrize("kind", ["generator", "key"])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keep_frequency_and_odd_sizes(F, p, kind):
    """The raw-integer mask keeps each entry with probability 1 - p: over 10^6 draws the kept
    fraction is within 5 standard deviations (5 sqrt(p (1-p) / 10^6) <= 0.0025) of 1 - p; an odd
    element count (the last 64-bit draw half used) gives the right shape; the two halves of a draw
    are independent (neighbours kept together with probability (1 - p)^2, same bound)."""
    keep = F.keep_mask(_source(kind, 5), (999, 1001), p)
    assert keep.shape == (999, 1001) and keep.dtype == bool
    n = keep.size
    sd = np.sqrt(p * (1 - p) / n)
    assert abs(keep.mean() - (1 - p)) < 5 * sd
    pairs = keep.reshape(-1)[: n - 1: 2] & keep.reshape(-1)[1::2]
    assert abs(pairs.mean() - (1 - p) ** 2) < 5 * np.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / pairs.size)


def test_dropout_mask_from_a_generator_is_its_next_draws(F):
    """As documented in npbert/ops/dropout.py: u = the generator's next ceil(n/2) raw draws as
    uint32, keep = u >= round(p 2^32); the generator moves on by exactly those draws."""
    g, ref = np.random.default_rng(6), np.random.default_rng(6)
    keep = F.keep_mask(g, (7, 9), 0.25)                          # n = 63: 32 draws, the last half used
    u = ref.bit_generator.random_raw(32).view(np.uint32)[:63].reshape(7, 9)
    np.testing.assert_array_equal(keep, u >= np.uint32(2 ** 30))
    assert g.bit_generator.state == ref.bit_generator.state


@pytest.mark.parametrize("shape", [(6, 3, 5, 5), (5, 3 * (1 << 17) // 5 + 7)])   # odd rows; many pieces
def test_keyed_mask_rows_do_not_depend_on_the_split_or_threads(F, shape):
    """Row r of a keyed mask is a function of (seed, site, global row, row shape) only: rows [a, b)
    drawn alone with first_row=a are rows a..b-1 of the whole batch's mask, on 1, 2 and 3 threads
    (the fast twin draws large masks in pieces on threads); row r's bits are words [r W, (r+1) W)
    of PCG64(SeedSequence([seed, site_id])), W = ceil(n_row / 2)."""
    from npbert.fast import parallel
    from npbert.ops.dropout import site_id
    site, seed, p = "encoder.layer.1.output.dropout", 2 ** 63 + 12345, 0.1
    B = shape[0]
    before = parallel.get_num_threads()
    try:
        masks = []
        for n in (1, 2, 3):
            parallel.set_num_threads(n)
            masks.append(F.keep_mask(DropoutKey(seed, site, 0), shape, p))
        for a, b in [(0, B // 2), (B // 2, B), (1, 2), (B - 1, B)]:
            part = F.keep_mask(DropoutKey(seed, site, a), (b - a,) + shape[1:], p)
            np.testing.assert_array_equal(part, masks[0][a:b])
    finally:
        parallel.set_num_threads(before)
    np.testing.assert_array_equal(masks[0], masks[1])
    np.testing.assert_array_equal(masks[0], masks[2])
    n_row = int(np.prod(shape[1:]))
    W = (n_row + 1) // 2
    bits = np.random.PCG64(np.random.SeedSequence([seed, site_id(site)]))
    bits.advance(3 * W)
    u = bits.random_raw(W).view(np.uint32)[:n_row].reshape(shape[1:])
    np.testing.assert_array_equal(masks[0][3], u >= np.uint32(round(p * 2 ** 32)))


def test_keyed_masks_differ_between_sites_seeds_and_rows(F):
    """Two masks from different seeds, sites, or neighbouring rows agree as two independent
    masks do: (1-p)^2 + p^2 = 0.82 at p = 0.1, within 5 standard deviations."""
    shape, p = (2, 300, 300), 0.1
    base = F.keep_mask(DropoutKey(1, "embeddings.dropout", 0), shape, p)
    others = [F.keep_mask(DropoutKey(2, "embeddings.dropout", 0), shape, p),
              F.keep_mask(DropoutKey(1, "encoder.layer.0.output.dropout", 0), shape, p)]
    pairs = [(base, o) for o in others] + [(base[0], base[1])]
    for a, b in pairs:
        agree = (a == b).mean()
        assert abs(agree - 0.82) < 5 * np.sqrt(0.82 * 0.18 / a.size), agree


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_dtype_no_mutation(F, dtype):
    x, dy = (rng(17).standard_normal((4, 6)).astype(dtype) for _ in range(2))
    before = dict(x=x.copy(), dy=dy.copy())
    y, cache = F.dropout_forward(x, 0.5, np.random.default_rng(3), True)
    dx = F.dropout_backward(dy, cache)
    assert y.dtype == dx.dtype == dtype and dx.shape == x.shape
    assert_unchanged(before, dict(x=x, dy=dy))


# ---- gradcheck itself ------------------------------------------------------------------
def test_gradcheck_detects_a_wrong_gradient():
    """The checker can fail: a backward off by 1% in one entry is reported."""
    x = rng(18).standard_normal((3, 4))
    W = rng(19).standard_normal((2, 4))

    def wrong_backward(dy, cache):
        dx, g = linear_backward(dy, cache)
        dx[0, 0] *= 1.01
        return {"x": dx}

    results = check_forward_backward(lambda x: linear_forward(x, W), wrong_backward, {"x": x})
    assert results["x"].rel_error > 1e-3


def test_numerical_gradient_and_rel_error():
    x = np.array([1.0, -2.0, 0.5])
    g = numerical_gradient(lambda v: np.sum(v ** 3), x)
    assert rel_error(g, 3 * x ** 2) < 1e-9
    assert np.array_equal(x, [1.0, -2.0, 0.5])                          # restored exactly
    g4 = numerical_gradient(lambda v: np.sum(np.sin(v)), x, h=1e-3, order=4)
    assert rel_error(g4, np.cos(x)) < 1e-11
    assert rel_error([1.0, 0.0], [1.0, 0.0]) == 0.0
    assert rel_error([1.0], [3.0]) == pytest.approx(0.5)
    assert rel_error([0.0], [1e-9]) == pytest.approx(0.1)                # the 1e-8 floor
    with pytest.raises(ValueError, match="shapes differ"):
        rel_error(np.zeros(2), np.zeros(3))
