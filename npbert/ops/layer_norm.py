"""LayerNorm over the last axis, as torch.nn.LayerNorm (biased variance, eps inside the sqrt).

    y = weight * (x - mean) / sqrt(var + eps) + bias        x, y: (..., C)   weight, bias: (C,)

The fast path's twin (the same arithmetic in row blocks on threads) is npbert/fast/layer_norm.py.
"""
import numpy as np


def layer_norm_forward(x, weight, bias, eps):
    """(..., C) -> ((..., C), cache).  The cache is (xhat, rstd, weight)."""
    mean = x.mean(axis=-1, keepdims=True)                  # (..., 1)
    xc = x - mean                                          # (..., C)
    var = (xc * xc).mean(axis=-1, keepdims=True)           # (..., 1), biased like torch
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))          # (..., 1), keeps x.dtype
    xhat = xc * rstd                                       # (..., C)
    return xhat * weight + bias, (xhat, rstd, weight)


def layer_norm_backward(dy, cache):
    """Returns (dx, {"weight": dweight, "bias": dbias}).

    In the forward: xhat = (x - mean) * rstd, y = weight * xhat + bias.  With dxhat = dy * weight:
        dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    (derivation in docs/backward.md)."""
    xhat, rstd, weight = cache
    axes = tuple(range(dy.ndim - 1))                       # every axis but C
    grads = {"weight": (dy * xhat).sum(axis=axes), "bias": dy.sum(axis=axes)}   # (C,), (C,)
    dxhat = dy * weight                                    # (..., C)
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))          # (..., C)
    return dx, grads
