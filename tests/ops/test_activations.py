"""Tests for npbert/ops/activations.py and its fast twin npbert/fast/gelu.py: gradients, erf
accuracy, torch parity.  A test taking `F` (tests/ops/conftest.py) runs on both paths.

Every tolerance is stated next to its assert with the reason for its size.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npbert.fast.gelu as fast_gelu
from npbert.fast import parallel
from npbert.ops.activations import ACT2FN, erf

EPS64 = np.finfo(np.float64).eps      # 2.2e-16
EPS32 = np.finfo(np.float32).eps      # 1.2e-7

NAMES = sorted(ACT2FN)


def rel_error(x, y):
    """cs231n: max |x - y| / max(1e-8, |x| + |y|)."""
    return np.max(np.abs(x - y) / np.maximum(1e-8, np.abs(x) + np.abs(y)))


def numerical_grad(f, x, dy, h=1e-6):
    """Centred differences of sum(f(x) * dy) with respect to every entry of x
    (cs231n's eval_numerical_gradient_array: sum((f(x+h) - f(x-h)) * dy) / 2h)."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        fp = f(x).copy()
        x[i] = old - h
        fm = f(x).copy()
        x[i] = old
        grad[i] = np.sum((fp - fm) * dy) / (2 * h)
    return grad


def away_from_kink(shape, seed):
    """float64 points in (-4, 4) with |x| >= 0.05, so that relu's kink at 0 is
    never inside a centred difference of width 2e-6."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.05, 4.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return x


# ---------------------------------------------------------------------------
# Gradients: finite differences in float64
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_backward_matches_finite_differences(F, name):
    forward, backward = F.get_activation(name)
    x = away_from_kink((3, 7), seed=0)
    dy = np.random.default_rng(1).standard_normal(x.shape)
    y, cache = forward(x)
    dx = backward(dy, cache)
    assert dx.shape == x.shape and dx.dtype == np.float64
    dx_num = numerical_grad(lambda v: forward(v)[0], x.copy(), dy)
    # centred differences with h = 1e-6 have truncation error ~h^2 f''' ~ 1e-12
    # and rounding error ~eps / h ~ 1e-10 relative: 1e-7 leaves a wide margin
    # while a wrong derivative (e.g. a dropped factor) is off by >= 1e-2.
    assert rel_error(dx, dx_num) < 1e-7, name


def test_relu_gradient_at_zero_is_zero_like_torch(F):
    x = np.array([-1.0, 0.0, -0.0, 2.0])
    dx = F.relu_backward(np.ones(4), F.relu_forward(x)[1])
    assert dx.tolist() == [0.0, 0.0, 0.0, 1.0]


# ---------------------------------------------------------------------------
# erf in float64 against math.erf
# ---------------------------------------------------------------------------

def _erf_grid():
    dense = np.linspace(-8.0, 8.0, 400_001)                   # step 4e-5
    tiny = np.geomspace(1e-310, 1e-2, 2000)
    tails = np.geomspace(1.0, 1e300, 2000)
    edges = np.array([0.5, 1.0, 1.5, 2.0, 2.75, 3.75, 5.0, 7.0])  # interval joins
    edges = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, 10)])
    pos = np.concatenate([dense[dense > 0], tiny, tails, edges, [5e-324, 1.7976931348623157e308]])
    return np.concatenate([pos, -pos, dense[dense <= 0]])


def test_erf_float64_matches_math_erf_within_2_ulp():
    x = _erf_grid()
    got = erf(x)
    ref = np.array([math.erf(v) for v in x])
    ulps = np.abs(got - ref) / np.spacing(np.abs(ref))
    # Measured: at most 2 ulp (relative 4.3e-16), absolute at most 2.2e-16.
    # The polynomials are exact to ~1e-18 relative; what is left is float64
    # rounding in Horner, exp and 1 - erfc. A wrong coefficient shows up as
    # thousands of ulp.
    assert ulps.max() <= 2.0, x[np.argmax(ulps)]
    assert np.max(np.abs(got - ref)) <= 2.3e-16
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)) < 5e-16


def test_erf_specials_float64_and_float32():
    for dtype in (np.float64, np.float32):
        x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
        got = erf(x)
        assert got.dtype == dtype
        assert got[0] == 0.0 and not np.signbit(got[0])
        assert got[1] == 0.0 and np.signbit(got[1])           # erf(-0) = -0
        assert got[2] == 1.0 and got[3] == -1.0
        assert np.isnan(got[4])


def test_gelu_float64_negative_tail_is_accurate(F):
    """Phi comes from erfc on the negative side, so gelu(-30) ~ -1e-197 is right to
    ~1e-14 relative (torch's 0.5 x (1 + erf) is 0 there)."""
    x = -np.geomspace(0.75, 37.0, 3000)
    y = F.gelu_forward(x)[0]
    u = x * math.sqrt(0.5)                                    # the same rounded x / sqrt(2)
    ref = x * np.array([0.5 * math.erfc(-v) for v in u])
    # math.erfc is ~1 ulp; ours ~3 ulp (erfcx Horner + two exp + products):
    # 1e-14 relative allows both with margin, and the torch-style formula
    # fails it by orders of magnitude beyond x = -3.
    assert rel_error(y, ref) < 1e-14 or np.max(np.abs(y - ref) / np.abs(ref)) < 1e-14


# ---------------------------------------------------------------------------
# float32 GELU: accuracy against the truth and against torch
# ---------------------------------------------------------------------------

def _phi64(x):
    """Normal cdf in float64 via math.erfc (accurate on both tails)."""
    return np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])


