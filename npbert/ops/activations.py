"""Activation functions: forward/backward pairs, the `ACT2FN` registry, `erf`.

Every activation is a pair, in the style of cs231n's `layers.py`:

    y, cache = <name>_forward(x)                  x: any shape, float32 or float64
    dx = <name>_backward(dy, cache, out=None)     dy, dx: the shape of x

Outputs keep the dtype of `x` (float32 in, float32 out; float64 in, float64
out). Neither `x` nor `dy` is ever written to, except that `out=dy` asks for
dx in dy's memory (BertIntermediate's backward, which owns dy, does that: the
float32 GELU then needs no (B, T, I) array of its own). The cache is `x` itself (for
`tanh`, `sigmoid`: `y`), so a layer keeps nothing more than torch's autograd
keeps for the same op.

Names and formulas follow transformers' `activations.py` (`ACT2FN`) and
torch:

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

NumPy has no erf, so this module has its own (`erf`); docs/gelu.md derives
it, states its error and derives the GELU backward.
"""

import math

import numpy as np

from npbert.ops.parallel import get_num_threads, parallel_for, set_num_threads  # noqa: F401 (re-exported)

__all__ = [
    "ACT2FN",
    "erf",
    "get_activation",
    "set_num_threads",
    "get_num_threads",
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

_SQRT1_2 = math.sqrt(0.5)                     # 1 / sqrt(2)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # phi(0), the normal pdf at 0
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)    # the tanh-GELU constant
_GELU_TANH_KAPPA = 0.044715                   # ... and its cubic coefficient
_GELU_FAST_C = 0.7978845608                   # gelu_fast's truncated sqrt(2/pi)
_QUICK_GELU_ALPHA = 1.702


def _into(dx, out):
    """dx, or dx copied into `out` when the caller gave one (and it is not dx already)."""
    if out is None or out is dx:
        return dx
    out[...] = dx
    return out


