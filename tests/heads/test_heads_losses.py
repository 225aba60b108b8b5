"""The loss ops: finite differences in float64, torch's values and gradients, NaN when every
label is ignored, dtype preservation, stability for huge logits, bad input, and properties."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npbert.ops.losses import (bce_with_logits_backward, bce_with_logits_forward, cross_entropy_backward,
                               cross_entropy_forward, mse_backward, mse_forward)

from head_helpers import numerical_gradient, rel

# Finite differences in float64 with h = 1e-6: truncation O(h^2) = 1e-12 and round-off
# ~1e-16 / 1e-6 = 1e-10, absolute, on O(1) losses.  Entry by entry (cs231n's rel_error) that is
# too coarse for gradient entries of ~1e-5, so the bound is normwise, max|analytic - numerical| /
# max|numerical| < 1e-7, against gradients of scale ~1e-2: ~1e-8 is what round-off leaves, a wrong
# factor or a missing term gives >= 1e-1.
FD_TOL = 1e-7


def _labels_with_ignored(rng, N, C):
    y = rng.integers(0, C, size=N)
    y[rng.random(N) < 0.4] = -100
    y[0] = rng.integers(0, C)
    return y


# ---- finite differences -----------------------------------------------------------------
def test_cross_entropy_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 5))
    y = _labels_with_ignored(rng, 6, 5)
    loss, cache = cross_entropy_forward(x, y)
    dx = cross_entropy_backward(1.0, cache)
    num = numerical_gradient(lambda: cross_entropy_forward(x, y)[0], x)
    assert dx.shape == x.shape
    assert rel(dx, num) < FD_TOL


def test_cross_entropy_finite_differences_3d_and_scaled_upstream():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 4))
    y = np.array([[0, -100, 3], [2, 1, -100]])
    _, cache = cross_entropy_forward(x, y)
    dx = cross_entropy_backward(0.7, cache)
    num = numerical_gradient(lambda: 0.7 * cross_entropy_forward(x, y)[0], x)
    assert rel(dx, num) < FD_TOL


def test_mse_finite_differences():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    _, cache = mse_forward(x, y)
    dx = mse_backward(1.0, cache)
    num = numerical_gradient(lambda: mse_forward(x, y)[0], x)
    assert rel(dx, num) < FD_TOL


def test_bce_with_logits_finite_differences():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 3)) * 3
    y = (rng.random((4, 3)) < 0.5).astype(np.float64)
    y[0, 0] = 0.3   # soft labels are allowed, as in torch
    _, cache = bce_with_logits_forward(x, y)
    dx = bce_with_logits_backward(1.0, cache)
    num = numerical_gradient(lambda: bce_with_logits_forward(x, y)[0], x)
    assert rel(dx, num) < FD_TOL


# ---- torch's values ---------------------------------------------------------------------
def test_losses_equal_torch():
    """Values and gradients against torch.nn.functional in float64: relative 1e-12 (the same
    handful of float64 operations in a different order: round-off ~1e-16 times the ~10 terms)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(4)
    x = rng.normal(size=(8, 6)) * 4
    y = _labels_with_ignored(rng, 8, 6)
    targets = rng.random((8, 6))
    cases = [
        (lambda a: cross_entropy_forward(a, y), cross_entropy_backward, lambda ta: F.cross_entropy(ta, torch.from_numpy(y))),
        (lambda a: cross_entropy_forward(a, np.clip(y, 0, 6), ignore_index=5), cross_entropy_backward,
         lambda ta: F.cross_entropy(ta, torch.from_numpy(np.clip(y, 0, 6)), ignore_index=5)),
        (lambda a: mse_forward(a, targets), mse_backward, lambda ta: F.mse_loss(ta, torch.from_numpy(targets))),
        (lambda a: bce_with_logits_forward(a, targets), bce_with_logits_backward,
         lambda ta: F.binary_cross_entropy_with_logits(ta, torch.from_numpy(targets))),
    ]
    for fwd, bwd, ref in cases:
        loss, cache = fwd(x)
        dx = bwd(1.0, cache)
        tx = torch.from_numpy(x.copy()).requires_grad_(True)
        tl = ref(tx)
        tl.backward()
        assert abs(loss - tl.item()) <= 1e-12 * abs(tl.item())
        assert np.max(np.abs(dx - tx.grad.numpy())) <= 1e-12 * np.max(np.abs(tx.grad.numpy()))


def test_all_ignored_is_nan_with_zero_gradient_as_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).normal(size=(3, 4))
    y = np.full(3, -100)
    with np.errstate(all="raise"):    # the NaN is produced on purpose, not by a 0/0 warning
        loss, cache = cross_entropy_forward(x, y)
        dx = cross_entropy_backward(1.0, cache)
    tx = torch.from_numpy(x).requires_grad_(True)
    tl = torch.nn.functional.cross_entropy(tx, torch.from_numpy(y))
    tl.backward()
    assert np.isnan(loss) and np.isnan(tl.item())
    assert not dx.any() and not tx.grad.numpy().any()