def _f32_grid():
    dense = np.linspace(-12.0, 12.0, 240_001)
    small = np.geomspace(1e-30, 1e-1, 500)
    big = np.geomspace(12.0, 3e38, 200)
    return np.concatenate([dense, small, -small, big, -big]).astype(np.float32)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")   # x^2 of x ~ 1e38: exp(-inf) = 0, right
def test_gelu_float32_error_against_the_truth(F):
    x = _f32_grid()
    y, cache = F.gelu_forward(x)
    assert y.dtype == np.float32
    x64 = x.astype(np.float64)
    phi = _phi64(x64)
    err = np.abs(y - x64 * phi)
    # Design bound: |Phi~ - Phi| <= 2.9e-8 (the fit) plus float32 rounding of
    # exp, 1 + e and the division: measured max 2.0e-7 |x| (1.7 ulp of y).
    # torch's own float32 F.gelu is off by up to 3.6e-7 |x|.
    assert np.all(err <= 2.5e-7 * np.abs(x64)), x[np.argmax(err / np.abs(x64))]
    dx = F.gelu_backward(np.ones_like(x), cache)
    dgelu = phi + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
    # dgelu is in [-0.17, 1.13]; measured max error 2.4e-7 (torch's: 2.9e-7).
    assert np.max(np.abs(dx - dgelu)) <= 3e-7


def test_gelu_float32_matches_torch(F):
    torch = pytest.importorskip("torch")
    x = _f32_grid()[np.abs(_f32_grid()) < 1e6]
    dy = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    y, cache = F.gelu_forward(x)
    dx = F.gelu_backward(dy, cache)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    yt = torch.nn.functional.gelu(xt)
    yt.backward(torch.from_numpy(dy))
    ulp_x = np.spacing(np.abs(x))
    # ours is within 2.0e-7|x| of the truth, torch within 3.6e-7|x|, and
    # ulp(|x|) >= 1.19e-7|x|: the sum is below 5 ulp of |x| (float32 noise).
    assert np.all(np.abs(y - yt.detach().numpy()) <= 5 * ulp_x)
    # backward: 2.4e-7 + 2.9e-7 per unit of dy, plus the rounding of the
    # product with dy (1 ulp of dx <= 1.35e-7 |dy|): 8e-7 |dy|.
    assert np.all(np.abs(dx - xt.grad.numpy()) <= 8e-7 * np.abs(dy) + 1e-37)


