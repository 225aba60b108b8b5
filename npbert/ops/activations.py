"""Activation functions: forward/backward pairs and the `ACT2FN` registry.

Every activation is a pair, in the style of cs231n's `layers.py`:

    y, cache = <name>_forward(x)            x: any shape, float32 or float64
    dx = <name>_backward(dy, cache)         dy, dx: the shape of x

Outputs keep the dtype of `x`; neither `x` nor `dy` is written to.  The cache is `x` itself
(for `tanh`, `sigmoid`: `y`), what torch's autograd keeps for the same op.

Names and formulas follow transformers' `activations.py` (`ACT2FN`) and torch:

    gelu               x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))    torch F.gelu(x)
    gelu_new           0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    gelu_pytorch_tanh  the same formula, torch F.gelu(x, approximate="tanh")
    gelu_fast          0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))
    quick_gelu         x * sigmoid(1.702 x)
    relu               max(x, 0)
    silu / swish       x * sigmoid(x)
    sigmoid            1 / (1 + exp(-x))
    tanh               tanh(x)                                     (the pooler)
    linear             x

NumPy has no erf: Phi comes from npbert's own (npbert/ops/erf.py; docs/gelu.md derives it and
the GELU backward).  The fast path's float32 GELU (17 fused passes on threads) is
npbert/fast/gelu.py, tested equal to this one within a few ulp.
"""

import math

import numpy as np

from npbert.ops.erf import _float_array, erf, normal_cdf  # noqa: F401 (erf re-exported)

__all__ = [
    "ACT2FN",
    "erf",
    "get_activation",
    "gelu_forward", "gelu_backward",
    "gelu_new_forward", "gelu_new_backward",
    "gelu_pytorch_tanh_forward", "gelu_pytorch_tanh_backward",
    "gelu_fast_forward", "gelu_fast_backward",
    "quick_gelu_forward", "quick_gelu_backward",
    "relu_forward", "relu_backward",
    "silu_forward", "silu_backward",
    "swish_forward", "swish_backward",
    "sigmoid_forward", "sigmoid_backward",
    "tanh_forward", "tanh_backward",
    "linear_forward", "linear_backward",
]

INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # phi(0), the normal pdf at 0
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)    # the tanh-GELU constant
_GELU_TANH_KAPPA = 0.044715                   # ... and its cubic coefficient
_GELU_FAST_C = 0.7978845608                   # gelu_fast's truncated sqrt(2/pi)
_QUICK_GELU_ALPHA = 1.702


# ---------------------------------------------------------------------------
# gelu (exact, erf-based), as torch.nn.functional.gelu(x)
# ---------------------------------------------------------------------------

def gelu_forward(x):
    """y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).   x: (...) -> y: (...)"""
    x = _float_array(x)
    return x * normal_cdf(x), x               # Phi from erfc: no cancellation for x << 0


def gelu_backward(dy, cache):
    """dx = dy * (Phi(x) + x * phi(x)),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi).

    In the forward pass this was: y = x * Phi(x); Phi' = phi (docs/gelu.md)."""
    x = cache
    phi = INV_SQRT_2PI * np.exp(-0.5 * (x * x))       # (...), the normal pdf
    return dy * (normal_cdf(x) + x * phi)


# ---------------------------------------------------------------------------
# The tanh approximations: gelu_new, gelu_pytorch_tanh, gelu_fast
#   y = 0.5 x (1 + tanh(inner(x)))
#   dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) inner'(x),   t = tanh(inner(x))
# ---------------------------------------------------------------------------

def _tanh_gelu_backward(dy, x, t, dinner):
    """dy * d/dx [0.5 x (1 + t)] given t = tanh(inner(x)) and inner'(x)."""
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)


def gelu_new_forward(x):
    """transformers' NewGELUActivation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = _float_array(x)
    t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_KAPPA * (x * x * x)))
    return 0.5 * x * (1.0 + t), x


def gelu_new_backward(dy, cache):
    """inner = sqrt(2/pi) (x + k x^3),  inner' = sqrt(2/pi) (1 + 3 k x^2)."""
    x = cache
    x2 = x * x
    t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_KAPPA * (x2 * x)))
    dinner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_KAPPA * x2)
    return _tanh_gelu_backward(dy, x, t, dinner)


def gelu_pytorch_tanh_forward(x):
    """torch F.gelu(x, approximate="tanh"); the same formula as gelu_new."""
    return gelu_new_forward(x)


def gelu_pytorch_tanh_backward(dy, cache):
    return gelu_new_backward(dy, cache)


def gelu_fast_forward(x):
    """transformers' FastGELUActivation: 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))."""
    x = _float_array(x)
    t = np.tanh(_GELU_FAST_C * x * (1.0 + _GELU_TANH_KAPPA * (x * x)))
    return 0.5 * x * (1.0 + t), x


