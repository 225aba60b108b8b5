"""Linear layer, torch layout: y = x @ W.T + b.

    x: (..., in)   W: (out, in)   b: (out,)   y: (..., out)
"""


def linear_forward(x, weight, bias=None):
    """(..., in) -> (..., out).  The cache keeps references, not copies."""
    x2 = x.reshape(-1, x.shape[-1])                # (M, in), M = prod(leading dims)
    y = x2 @ weight.T                              # (M, out)
    if bias is not None:
        y += bias
    return y.reshape(*x.shape[:-1], weight.shape[0]), (x, weight, bias is not None)


def linear_backward(dy, cache):
    """Returns (dx, {"weight": dW, "bias": db}); dW has W's (out, in) shape."""
    x, weight, has_bias = cache
    dy2 = dy.reshape(-1, dy.shape[-1])             # (M, out)
    x2 = x.reshape(-1, x.shape[-1])                # (M, in)
    dx = (dy2 @ weight).reshape(x.shape)           # (..., in);   in the forward: y = x @ W.T
    grads = {"weight": dy2.T @ x2}                 # (out, in)
    if has_bias:
        grads["bias"] = dy2.sum(axis=0)            # (out,)
    return dx, grads
