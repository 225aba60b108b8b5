"""The integration rules of integrated gradients and conductance: captum's points and weights.

    integral_0^1 g(alpha) d alpha  ~=  sum_k w_k g(alpha_k)         k = 0 .. n-1

    method               alpha_k                           w_k
    riemann_left         k / n                             1 / n
    riemann_right        (k + 1) / n                       1 / n
    riemann_middle       (k + 1/2) / n                     1 / n
    riemann_trapezoid    k / (n - 1)                       1 / n, halved at both ends
    gausslegendre        (1 + x_k) / 2, x_k the n Gauss-Legendre nodes on [-1, 1]
                                                           v_k / 2, v_k their weights

(captum/attr/_utils/approximation_methods.py).  The Riemann rules need n >= 2 (captum asserts it),
Gauss-Legendre n >= 1.  How fast the error falls for a smooth g (Euler-Maclaurin):

    riemann_left / right   error -+(g(1) - g(0)) / (2n) + O(1/n^2)              order 1/n
    riemann_middle         error -(g'(1) - g'(0)) / (24 n^2) + O(1/n^4)         order 1/n^2
    riemann_trapezoid      captum's weights sum to 1 - 1/n (the points are 1/(n-1) apart, the
                           weights 1/n): error -(integral of g) / n + O(1/n^2)    order 1/n
    gausslegendre          exact for polynomials of degree 2n - 1; exponential in n for analytic g
                           (every op of BERT is analytic where LayerNorm's variance is not 0)

`captum_rounding=True` reproduces what captum computes in float64 too: the Riemann points come from
`torch.linspace` in float32 (torch's default dtype), and every rule's weights are turned into a
float32 tensor (`torch.tensor(step_sizes).float()`) before they multiply the float64 gradients.
Both are rounded here as torch rounds them, so attributions agree with captum's to round-off.
The default, False, uses the points and weights in float64, which is what the rule says: the
convergence delta then measures the integration error alone, not float32 rounding (~1e-8).
"""
import numpy as np

METHODS = ("riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid", "gausslegendre")


def check_rule(method, n_steps, min_steps=None):
    """An unknown method or too few steps is an error naming it."""
    if method not in METHODS:
        raise ValueError(f"unknown integration method {method!r}: use one of {', '.join(METHODS)}")
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)):
        raise TypeError(f"n_steps must be an integer, got {n_steps!r}")
    least = min_steps if min_steps is not None else (1 if method == "gausslegendre" else 2)
    if n_steps < least:
        raise ValueError(f"n_steps={n_steps}: {method} needs n_steps >= {least}")


def step_sizes_and_alphas(method, n_steps, captum_rounding=False):
    """(weights w (n,), points alpha (n,)), float64 arrays; see the module's docstring."""
    check_rule(method, n_steps)
    n = int(n_steps)
    if method == "gausslegendre":
        x, v = np.polynomial.legendre.leggauss(n)                     # nodes and weights on [-1, 1]
        weights, alphas = 0.5 * v, 0.5 * (1 + x)                      # scaled to [0, 1]
    else:
        weights = np.full(n, 1 / n)
        if method == "riemann_trapezoid":
            weights[0] /= 2
            weights[-1] /= 2
        start, end = {"riemann_left": (0.0, 1 - 1 / n), "riemann_right": (1 / n, 1.0),
                      "riemann_middle": (1 / (2 * n), 1 - 1 / (2 * n)), "riemann_trapezoid": (0.0, 1.0)}[method]
        alphas = torch_linspace_float32(start, end, n) if captum_rounding else np.linspace(start, end, n)
    if captum_rounding:
        weights = weights.astype(np.float32)
    return weights.astype(np.float64), np.asarray(alphas, dtype=np.float64)


def torch_linspace_float32(start, end, steps):
    """torch.linspace(start, end, steps) in float32, as torch's CPU kernel computes it:
        step = (end - start) / (steps - 1)                      in float32
        v_i  = start + step * i              for i <  steps // 2
        v_i  = end - step * (steps - 1 - i)  for i >= steps // 2   (each a fused multiply-add)
    The products are exact in float64 and the sums round once to float32, as a fused
    multiply-add does.  Tested equal to torch.linspace (tests/interpret/test_quadrature.py)."""
    f32 = np.float32
    start, end = f32(start), f32(end)
    if steps == 1:
        return np.array([start], dtype=f32)
    step = f32((end - start) / f32(steps - 1))                        # float32 arithmetic
    i = np.arange(steps, dtype=np.float64)                            # (steps,)
    from_start = np.float64(step) * i + np.float64(start)
    from_end = np.float64(end) - np.float64(step) * (steps - 1 - i)
    return np.where(i < steps // 2, from_start, from_end).astype(f32)