def test_erf_float32_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-6.0, 6.0, 200_001).astype(np.float32)
    x = np.concatenate([x, np.geomspace(1e-30, 1e-2, 300).astype(np.float32)])
    ours = erf(x)
    theirs = torch.erf(torch.from_numpy(x)).numpy()
    assert ours.dtype == np.float32
    # ours is correctly rounded up to float64 double rounding (<= 0.5 ulp),
    # torch.erf measured <= 1 ulp: 2 ulp of the result covers both.
    assert np.all(np.abs(ours - theirs) <= 2 * np.spacing(np.abs(theirs)))


# ---------------------------------------------------------------------------
# float64 against torch / transformers, every activation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_float64_matches_transformers(F, name):
    torch = pytest.importorskip("torch")
    transformers_acts = pytest.importorskip("transformers.activations")
    x = np.concatenate([np.linspace(-10.0, 10.0, 20_001), [0.0, -0.0, 1e-200, -1e-200]])
    dy = np.random.default_rng(0).standard_normal(x.shape)
    forward, backward = F.get_activation(name)
    y, cache = forward(x)
    dx = backward(dy, cache)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    yt = transformers_acts.ACT2FN[name](xt)
    yt.backward(torch.from_numpy(dy))
    yt, gt = yt.detach().numpy(), xt.grad.numpy()
    # Relative 1e-12, plus an absolute floor of 8 eps (|x| + 1) (|dy| for the
    # gradient): torch evaluates 1 + erf(x/sqrt 2) or 1 + tanh(.) and
    # 1 - tanh^2, which cancel to 0 in the negative tail, where its own
    # error is |x| eps. Anywhere else a 1e-12 departure is a real bug.
    floor = 8 * EPS64 * (np.abs(x) + 1)
    assert np.all(np.abs(y - yt) <= 1e-12 * np.abs(yt) + floor), name
    assert np.all(np.abs(dx - gt) <= 1e-12 * np.abs(gt) + floor * np.abs(dy)), name
    # where torch does not cancel (x >= -1: Phi >= 0.16), relative 1e-12 alone
    keep = x >= -1.0
    assert np.max(np.abs(y - yt)[keep] / np.maximum(np.abs(yt[keep]), 1e-300)) <= 1e-12


def test_gelu_variants_are_the_ones_transformers_names(F):
    """gelu is erf-based, gelu_new / gelu_pytorch_tanh the tanh form, and they differ."""
    x = np.array([-2.0, -0.5, 0.5, 1.0, 3.0])
    exact = 0.5 * x * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    fast_form = 0.5 * x * (1 + np.tanh(x * 0.7978845608 * (1 + 0.044715 * x * x)))
    np.testing.assert_allclose(F.get_activation("gelu")[0](x)[0], exact, rtol=1e-15, atol=0)
    np.testing.assert_allclose(F.get_activation("gelu_new")[0](x)[0], tanh_form, rtol=1e-15, atol=0)
    np.testing.assert_allclose(F.get_activation("gelu_pytorch_tanh")[0](x)[0], tanh_form, rtol=1e-15, atol=0)
    np.testing.assert_allclose(F.get_activation("gelu_fast")[0](x)[0], fast_form, rtol=1e-15, atol=0)
    # the tanh form is off by up to ~5e-4 at these points: a swap cannot pass
    assert np.max(np.abs(exact - tanh_form)) > 1e-5


# ---------------------------------------------------------------------------
# dtype, no mutation, threads, names
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_dtype_preserved_and_inputs_not_mutated(F, name, dtype):
    forward, backward = F.get_activation(name)
    rng = np.random.default_rng(0)
    x = (3 * rng.standard_normal((4, 5, 6))).astype(dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    x0, dy0 = x.copy(), dy.copy()
    y, cache = forward(x)
    dx = backward(dy, cache)
    assert y.dtype == dtype and dx.dtype == dtype
    assert y.shape == x.shape and dx.shape == x.shape
    assert np.array_equal(x, x0) and np.array_equal(dy, dy0)
    assert y is not x and dx is not dy                      # no aliasing either way


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_non_contiguous_and_empty(F, dtype):
    x = (np.arange(60, dtype=dtype).reshape(6, 10) / 10 - 3).T    # F-ordered view
    y, cache = F.gelu_forward(x)
    ref, _ = F.gelu_forward(np.ascontiguousarray(x))
    assert np.array_equal(y, ref) and y.shape == (10, 6)
    dx = F.gelu_backward(np.ones_like(x), cache)
    assert dx.shape == x.shape and dx.dtype == dtype
    empty = np.zeros((0, 3), dtype)
    assert F.gelu_forward(empty)[0].shape == (0, 3)
    assert F.gelu_backward(empty, F.gelu_forward(empty)[1]).shape == (0, 3)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # -inf * Phi(-inf) = -inf * 0
def test_gelu_float32_specials(F):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 3e38, -3e38], np.float32)
    y = F.gelu_forward(x)[0]
    assert y[0] == 0 and not np.signbit(y[0])
    assert y[1] == 0 and np.signbit(y[1])
    assert y[2] == np.inf
    assert np.isnan(y[3])                                  # -inf * 0, as torch
    assert np.isnan(y[4])
    assert y[5] == 1e30 and y[6] == 0 and y[7] == np.float32(3e38) and y[8] == 0