def _float_array(x, name="x"):
    """`x` as an ndarray of a float dtype we compute in (float32 or float64)."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got {x.dtype}")
    return x


def _horner(coeffs, u):
    """sum_i coeffs[i] * u**i, evaluated from the top (Horner). u: float64 array."""
    p = np.full_like(u, coeffs[-1])
    for c in coeffs[-2::-1]:
        p *= u
        p += c
    return p


# ---------------------------------------------------------------------------
# erf, erfc and the normal cdf Phi, in float64.
#
#   |a| < 0.5:   erf(a)  = a * P(a^2)                   (_ERF_SMALL)
#   a >= 0.5:    erfc(a) = exp(-a^2) * erfcx(a)         erfcx(a) = exp(a^2) erfc(a)
#                erfcx(a) = piecewise polynomial in (a - centre) on [0.5, 7)
#                erfcx(a) = (1/a) * Q(1/a^2 - centre)   for a >= 7
#
# erfcx is smooth and of order 1/a, so it is what the polynomials carry;
# exp(-a^2) is taken as exp(-ah^2) * exp(-(a - ah)(a + ah)) with ah = a
# rounded to 24 bits, so that ah^2 is exact and the tail of erfc keeps full
# relative precision (the rounding of a^2 alone would cost a^2 ulp).
# ---------------------------------------------------------------------------

def _erf_small64(u):
    """erf(u) for |u| <= 0.5.  u: float64 array."""
    return u * _horner(_ERF_SMALL, u * u)


def _erfc_pos64(a):
    """erfc(a) for a >= 0.5 (and +inf, nan), full relative precision.  a: float64."""
    erfcx = np.empty_like(a)
    for lo, hi, centre, coeffs in _ERFCX_PIECES:
        idx = np.nonzero((a >= lo) & (a < hi))
        erfcx[idx] = _horner(coeffs, a[idx] - centre)
    idx = np.nonzero(~(a < _ERFCX_PIECES[-1][1]))     # a >= 7, inf and nan
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_a = 1.0 / a[idx]
        erfcx[idx] = inv_a * _horner(_ERFCX_TAIL, inv_a * inv_a - _ERFCX_TAIL_CENTER)
    a = np.minimum(a, 64.0)                           # erfc(27.3) < 5e-324 already
    ah = a.astype(np.float32).astype(np.float64)      # 24 bits: ah * ah is exact
    low = (a - ah) * (a + ah)                         # a^2 - ah^2, exactly enough
    return np.exp(-ah * ah) * np.exp(-low) * erfcx


def _erf64(x):
    """erf(x) in float64, within ~1 ulp of math.erf (see docs/gelu.md)."""
    out = np.empty_like(x)
    a = np.abs(x)
    small = a < 0.5
    out[small] = _erf_small64(x[small])
    big = np.nonzero(~small)                          # also nan
    out[big] = np.copysign(1.0 - _erfc_pos64(a[big]), x[big])
    return out


def _ndtr64(x):
    """Phi(x) = 0.5 * erfc(-x / sqrt(2)), the standard normal cdf, in float64.

    Computed from erfc on the tail side, so Phi(-10) ~ 7.6e-24 keeps its
    relative precision (torch's 0.5 * (1 + erf(x / sqrt(2))) cancels there).
    """
    u = x * _SQRT1_2
    a = np.abs(u)
    out = np.empty_like(x)
    small = a < 0.5
    out[small] = 0.5 + 0.5 * _erf_small64(u[small])
    big = np.nonzero(~small)
    half_erfc = 0.5 * _erfc_pos64(a[big])
    out[big] = np.where(u[big] > 0, 1.0 - half_erfc, half_erfc)
    return out


def erf(x):
    """The error function, elementwise; float32 in -> float32 out, float64 -> float64.

    float64: |erf(x) - math.erf(x)| within ~1 ulp everywhere (docs/gelu.md).
    float32: computed as float64 and rounded, so correctly rounded up to ~1 ulp.
    """
    x = _float_array(x)
    return _erf64(x.astype(np.float64, copy=False)).astype(x.dtype, copy=False)


# ---------------------------------------------------------------------------
# The float32 GELU fast path.
#
# In float32 Phi is written as a logistic of an odd polynomial,
#
#     Phi(x) ~= 1 / (1 + exp(-z)) = 1 / (2 + expm1(-z)),   z = x * q(x^2),
#
# with q of degree 6 fitted (weighted minimax, docs/gelu.md) so that
# |Phi~ - Phi| <= 2.9e-8 on the whole real line; q > 0 grows fast enough
# that Phi~ saturates to exactly 1 (x > 6) and 0 (x < -6) like Phi does.
# So gelu(x) = x / (2 + expm1(-z)): 17 elementwise passes and no branch.
# The passes run over cache-sized chunks with `out=` buffers (no temporary
# arrays), spread over a small thread pool: NumPy releases the GIL inside
# its loops. Chunks sit on a fixed grid, so the result is bit-identical
# for any number of threads.
# ---------------------------------------------------------------------------

_CHUNK = 65536                                # float32 elements, 256 KiB: fewer ufunc calls (each takes the GIL) while staying L2-resident
_f32 = np.float32
# -q(s), lowest power first (float32; fitted in docs/gelu.md)
_NEG_Q32 = tuple(np.array(c, _f32) for c in (
    -1.5957698822021484, -0.07266616821289062, 6.518996087834239e-05,
    0.00011061238183174282, -7.929487765068188e-06, 2.6452661927578447e-07,
    -3.5123395303315874e-09,
))
_TWO32 = np.array(2.0, _f32)
_MINUS_HALF32 = np.array(-0.5, _f32)
_LOG_INV_SQRT_2PI32 = np.array(math.log(_INV_SQRT_2PI), _f32)

def _run_chunked(kernel, n_scratch, out, *inputs):
    """Apply kernel(*input_chunks, out_chunk, *scratch) over a fixed grid of chunks.

    inputs and out: flat, C-contiguous float32 arrays of the same length N.
    Chunk k is [k*_CHUNK, (k+1)*_CHUNK) whatever the thread count; each
    thread takes a contiguous run of chunks and owns its scratch buffers.
    """
    n = out.size
    n_chunks = -(-n // _CHUNK)

    def work(first, last):                    # chunks [first, last)
        scratch = [np.empty(_CHUNK, _f32) for _ in range(n_scratch)]
        for k in range(first, last):
            lo, hi = k * _CHUNK, min((k + 1) * _CHUNK, n)
            m = hi - lo
            kernel(*(a[lo:hi] for a in inputs), out[lo:hi], *(b[:m] for b in scratch))

    with np.errstate(over="ignore", invalid="ignore"):
        parallel_for(work, n_chunks, wrap=_with_errstate)
    return out


def _with_errstate(fn, *args):
    # np.errstate is per thread: overflow of expm1 to inf is expected here.
    with np.errstate(over="ignore", invalid="ignore"):
        return fn(*args)


def _neg_z32(x, s, p):
    """p = -z = -x q(s) with s = x^2 (written to s).  All float32 chunks."""
    np.multiply(x, x, s)                      # s = x^2
    np.multiply(s, _NEG_Q32[6], p)
    np.add(p, _NEG_Q32[5], p)
    for c in _NEG_Q32[4::-1]:                 # Horner: p = p s + c
        np.multiply(p, s, p)
        np.add(p, c, p)
    np.multiply(p, x, p)                      # p = -z


def _gelu32_kernel(x, y, s):
    """y = x / (2 + expm1(-z)) = x Phi(x).   x, y, s: float32 chunks."""
    _neg_z32(x, s, y)                         # y = -z
    np.expm1(y, y)
    np.add(y, _TWO32, y)                      # y = 1 / Phi(x)
    np.divide(x, y, y)


def _dgelu32_kernel(x, dy, dx, s, p):
    """dx = dy Phi(x) + dy x phi(x).   x, dy, dx, s, p: float32 chunks; dx may be dy itself
    (every read of dy comes before the one write of dx)."""
    _neg_z32(x, s, p)                         # p = -z
    np.expm1(p, p)
    np.add(p, _TWO32, p)                      # p = 1 / Phi(x)
    np.multiply(s, _MINUS_HALF32, s)          # s = -x^2 / 2
    np.add(s, _LOG_INV_SQRT_2PI32, s)
    np.exp(s, s)                              # s = phi(x)
    np.multiply(s, x, s)
    np.multiply(s, dy, s)                     # s = dy x phi(x)
    np.divide(dy, p, p)                       # p = dy Phi(x)
    np.add(p, s, dx)


_HALF32 = np.array(0.5, _f32)
_TINY32 = np.array(2.0 ** -60, _f32)          # below this |x|, Phi(x) = 1/2 in float32


def _dgelu32_from_y_kernel(x, y, dy, dx, s, p):
    """dx = dy (Phi(x) + x phi(x)) with Phi(x) = y / x read off the forward's output y = x Phi(x):
    11 passes instead of the 23 that recompute Phi (docs/gelu.md).  Where |x| < 2^-60 (0
    included, where y / x is 0 / 0, and subnormals, where it loses bits) Phi is 1/2, its value
    there in float32."""
    small = s.view(np.bool_)[s.size * 3:]           # the last quarter of s's bytes: s.size booleans
    np.abs(x, p)
    np.less(p, _TINY32, small)
    np.divide(y, x, p)                              # p = Phi(x) = y / x ...
    np.copyto(p, _HALF32, where=small)              # ... and 1/2 where x is tiny
    np.multiply(x, x, s)                            # (small is overwritten here, no longer needed)
    np.multiply(s, _MINUS_HALF32, s)                # s = -x^2 / 2
    np.add(s, _LOG_INV_SQRT_2PI32, s)
    np.exp(s, s)                                    # s = phi(x)
    np.multiply(s, x, s)
    np.add(p, s, p)                                 # p = Phi(x) + x phi(x)
    np.multiply(p, dy, dx)


def _gelu32(x):
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    _run_chunked(_gelu32_kernel, 1, y.reshape(-1), x.reshape(-1))
    return y


def _dgelu32(dy, x, out=None, y=None):
    """The float32 GELU backward; with y (the forward's output) Phi is read off as y / x."""
    x = np.ascontiguousarray(x)
    dy = np.ascontiguousarray(dy, dtype=_f32)
    if out is None or not (out.flags.c_contiguous and out.dtype == _f32 and out.shape == x.shape):
        dx = np.empty_like(x)
    else:
        dx = out
    if y is None:
        _run_chunked(_dgelu32_kernel, 2, dx.reshape(-1), x.reshape(-1), dy.reshape(-1))
    else:
        y = np.ascontiguousarray(y)
        _run_chunked(_dgelu32_from_y_kernel, 2, dx.reshape(-1), x.reshape(-1), y.reshape(-1), dy.reshape(-1))
    return _into(dx, out)


# ---------------------------------------------------------------------------
# gelu (exact, erf-based), as torch.nn.functional.gelu(x)
# ---------------------------------------------------------------------------

def gelu_forward(x):
    """y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).   x: (...) -> y: (...)"""
    x = _float_array(x)
    if x.dtype == np.float32:
        return _gelu32(x), x                  # the fast path above
    return x * _ndtr64(x), x                  # float64: Phi from erfc, ~1 ulp


def gelu_backward(dy, cache, out=None, y=None):
    """dx = dy * (Phi(x) + x * phi(x)),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi).

    In the forward pass this was: y = x * Phi(x); Phi' = phi (docs/gelu.md).
    y: optionally the forward's output, if the caller still holds it (BertIntermediate does):
    in float32, Phi(x) is then read off as y / x instead of being computed again.
    """
    x = cache
    if x.dtype == np.float32:
        if y is not None:
            if not (isinstance(y, np.ndarray) and y.shape == x.shape and y.dtype == x.dtype):
                raise ValueError(f"gelu_backward: y must be the forward's output, {x.dtype} {x.shape}, "
                                 f"got {getattr(y, 'dtype', type(y).__name__)} {getattr(y, 'shape', '')}")
        return _dgelu32(dy, x, out, y)
    phi = _INV_SQRT_2PI * np.exp(-0.5 * (x * x))      # (...), the normal pdf
    return np.multiply(dy, _ndtr64(x) + x * phi, out=out)


# ---------------------------------------------------------------------------
# The tanh approximations: gelu_new, gelu_pytorch_tanh, gelu_fast
#   y = 0.5 x (1 + tanh(inner(x)))
#   dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) inner'(x),   t = tanh(inner(x))
# ---------------------------------------------------------------------------

def _tanh_gelu_backward(dy, x, t, dinner, out=None):
    """dy * d/dx [0.5 x (1 + t)] given t = tanh(inner(x)) and inner'(x)."""
    return np.multiply(dy, 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner, out=out)


def gelu_new_forward(x):
    """transformers' NewGELUActivation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = _float_array(x)
    t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_KAPPA * (x * x * x)))
    return 0.5 * x * (1.0 + t), x


def gelu_new_backward(dy, cache, out=None):
    """inner = sqrt(2/pi) (x + k x^3),  inner' = sqrt(2/pi) (1 + 3 k x^2)."""
    x = cache
    x2 = x * x
    t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_KAPPA * (x2 * x)))
    dinner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_KAPPA * x2)
    return _tanh_gelu_backward(dy, x, t, dinner, out)