def gelu_fast_backward(dy, cache):
    """inner = c x (1 + k x^2),  inner' = c (1 + 3 k x^2)."""
    x = cache
    x2 = x * x
    t = np.tanh(_GELU_FAST_C * x * (1.0 + _GELU_TANH_KAPPA * x2))
    dinner = _GELU_FAST_C * (1.0 + 3.0 * _GELU_TANH_KAPPA * x2)
    return _tanh_gelu_backward(dy, x, t, dinner)


# ---------------------------------------------------------------------------
# sigmoid family: sigmoid, silu (= swish), quick_gelu
# ---------------------------------------------------------------------------

def _sigmoid(x):
    """1 / (1 + exp(-x)); exp overflows to inf for x < -88 (float32), giving 0."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def sigmoid_forward(x):
    """y = 1 / (1 + exp(-x)).   cache: y"""
    x = _float_array(x)
    y = _sigmoid(x)
    return y, y


def sigmoid_backward(dy, cache):
    """dx = dy * y (1 - y)."""
    y = cache
    return dy * (y * (1.0 - y))


def silu_forward(x):
    """y = x * sigmoid(x)   (torch F.silu; transformers "silu" and "swish")."""
    x = _float_array(x)
    return x * _sigmoid(x), x


def silu_backward(dy, cache):
    """dx = dy * s (1 + x (1 - s)),  s = sigmoid(x)."""
    x = cache
    s = _sigmoid(x)
    return dy * (s * (1.0 + x * (1.0 - s)))


swish_forward = silu_forward
swish_backward = silu_backward


def quick_gelu_forward(x):
    """transformers' QuickGELUActivation: y = x * sigmoid(1.702 x)."""
    x = _float_array(x)
    return x * _sigmoid(_QUICK_GELU_ALPHA * x), x


def quick_gelu_backward(dy, cache):
    """dx = dy * (s + 1.702 x s (1 - s)),  s = sigmoid(1.702 x)."""
    x = cache
    s = _sigmoid(_QUICK_GELU_ALPHA * x)
    return dy * (s + _QUICK_GELU_ALPHA * x * (s * (1.0 - s)))


# ---------------------------------------------------------------------------
# relu, tanh, linear
# ---------------------------------------------------------------------------

def relu_forward(x):
    """y = max(x, 0)."""
    x = _float_array(x)
    return np.maximum(x, 0), x


def relu_backward(dy, cache):
    """dx = dy where x > 0, else 0 (torch: the gradient at x == 0 is 0)."""
    x = cache
    return np.where(x > 0, dy, 0).astype(dy.dtype, copy=False)


def tanh_forward(x):
    """y = tanh(x).   cache: y (the backward needs only y)."""
    x = _float_array(x)
    y = np.tanh(x)
    return y, y


def tanh_backward(dy, cache):
    """dx = dy * (1 - y^2)."""
    y = cache
    return dy * (1.0 - y * y)


def linear_forward(x):
    """y = x (a copy, so that writing to y never changes x)."""
    x = _float_array(x)
    return x.copy(), None


def linear_backward(dy, cache):
    """dx = dy (a copy)."""
    return np.array(dy, copy=True)


# ---------------------------------------------------------------------------
# Registry, keyed as transformers' ACT2FN
# ---------------------------------------------------------------------------

ACT2FN = {
    "gelu": (gelu_forward, gelu_backward),
    "gelu_python": (gelu_forward, gelu_backward),
    "gelu_new": (gelu_new_forward, gelu_new_backward),
    "gelu_pytorch_tanh": (gelu_pytorch_tanh_forward, gelu_pytorch_tanh_backward),
    "gelu_python_tanh": (gelu_pytorch_tanh_forward, gelu_pytorch_tanh_backward),
    "gelu_fast": (gelu_fast_forward, gelu_fast_backward),
    "quick_gelu": (quick_gelu_forward, quick_gelu_backward),
    "relu": (relu_forward, relu_backward),
    "silu": (silu_forward, silu_backward),
    "swish": (swish_forward, swish_backward),
    "sigmoid": (sigmoid_forward, sigmoid_backward),
    "tanh": (tanh_forward, tanh_backward),
    "linear": (linear_forward, linear_backward),
}


def get_activation(name, registry=None):
    """(forward, backward) for a transformers `hidden_act` name, e.g. "gelu".  `registry`: the
    dict to look in (the fast path passes its own, npbert/fast/gelu.py), ACT2FN by default."""
    try:
        return (ACT2FN if registry is None else registry)[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(ACT2FN))
        raise ValueError(f"unknown activation {name!r}; known activations: {known}") from None
