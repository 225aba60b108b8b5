"""The integration rules (npbert/interpret/quadrature.py): captum's points and weights, with and
without captum's float32 rounding, and the errors for a bad rule."""
import numpy as np
import pytest

from npbert.interpret.quadrature import METHODS, check_rule, step_sizes_and_alphas, torch_linspace_float32


def test_linspace_rounding_is_torchs():
    """Every range captum asks torch.linspace for, n = 1..700: bit-equal (a missing fused
    multiply-add, a float64 step or the wrong half rule differs in ~1/3 of them, measured)."""
    torch = pytest.importorskip("torch")
    for n in list(range(1, 700)) + [1000, 4097]:
        for a, b in ((0, 1), (0, 1 - 1 / n), (1 / (2 * n), 1 - 1 / (2 * n)), (1 / n, 1)):
            assert np.array_equal(torch_linspace_float32(a, b, n), torch.linspace(a, b, n).numpy()), (n, a, b)


@pytest.mark.parametrize("method", METHODS)
def test_points_and_weights_are_captums(method):
    """captum_rounding=True: captum's alphas exactly and its step sizes as the float32 tensor its
    _attribute multiplies by; False: the same rule unrounded, within float32's rounding of it."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("captum")
    from captum.attr._utils.approximation_methods import approximation_parameters
    step_sizes, alphas = approximation_parameters(method)
    for n in (2, 3, 7, 50, 129):
        w, a = step_sizes_and_alphas(method, n, captum_rounding=True)
        assert np.array_equal(a, np.array(alphas(n), dtype=np.float64))
        assert np.array_equal(w, torch.tensor(step_sizes(n)).float().double().numpy())
        w0, a0 = step_sizes_and_alphas(method, n)
        assert np.allclose(w0, w, rtol=6e-8, atol=0) and np.allclose(a0, a, rtol=0, atol=6e-8)
        assert np.array_equal(w0, np.array(step_sizes(n)))          # the exact rule: captum's float64 lists


def test_the_rules_integrate_what_they_should():
    """Unrounded: Gauss-Legendre with n points integrates t^(2n-1) on [0, 1] exactly; the middle
    rule is exact for a line; captum's trapezoid weights sum to 1 - 1/n (its points are 1/(n-1)
    apart), the others' to 1."""
    for n in (1, 2, 5, 9):
        w, a = step_sizes_and_alphas("gausslegendre", n)
        assert abs((w * a ** (2 * n - 1)).sum() - 1 / (2 * n)) < 1e-15
    w, a = step_sizes_and_alphas("riemann_middle", 6)
    assert abs((w * (3 * a + 1)).sum() - 2.5) < 1e-15
    for method in METHODS:
        w, _ = step_sizes_and_alphas(method, 10)
        assert abs(w.sum() - (0.9 if method == "riemann_trapezoid" else 1.0)) < 1e-15, method


def test_bad_rules_are_errors_naming_them():
    with pytest.raises(ValueError, match="unknown integration method 'simpson'"):
        check_rule("simpson", 10)
    with pytest.raises(ValueError, match="n_steps=0: gausslegendre needs n_steps >= 1"):
        check_rule("gausslegendre", 0)
    with pytest.raises(ValueError, match="n_steps=1: riemann_left needs n_steps >= 2"):
        check_rule("riemann_left", 1)
    with pytest.raises(TypeError, match="n_steps must be an integer"):
        check_rule("gausslegendre", 2.5)