def gelu_pytorch_tanh_forward(x):
    """torch F.gelu(x, approximate="tanh"); the same formula as gelu_new."""
    return gelu_new_forward(x)


def gelu_pytorch_tanh_backward(dy, cache, out=None):
    return gelu_new_backward(dy, cache, out)


def gelu_fast_forward(x):
    """transformers' FastGELUActivation: 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))."""
    x = _float_array(x)
    t = np.tanh(_GELU_FAST_C * x * (1.0 + _GELU_TANH_KAPPA * (x * x)))
    return 0.5 * x * (1.0 + t), x


def gelu_fast_backward(dy, cache, out=None):
    """inner = c x (1 + k x^2),  inner' = c (1 + 3 k x^2)."""
    x = cache
    x2 = x * x
    t = np.tanh(_GELU_FAST_C * x * (1.0 + _GELU_TANH_KAPPA * x2))
    dinner = _GELU_FAST_C * (1.0 + 3.0 * _GELU_TANH_KAPPA * x2)
    return _tanh_gelu_backward(dy, x, t, dinner, out)


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


def sigmoid_backward(dy, cache, out=None):
    """dx = dy * y (1 - y)."""
    y = cache
    return np.multiply(dy, y * (1.0 - y), out=out)


def silu_forward(x):
    """y = x * sigmoid(x)   (torch F.silu; transformers "silu" and "swish")."""
    x = _float_array(x)
    return x * _sigmoid(x), x


