"""The fast path's exact GELU.  It computes what npbert/ops/activations.py's gelu computes,

    y = x * Phi(x),    dx = dy * (Phi(x) + x phi(x))        x, y, dy, dx: any shape

In float64 it is the reference itself (bit-equal).  In float32 Phi is written as a logistic of
an odd polynomial,

    Phi(x) ~= 1 / (1 + exp(-z)),   z = x * q(x^2),

with q of degree 6 fitted (weighted minimax, docs/gelu.md) so that |Phi~ - Phi| <= 2.9e-8 on the
whole real line; q > 0 grows fast enough that Phi~ saturates to exactly 1 (x > 6) and 0 (x < -6)
like Phi does.  So gelu(x) = x / (1 + exp(-z)): 17 elementwise passes and no branch, within
2.0e-7 |x| of x Phi(x) (the reference rounds x Phi(x) once: the two differ by a few ulp, tested).
The one transcendental pass is NumPy's float32 exp, which is vectorised (SIMD); its expm1 is
not, and costs ten times as much: 20 ns an element against 2 ns on the 2-core AMD machine,
more than the 16 other passes together (docs/performance.md).
The passes run over cache-sized chunks with `out=` buffers (no temporary arrays), spread over
npbert's threads: NumPy releases the GIL inside its loops.  Chunks sit on a fixed grid, so the
result is bit-identical for any number of threads.

The backward can read Phi off the forward's output (`y=`: Phi = y / x, 11 passes instead of 23)
and write dx into dy's memory (`out=dy`).  The cache is x, as the reference's.  A forward whose
backward will follow can instead make the derivative with the output, while x is in cache
(`gelu_forward_with_grad`: y and dy/dx = Phi(x) + x phi(x), 23 passes); the backward is then one
multiplication, dx = dy * dy/dx.  BertIntermediate's fast twin does this in float32.
`ACT2FN` / `get_activation` here are the reference registry with this gelu in place of the
reference one.
"""
import math

import numpy as np

from npbert.ops import activations as reference
from npbert.ops.activations import INV_SQRT_2PI

from .parallel import parallel_for

_CHUNK = 131072                               # float32 elements, 512 KiB: fewer ufunc calls (each takes the GIL), measured fastest (docs/performance.md)
_f32 = np.float32
# -q(s), lowest power first (float32; fitted in docs/gelu.md)
_NEG_Q32 = tuple(np.array(c, _f32) for c in (
    -1.5957698822021484, -0.07266616821289062, 6.518996087834239e-05,
    0.00011061238183174282, -7.929487765068188e-06, 2.6452661927578447e-07,
    -3.5123395303315874e-09,
))
_ONE32 = np.array(1.0, _f32)
_MINUS_HALF32 = np.array(-0.5, _f32)
_LOG_INV_SQRT_2PI32 = np.array(math.log(INV_SQRT_2PI), _f32)

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
    # np.errstate is per thread: overflow of exp to inf is expected here (then Phi~ = 1 / inf = 0).
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
    """y = x / (1 + exp(-z)) = x Phi(x).   x, y, s: float32 chunks."""
    _neg_z32(x, s, y)                         # y = -z
    np.exp(y, y)
    np.add(y, _ONE32, y)                      # y = 1 / Phi(x)
    np.divide(x, y, y)


def _dgelu32_kernel(x, dy, dx, s, p):
    """dx = dy Phi(x) + dy x phi(x).   x, dy, dx, s, p: float32 chunks; dx may be dy itself
    (every read of dy comes before the one write of dx)."""
    _neg_z32(x, s, p)                         # p = -z
    np.exp(p, p)
    np.add(p, _ONE32, p)                      # p = 1 / Phi(x)
    np.multiply(s, _MINUS_HALF32, s)          # s = -x^2 / 2
    np.add(s, _LOG_INV_SQRT_2PI32, s)
    np.exp(s, s)                              # s = phi(x)
    np.multiply(s, x, s)
    np.multiply(s, dy, s)                     # s = dy x phi(x)
    np.divide(dy, p, p)                       # p = dy Phi(x)
    np.add(p, s, dx)



