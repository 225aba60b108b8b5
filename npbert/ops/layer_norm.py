"""LayerNorm over the last axis, as torch.nn.LayerNorm (biased variance, eps inside the sqrt).

    y = weight * (x - mean) / sqrt(var + eps) + bias        x, y: (..., C)   weight, bias: (C,)
"""
import numpy as np


def layer_norm_forward(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)                 # (..., 1)
    xc = x - mean                                         # (..., C)
    var = np.mean(xc * xc, axis=-1, keepdims=True)        # (..., 1), biased like torch
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))         # (..., 1), keeps x.dtype
    xhat = xc                                             # reuse the buffer: xhat = xc * rstd
    xhat *= rstd                                          # (..., C)
    y = xhat * weight                                     # (..., C)
    y += bias
    return y, (xhat, rstd, weight)


def layer_norm_backward(dy, cache):
    """Returns (dx, {"weight": dweight, "bias": dbias}).

    With xhat = (x - mean) * rstd and g = dy * weight (the gradient at xhat):
        dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    (derivation in docs/backward.md).
    """
    xhat, rstd, weight = cache
    C = dy.shape[-1]
    dy2 = dy.reshape(-1, C)                               # (M, C)
    xhat2 = xhat.reshape(-1, C)                           # (M, C)
    grads = {"weight": np.einsum("mc,mc->c", dy2, xhat2), "bias": dy2.sum(axis=0)}   # (C,), (C,)
    g = dy * weight                                       # (..., C)
    gmean = g.mean(axis=-1, keepdims=True)                # (..., 1)
    gxmean = np.mean(g * xhat, axis=-1, keepdims=True)    # (..., 1)
    dx = g
    dx -= gmean
    dx -= xhat * gxmean
    dx *= rstd                                            # (..., C)
    return dx, grads