def silu_backward(dy, cache, out=None):
    """dx = dy * s (1 + x (1 - s)),  s = sigmoid(x)."""
    x = cache
    s = _sigmoid(x)
    return np.multiply(dy, s * (1.0 + x * (1.0 - s)), out=out)


swish_forward = silu_forward
swish_backward = silu_backward


def quick_gelu_forward(x):
    """transformers' QuickGELUActivation: y = x * sigmoid(1.702 x)."""
    x = _float_array(x)
    return x * _sigmoid(_QUICK_GELU_ALPHA * x), x


def quick_gelu_backward(dy, cache, out=None):
    """dx = dy * (s + 1.702 x s (1 - s)),  s = sigmoid(1.702 x)."""
    x = cache
    s = _sigmoid(_QUICK_GELU_ALPHA * x)
    return np.multiply(dy, s + _QUICK_GELU_ALPHA * x * (s * (1.0 - s)), out=out)


# ---------------------------------------------------------------------------
# relu, tanh, linear
# ---------------------------------------------------------------------------

def relu_forward(x):
    """y = max(x, 0)."""
    x = _float_array(x)
    return np.maximum(x, 0), x


def relu_backward(dy, cache, out=None):
    """dx = dy where x > 0, else 0 (torch: the gradient at x == 0 is 0)."""
    x = cache
    return _into(np.where(x > 0, dy, 0).astype(dy.dtype, copy=False), out)


