"""Inverted dropout, as torch.nn.functional.dropout: keep with probability 1-p, scale by 1/(1-p).

    x, y: any shape.  The keep-mask comes from an explicit np.random.Generator and is kept in the cache.
"""
import numpy as np


def dropout_forward(x, p, rng, training):
    """Returns (y, cache).  In eval mode, or with p == 0, y is x itself and the cache is None."""
    if not training or p == 0.0:
        return x, None
    if p >= 1.0:                                          # torch: everything dropped, gradient 0
        return np.zeros_like(x), (None, x.dtype.type(0.0))
    keep = rng.random(x.shape, dtype=np.float32 if x.dtype == np.float32 else np.float64) >= p
    scale = x.dtype.type(1.0 / (1.0 - p))
    y = x * keep
    y *= scale
    return y, (keep, scale)


def dropout_backward(dy, cache):
    if cache is None:
        return dy
    keep, scale = cache
    if keep is None:
        return np.zeros_like(dy)
    dx = dy * keep
    dx *= scale
    return dx