def test_fast_thread_count_does_not_change_float32_results():
    rng = np.random.default_rng(0)
    # not a multiple of the chunk size, and several chunks per thread
    x = (3 * rng.standard_normal(7 * fast_gelu._CHUNK + 123)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    before = parallel.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3, 5):
            parallel.set_num_threads(n)
            y, cache = fast_gelu.gelu_forward(x)
            results.append((y, fast_gelu.gelu_backward(dy, cache)))
    finally:
        parallel.set_num_threads(before)
    for y, dx in results[1:]:
        assert np.array_equal(y, results[0][0]) and np.array_equal(dx, results[0][1])
    # and a chunk-sized slice computed alone equals the same slice of the whole
    lo = 2 * fast_gelu._CHUNK
    alone = fast_gelu.gelu_forward(x[lo:lo + fast_gelu._CHUNK].copy())[0]
    assert np.array_equal(alone, results[0][0][lo:lo + fast_gelu._CHUNK])


def test_set_num_threads_rejects_zero():
    with pytest.raises(ValueError):
        parallel.set_num_threads(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_gelu_backward_into_out_equals_a_fresh_result(dtype):
    """The fast gelu_backward(dy, cache, out=dy) writes exactly the numbers gelu_backward(dy, cache)
    returns into dy's memory (the float32 kernel reads every dy before writing dx, chunk by
    chunk); across several 64K-element chunks, so the chunk loop is exercised too."""
    forward, backward = fast_gelu.gelu_forward, fast_gelu.gelu_backward
    x = away_from_kink((3, 70000), seed=5).astype(dtype)
    dy = np.random.default_rng(6).standard_normal(x.shape).astype(dtype)
    _, cache = forward(x)
    expected = backward(dy, cache)
    dx = backward(dy, cache, out=dy)
    assert dx is dy and np.array_equal(dy, expected)


def test_unknown_activation_is_a_clear_error(F):
    with pytest.raises(ValueError) as info:
        F.get_activation("gelu_exact")
    message = str(info.value)
    assert "'gelu_exact'" in message
    for name in ("gelu", "gelu_new", "relu", "silu", "tanh"):
        assert name in message


def test_registry_covers_the_keys_the_brief_and_bert_configs_use(F):
    for name in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu",
                 "relu", "silu", "swish", "tanh", "linear"):
        forward, backward = F.get_activation(name)
        assert callable(forward) and callable(backward)


def test_integer_input_is_refused(F):
    with pytest.raises(TypeError):
        F.gelu_forward(np.arange(3))


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

@settings(deadline=None, max_examples=40)
@given(name=st.sampled_from(NAMES),
       shape=st.tuples(st.integers(1, 4), st.integers(1, 5)),
       a=st.floats(-3.0, 3.0),
       seed=st.integers(0, 2 ** 16))