def tanh_forward(x):
    """y = tanh(x).   cache: y (the backward needs only y)."""
    x = _float_array(x)
    y = np.tanh(x)
    return y, y


def tanh_backward(dy, cache, out=None):
    """dx = dy * (1 - y^2)."""
    y = cache
    return np.multiply(dy, 1.0 - y * y, out=out)


def linear_forward(x):
    """y = x (a copy, so that writing to y never changes x)."""
    x = _float_array(x)
    return x.copy(), None


def linear_backward(dy, cache, out=None):
    """dx = dy (a copy, or dy written to `out`)."""
    return np.array(dy, copy=True) if out is None else _into(dy, out)


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


def get_activation(name):
    """(forward, backward) for a transformers `hidden_act` name, e.g. "gelu"."""
    try:
        return ACT2FN[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(ACT2FN))
        raise ValueError(f"unknown activation {name!r}; known activations: {known}") from None


# ---------------------------------------------------------------------------
# Coefficient tables for erf / erfcx, float64. Generated by the script in
# docs/gelu.md (Chebyshev interpolation in 50-digit mpmath arithmetic,
# re-expanded as monomials around each interval's centre).
# ---------------------------------------------------------------------------

_ERF_SMALL = (
    1.1283791670955126,
    -0.37612638903183754,
    0.11283791670955123,
    -0.026866170645130034,
    0.005223977625403192,
    -0.0008548327016159163,
    0.00012055332131175981,
    -1.4925586560096415e-05,
    1.6459034327218912e-06,
    -1.6273138761686977e-07,
    1.3214378238338438e-08,
)

