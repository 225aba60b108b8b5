"""The fast path's softmax.  It computes what npbert/ops/softmax.py computes,

    y = exp(x - max(x)) / sum(exp(x - max(x)))          x, y: (..., T)

with the same arithmetic (the forward is bit-equal; the backward's row sums are an einsum,
equal to round-off), and it can work in place (`out=x`, `out=dy`), which the fast attention
does on its (B, N, F, T) scores: one such array less.  Same cache as the reference: y.

The attention's scores take `softmax_forward_unshifted` instead: the same softmax without
subtracting each row's max, where nothing can overflow (below).
"""
import math

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


def softmax_forward_unshifted(x, scores_again):
    """softmax over the last axis of x (n, ..., T) in place, as exp(x) / sum(exp(x)): the same
    function (softmax does not change when a constant is subtracted from a row), without the
    row max and its subtraction, which are two of the five passes and the slowest (NumPy's max
    along a short last axis runs at a third of the speed of exp).  Equal to the shifted form up
    to round-off (tests/fast: the shifted exponent x - max(x) is itself rounded).

    Decided for each x[i] on its own (a batch row: its numbers never depend on the others):
      - its largest entry above log(float max) - log(T) - 1 (a row's exps could overflow), or
        NaN: the shifted form, the reference's numbers;
      - a row of x[i] whose exps sum below 2^-20 (every entry far below 0: the terms lose bits
        to underflow): scores_again(i) writes x[i]'s values back into x[i] and it takes the
        shifted form.
    Returns x, the probabilities."""
    n, T = x.shape[0], x.shape[-1]
    limit = math.log(np.finfo(x.dtype).max) - math.log(max(T, 1)) - 1
    top = x.reshape(n, -1).max(axis=1) if x.size else np.zeros(n)                 # (n,)
    if not np.all(top <= limit):                       # some x[i] too large, or NaN: one by one
        for i in range(n):
            if top[i] <= limit:
                softmax_forward_unshifted(x[i:i + 1], lambda _, i=i: scores_again(i))
            else:
                softmax_forward(x[i], out=x[i])
        return x
    np.exp(x, out=x)
    sums = np.einsum("...t->...", x)[..., None]                                   # (n, ..., 1)
    low = sums.reshape(n, -1).min(axis=1) < 2.0 ** -20 if x.size else np.zeros(n, bool)   # (n,)
    sums[low] = 1                                      # (those rows are done again below)
    x /= sums
    for i in np.flatnonzero(low):
        scores_again(i)
        softmax_forward(x[i], out=x[i])
    return x
