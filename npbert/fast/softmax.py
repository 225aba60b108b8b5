"""The fast path's softmax.  It computes what npbert/ops/softmax.py computes,

    y = exp(x - max(x)) / sum(exp(x - max(x)))          x, y: (..., T)

with the same arithmetic (the forward is bit-equal; the backward's row sums are an einsum,
equal to round-off), and it can work in place (`out=x`, `out=dy`), which the fast attention
does on its (B, N, F, T) scores: one such array less.  Same cache as the reference: y.
"""
import numpy as np


def softmax_forward(x, out=None):
    """y = exp(x - max(x)) / sum(exp(x - max(x))), as npbert/ops/softmax.py's softmax_forward.
    (..., T) -> (..., T), rows sum to 1.  The cache is the output itself.

    `out=x` computes in place, for a caller that owns `x` and no longer needs it (attention's
    scores); otherwise a new array is returned and `x` is left alone."""
    y = np.subtract(x, x.max(axis=-1, keepdims=True), out=out)   # (..., T), largest entry 0: no overflow
    np.exp(y, out=y)
    y /= y.sum(axis=-1, keepdims=True)
    return y, y


def softmax_backward(dy, cache, out=None):
    """dx = y * (dy - sum(dy * y)), as npbert/ops/softmax.py's softmax_backward (the row sums an
    einsum, with no temporary).

    `out=dy` computes in place, for a caller that owns `dy` (attention's backward); otherwise
    a new array is returned and `dy` is left alone."""
    y = cache
    s = np.einsum("...t,...t->...", dy, y)[..., None]     # (..., 1) = sum_j dy_j y_j, no temporary
    dx = np.subtract(dy, s, out=out)                      # (..., T)
    dx *= y
    return dx