_ERFCX_PIECES = (
    (0.5, 1, 0.75, (
        0.5069376502931449,
        -0.3679726916557954,
        0.2309581315512983,
        -0.1298360619948811,
        0.06679054252756655,
        -0.03189726203968118,
        0.014289198666213443,
        -0.00605153229729106,
        0.0024376373433168705,
        -0.000938512056293829,
        0.0003467512575452147,
        -0.0001233545520026088,
        4.236125943559736e-05,
        -1.408512949400527e-05,
        4.653752310183548e-06,
        -1.4567881256540653e-06,
    )),
    (1, 1.5, 1.25, (
        0.3678229164523611,
        -0.20882187596460985,
        0.1067955714965988,
        -0.050218274395907286,
        0.022011364250857087,
        -0.009081627632983702,
        0.003553109903243474,
        -0.0013257829259341594,
        0.0004739703092322156,
        -0.00016296015585453164,
        5.405410070923268e-05,
        -1.7341014492670602e-05,
        5.394803262378592e-06,
        -1.6632665035773791e-06,
        4.887229880775173e-07,
    )),
    (1.5, 2, 1.75, (
        0.2849722347374364,
        -0.1309763455144852,
        0.05576363008708727,
        -0.022259995241388296,
        0.008404319207328838,
        -0.003020974651430884,
        0.0010392045224464287,
        -0.0003435333530328009,
        0.00010950528835549968,
        -3.375537235791456e-05,
        1.0086687747870453e-05,
        -2.9275803738947514e-06,
        8.270400506291882e-07,
        -2.315667308216523e-07,
        6.219856645384379e-08,
    )),
    (2, 2.75, 2.375, (
        0.22050569220490668,
        -0.08097712912220592,
        0.028185010539667613,
        -0.009358486060330226,
        0.0029793030731914516,
        -0.0009130565045999618,
        0.0002702646249342538,
        -7.7479434405527e-05,
        2.1562741717837717e-05,
        -5.837315929021942e-06,
        1.5398283985232488e-06,
        -3.964076401410551e-07,
        9.968365488410343e-08,
        -2.4537438492414167e-08,
        6.1037827116476905e-09,
        -1.441150928258724e-09,
    )),
    (2.75, 3.75, 3.25, (
        0.16633534842682188,
        -0.047199402321170376,
        0.012937290883018161,
        -0.0034354713009075743,
        0.0008860045775339878,
        -0.0002223825695684198,
        5.4420408821318145e-05,
        -1.3004640267147632e-05,
        3.038831845014022e-06,
        -6.952080396531202e-07,
        1.5588236637872794e-07,
        -3.429011784899545e-08,
        7.400795667821691e-09,
        -1.570973363674684e-09,
        3.421215303962009e-10,
        -7.019003655071008e-11,
    )),
    (3.75, 5, 4.375, (
        0.12582358819498807,
        -0.02742277038936697,
        0.005848967741507582,
        -0.0012223576801808661,
        0.00025057644535814936,
        -5.0434292695540424e-05,
        9.975471604980876e-06,
        -1.9404584075044296e-06,
        3.71491518941881e-07,
        -7.004066322373079e-08,
        1.3012717085496822e-08,
        -2.383670821722571e-09,
        4.307194520797646e-10,
        -7.672924676492949e-11,
        1.351079259737921e-11,
        -2.469300698255848e-12,
        4.2389080530059687e-13,
    )),
    (5, 7, 6.0, (
        0.09277656780053835,
        -0.015060353489052321,
        0.002414446866224427,
        -0.0003824481944705059,
        5.987884970069974e-05,
        -9.270038506533112e-06,
        1.419539553792547e-06,
        -2.1508605243213218e-07,
        3.225581001177493e-08,
        -4.789154167802577e-09,
        7.041763884031672e-10,
        -1.0256213232417373e-10,
        1.480163951883992e-11,
        -2.116832467776172e-12,
        2.9906232236722176e-13,
        -4.203738281082252e-14,
        6.404328586792218e-15,
        -8.840904304238685e-16,
    )),
)

_ERFCX_TAIL_CENTER = 0.01020408163265306
_ERFCX_TAIL = (
    0.5613540386598017,
    -0.27377479041473995,
    0.3929085752030843,
    -0.9223357333976805,
    2.976338774314237,
    -12.130890049814901,
    59.39081744240111,
    -337.86699665858185,
    2181.0618890138753,
    -15702.967605248574,
    127598.03693217765,
    -1104356.0375520058,
)
