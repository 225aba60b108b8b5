"""The fast GELU and LayerNorm can write into their input's memory (overwrite_x=True: the fast
twins pass it for arrays they own and are done with): the numbers must be the very ones of the
out-of-place call, the memory x's, and an input that cannot be written (not C-contiguous, or
read-only) must be left alone."""
import numpy as np
import pytest

import npbert.fast as fast


def test_gelu_with_grad_in_x():
    x = np.random.default_rng(0).normal(scale=3, size=(3, 5, 300_000 // 15)).astype(np.float32)
    y_new, d_new = fast.gelu_forward_with_grad(x.copy())
    x_own = x.copy()
    y, d = fast.gelu_forward_with_grad(x_own, overwrite_x=True)
    assert np.shares_memory(y, x_own) and not np.shares_memory(d, x_own)
    np.testing.assert_array_equal(y, y_new)
    np.testing.assert_array_equal(d, d_new)
    frozen = x.copy()
    frozen.flags.writeable = False
    y, _ = fast.gelu_forward_with_grad(frozen, overwrite_x=True)
    assert not np.shares_memory(y, frozen)
    np.testing.assert_array_equal(y, y_new)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_xhat_in_x(dtype):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 70, 24)).astype(dtype) + 3
    w, b = rng.normal(size=24).astype(dtype), rng.normal(size=24).astype(dtype)
    y_new, (xhat_new, rstd_new, _) = fast.layer_norm_forward(x.copy(), w, b, 1e-12)
    x_own = x.copy()
    y, (xhat, rstd, _) = fast.layer_norm_forward(x_own, w, b, 1e-12, overwrite_x=True)
    assert np.shares_memory(xhat, x_own)
    for got, want in ((y, y_new), (xhat, xhat_new), (rstd, rstd_new)):
        np.testing.assert_array_equal(got, want)
    strided = np.concatenate([x, x], axis=-1)[..., :24]                          # not C-contiguous
    before = strided.copy()
    y, (xhat, _, _) = fast.layer_norm_forward(strided, w, b, 1e-12, overwrite_x=True)
    np.testing.assert_array_equal(strided, before)
    np.testing.assert_array_equal(y, y_new)
