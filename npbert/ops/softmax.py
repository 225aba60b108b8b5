"""Softmax over the last axis.

    y = exp(x - max(x)) / sum(exp(x - max(x)))          x, y: (..., T)
"""
import numpy as np


def softmax_forward(x):
    """(..., T) -> (..., T), rows sum to 1.  The cache is the output itself."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))        # (..., T), largest entry 1: no overflow
    y = e / e.sum(axis=-1, keepdims=True)                # (..., T)
    return y, y


def log_softmax(x):
    """log softmax over the last axis by log-sum-exp: log y = (x - max x) - log sum exp(x - max x).
    (..., T) -> (..., T); no exp overflows, and the largest entry's exp is 1."""
    shifted = x - x.max(axis=-1, keepdims=True)          # (..., T), max entry 0
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax_backward(dy, cache):
    """dx = y * (dy - sum(dy * y)): the Jacobian diag(y) - y y^T applied to dy, row by row.

    In the forward: y = softmax(x), dy_j/dx_i = y_j (delta_ij - y_i)."""
    y = cache
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))    # (..., T)