def _gelu32_with_grad_kernel(x, d, y, s, p):
    """y = x Phi(x), the very numbers _gelu32_kernel writes, and d = Phi(x) + x phi(x) = dy/dx.
    x, d, y, s, p: float32 chunks (d is written: _run_chunked passes outputs after the inputs);
    y may be x itself (x is read for the last time by the pass that writes y)."""
    _neg_z32(x, s, p)                         # p = -z, s = x^2
    np.exp(p, p)
    np.add(p, _ONE32, p)                      # p = 1 / Phi(x)
    np.divide(_ONE32, p, d)                   # d = Phi(x)
    np.multiply(s, _MINUS_HALF32, s)          # s = -x^2 / 2
    np.add(s, _LOG_INV_SQRT_2PI32, s)
    np.exp(s, s)                              # s = phi(x)
    np.multiply(s, x, s)
    np.add(d, s, d)                           # d = Phi(x) + x phi(x)
    np.divide(x, p, y)                        # y = x Phi(x)


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


def _gelu32_with_grad(x, overwrite_x=False):
    x = np.ascontiguousarray(x)
    y = x if overwrite_x and x.flags.writeable else np.empty_like(x)
    d = np.empty_like(x)
    _run_chunked(_gelu32_with_grad_kernel, 2, y.reshape(-1), x.reshape(-1), d.reshape(-1))
    return y, d


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



def _into(dx, out):
    """dx, or dx copied into `out` when the caller gave one (and it is not dx already)."""
    if out is None or out is dx:
        return dx
    out[...] = dx
    return out


def gelu_forward(x):
    """y = x * Phi(x): the 17-pass float32 kernel, or (float64) the reference."""
    x = reference._float_array(x)
    if x.dtype == np.float32:
        return _gelu32(x), x
    return reference.gelu_forward(x)


def gelu_forward_with_grad(x, overwrite_x=False):
    """(y, dydx): y = x * Phi(x), the numbers gelu_forward gives, and dy/dx = Phi(x) + x * phi(x),
    both (..., C).  For a forward whose backward follows: dx = dy * dydx.  Float32 in 23 passes
    over chunks still in cache; other dtypes through the reference.  overwrite_x=True (float32,
    a caller that owns x and is done with it): y is written into x's memory, one array less."""
    x = reference._float_array(x)
    if x.dtype == np.float32:
        return _gelu32_with_grad(x, overwrite_x)
    y, cache = reference.gelu_forward(x)
    return y, reference.gelu_backward(np.ones_like(x), cache)


def gelu_backward(dy, cache, out=None, y=None):
    """dx = dy * (Phi(x) + x * phi(x)).  In the forward: y = x * Phi(x).
    y: optionally the forward's output, if the caller still holds it (BertIntermediate's fast
    twin does): in float32, Phi(x) is then read off as y / x instead of being computed again.
    out: an array of x's shape to write dx into (dy itself is fine)."""
    x = cache
    if x.dtype == np.float32:
        if y is not None:
            if not (isinstance(y, np.ndarray) and y.shape == x.shape and y.dtype == x.dtype):
                raise ValueError(f"gelu_backward: y must be the forward's output, {x.dtype} {x.shape}, "
                                 f"got {getattr(y, 'dtype', type(y).__name__)} {getattr(y, 'shape', '')}")
        return _dgelu32(dy, x, out, y)
    return _into(reference.gelu_backward(dy, x), out)


ACT2FN = {**reference.ACT2FN, "gelu": (gelu_forward, gelu_backward), "gelu_python": (gelu_forward, gelu_backward)}


def get_activation(name):
    """(forward, backward) for a transformers `hidden_act` name: this file's gelu, else the reference's."""
    return reference.get_activation(name, ACT2FN)