# ---- dtype and stability ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 3)).astype(dtype)
    for fwd, bwd, target in [(cross_entropy_forward, cross_entropy_backward, np.array([0, 2, -100, 1])),
                             (mse_forward, mse_backward, rng.normal(size=(4, 3))),
                             (bce_with_logits_forward, bce_with_logits_backward, rng.random((4, 3)))]:
        loss, cache = fwd(x, target)
        assert np.asarray(loss).dtype == dtype and np.asarray(loss).shape == ()
        assert bwd(1.0, cache).dtype == dtype


def test_huge_logits_stay_finite():
    """log-sum-exp and the |x| form of BCE: logits of 1e4 would overflow exp() in float64
    (exp(710) = inf) and 100 in float32; the losses stay finite and exact."""
    for dtype in (np.float32, np.float64):
        x = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4]], dtype=dtype)
        with np.errstate(over="raise"):
            loss, cache = cross_entropy_forward(x, np.array([1, 2]))
            dx = cross_entropy_backward(1.0, cache)
            bce, bcache = bce_with_logits_forward(x, np.ones_like(x))
            dbce = bce_with_logits_backward(1.0, bcache)
        assert loss == pytest.approx(1e4 / 2, rel=1e-6)            # row 0: -log softmax = 1e4, row 1: 0
        assert np.isfinite(dx).all() and np.isfinite(dbce).all()
        # per element max(x, 0) - x y + log(1 + exp(-|x|)) with y = 1: 0, log 2, 1e4 / 1e4, 1e4, 0
        assert bce == pytest.approx((np.log(2) + 3e4) / 6, rel=1e-6)


# ---- bad input --------------------------------------------------------------------------
def test_bad_labels_are_clear_errors():
    x = np.zeros((3, 4))
    with pytest.raises(IndexError, match="out of bounds"):
        cross_entropy_forward(x, np.array([0, 4, 1]))
    with pytest.raises(IndexError, match="out of bounds"):
        cross_entropy_forward(x, np.array([0, -1, 1]))
    with pytest.raises(TypeError, match="integers"):
        cross_entropy_forward(x, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="shape"):
        cross_entropy_forward(x, np.array([0, 1]))
    with pytest.raises(TypeError, match="float32 or float64"):
        cross_entropy_forward(x.astype(np.int64), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="shape"):
        mse_forward(x, np.zeros(4))
    with pytest.raises(TypeError, match="floating point"):
        bce_with_logits_forward(x, np.ones((3, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        bce_with_logits_forward(x, np.ones((4, 3)))


# ---- properties -------------------------------------------------------------------------
@st.composite
def _ce_problem(draw):
    N = draw(st.integers(1, 6))
    C = draw(st.integers(1, 5))
    x = draw(hnp.arrays(np.float64, (N, C), elements=st.floats(-30, 30)))
    y = draw(hnp.arrays(np.int64, (N,), elements=st.integers(0, C - 1)))
    ignored = draw(hnp.arrays(np.bool_, (N,)))
    return x, np.where(ignored, -100, y)


@settings(deadline=None, max_examples=60)
@given(_ce_problem(), st.integers(0, 2 ** 32 - 1))
def test_loss_invariant_to_logits_at_ignored_positions(problem, seed):
    """Changing the logits of ignored rows changes neither the loss nor the gradient elsewhere,
    and the gradient at ignored rows is exactly zero."""
    x, y = problem
    loss, cache = cross_entropy_forward(x, y)
    dx = cross_entropy_backward(1.0, cache)
    x2 = x.copy()
    ignored = y == -100
    x2[ignored] = np.random.default_rng(seed).normal(scale=50, size=x2[ignored].shape)
    loss2, cache2 = cross_entropy_forward(x2, y)
    dx2 = cross_entropy_backward(1.0, cache2)
    assert (np.isnan(loss) and np.isnan(loss2)) or loss == loss2
    np.testing.assert_array_equal(dx, dx2)
    assert not dx[ignored].any()


@settings(deadline=None, max_examples=60)
@given(_ce_problem(), st.floats(-3, 3))
def test_cross_entropy_gradient_rows_sum_to_zero(problem, dloss):
    """Each row is (softmax - onehot) * dloss / N: the softmax sums to 1 and the one-hot to 1.
    Bound: |row sum| <= 1e-15 * C (round-off of C terms of size <= |dloss| / N <= 3)."""
    x, y = problem
    _, cache = cross_entropy_forward(x, y)
    dx = cross_entropy_backward(dloss, cache)
    assert np.all(np.abs(dx.sum(axis=-1)) <= 1e-15 * x.shape[1] * 4)


@settings(deadline=None, max_examples=40)
@given(hnp.arrays(np.float64, (3, 4), elements=st.floats(-20, 20)),
       hnp.arrays(np.float64, (3, 4), elements=st.floats(0, 1)))
def test_bce_gradient_is_sigmoid_minus_target_over_n(x, y):
    """dBCE/dx = (sigmoid(x) - y) / n, with sigmoid computed here the plain way (no overflow at
    |x| <= 20); equal to 1e-15 absolute (entries are <= 1/12)."""
    _, cache = bce_with_logits_forward(x, y)
    dx = bce_with_logits_backward(1.0, cache)
    expected = (1 / (1 + np.exp(-x)) - y) / x.size
    assert np.max(np.abs(dx - expected)) <= 1e-15