def test_backward_is_linear_in_dy(F, name, shape, a, seed):
    forward, backward = F.get_activation(name)
    rng = np.random.default_rng(seed)
    x = 4 * rng.standard_normal(shape)
    dy1, dy2 = rng.standard_normal(shape), rng.standard_normal(shape)
    _, cache = forward(x)
    lhs = backward(a * dy1 + dy2, cache)
    rhs = a * backward(dy1, cache) + backward(dy2, cache)
    # both sides are the same products reassociated: a few eps of the
    # largest term (|a dy1| + |dy2|) * max|f'| (<= 1.13)
    scale = (abs(a) * np.abs(dy1) + np.abs(dy2)) * 1.2
    assert np.all(np.abs(lhs - rhs) <= 8 * EPS64 * scale + 1e-300)


@settings(deadline=None, max_examples=30)
@given(x=st.lists(st.floats(-50, 50, allow_nan=False, width=32), min_size=1, max_size=50))
def test_float32_gelu_is_monotone_where_gelu_is(F, x):
    """gelu is increasing on [-0.75, inf): the float32 path keeps the order
    (up to 1 ulp of rounding), a property a bad fit would break."""
    x = np.sort(np.array(x, np.float32))
    x = x[x >= -0.75]
    y = F.gelu_forward(x)[0]
    assert np.all(np.diff(y) >= -np.spacing(np.abs(y[1:])))


def test_fast_gelu_backward_from_the_output_float32():
    """The fast gelu_backward(dy, x, y=y) reads Phi(x) off the forward's output (y / x) in float32.
    Against the float64 derivative: |dx - dx64| <= 1e-6 |dy| (about 8 float32 ulp of a derivative
    in [-0.17, 1.13]; the recomputed path is within 3e-7, y / x adds two roundings), at random
    points and at 0, -0, subnormals, 2^-60 and beyond the saturation of Phi."""
    from npbert.fast.gelu import gelu_backward, gelu_forward
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(200_000) * 4).astype(np.float32)
    edge = [0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 2.0 ** -60, -(2.0 ** -60), 2.0 ** -59, 1e-10, -1e-10,
            5.0, -5.0, 7.0, -7.0, 20.0, -20.0, 1e4, -1e4]
    x[:len(edge)] = edge
    dy = rng.standard_normal(x.shape).astype(np.float32)
    y, cache = gelu_forward(x)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                        # no warning escapes (0 / 0 at x = 0 is expected)
        dx = gelu_backward(dy, cache, y=y)
    assert dx.dtype == np.float32
    ref = gelu_backward(dy.astype(np.float64), x.astype(np.float64))
    assert np.all(np.abs(dx - ref) <= 1e-6 * np.abs(dy)), np.max(np.abs(dx - ref) / np.abs(dy))
    out = dy.copy()
    assert gelu_backward(out, cache, out=out, y=y) is out     # dx in dy's memory, as BertIntermediate asks
    np.testing.assert_array_equal(out, dx)
    with pytest.raises(ValueError, match="forward's output"):
        gelu_backward(dy, cache, y=y[:-1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_gelu_forward_with_grad(dtype):
    """gelu_forward_with_grad(x) = (y, dy/dx): y bit-equal to the fast gelu_forward's (the same
    passes), and dx = dy * dy/dx against the float64 derivative within 1e-6 |dy| in float32 (the
    recomputed backward's bound above: Phi and phi are the same passes, one more rounding in the
    product) and to round-off (1e-14 |dy|) in float64; at random points, 0, -0, subnormals and
    beyond Phi's saturation, with no warning."""
    import warnings

    from npbert.fast.gelu import gelu_backward, gelu_forward, gelu_forward_with_grad
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(3 * 65536 + 77) * 4).astype(dtype)
    x[:12] = [0.0, -0.0, 1e-45, -1e-45, 1e-38, 2.0 ** -60, 5.0, -5.0, 20.0, -20.0, 1e4, -1e4]
    dy = rng.standard_normal(x.shape).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, dydx = gelu_forward_with_grad(x)
    assert y.dtype == dydx.dtype == dtype and y.shape == dydx.shape == x.shape
    np.testing.assert_array_equal(y, gelu_forward(x)[0])
    ref = gelu_backward(dy.astype(np.float64), x.astype(np.float64))
    bound = 1e-6 if dtype == np.float32 else 1e-14
    dx = dy * dydx
    assert np.all(np.abs(dx - ref) <= bound * np.abs(dy)), np.max(np.abs(dx - ref) / np.abs(dy))
