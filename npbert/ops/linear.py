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
    grads = linear_param_grads(dy, x, has_bias)
    return linear_input_grad(dy, weight, x.shape), grads


def linear_param_grads(dy, x, has_bias=True, weight_grad=True):
    """{"weight": dW (out, in), "bias": db (out,)}.   in the forward: y = x @ W.T + b
    weight_grad=False leaves dW (and its GEMM) out: a frozen W beside a trainable b."""
    dy2 = dy.reshape(-1, dy.shape[-1])             # (M, out)
    x2 = x.reshape(-1, x.shape[-1])                # (M, in)
    grads = {"weight": dy2.T @ x2} if weight_grad else {}      # (out, in)
    if has_bias:
        grads["bias"] = dy2.sum(axis=0)            # (out,)
    return grads


def linear_input_grad(dy, weight, x_shape):
    """dx = dy @ W, shaped as the forward's x.   (The two halves of linear_backward are
    separate so that a caller can free x between them: see BertSelfOutput.backward.)"""
    return (dy.reshape(-1, dy.shape[-1]) @ weight).reshape(x_shape)
