"""npbert's op-level references as a stable public API: the very functions the modules call
(re-exported from npbert/ops, no second copy), each a forward returning (out, cache) and a
backward taking (dout, cache), so that other people's kernels can be property-tested against them.

    linear_forward(x (..., in), W (out, in), b (out,))            -> y (..., out)
    linear_backward(dy, cache)                                     -> dx, {"weight": dW, "bias": db}
    embedding_forward(ids (B, T) ints, W (V, C))                   -> (B, T, C)
    embedding_backward(dout, cache, padding_idx=None)              -> dW (V, C)
    layer_norm_forward(x (..., C), gamma (C,), beta (C,), eps)     -> y (..., C)   biased variance, as torch
    layer_norm_backward(dy, cache)                                 -> dx, {"weight": dgamma, "bias": dbeta}
    softmax_forward(x (..., T)) / softmax_backward(dy, cache)      max-shifted, rows sum to 1
    dropout_forward(x, p, rng, training) / dropout_backward        inverted dropout, explicit generator
    gelu_forward, gelu_new_forward, relu_forward, tanh_forward, sigmoid_forward, silu_forward, ...
                                                                   and their *_backward(dy, cache)
    get_activation(name)                                           (forward, backward) for a hidden_act
    cross_entropy_forward(logits (N, K) or (B, T, K), labels, ignore_index=-100) / _backward
    mse_forward / mse_backward, bce_with_logits_forward / bce_with_logits_backward
    attention_forward(q, k, v (B, N, T, D), mask (B, 1, 1, T) additive) / attention_backward
                                                                   softmax(q k^T / sqrt(D) + mask) v, composed
                                                                   of the softmax above (the model's
                                                                   BertSelfAttention runs the same steps
                                                                   batched over threads)

Shapes and formulas: docs/ (one page per module); testing other implementations against these:
docs/testing_your_bert.md.
"""
import numpy as np

from npbert.ops.activations import (gelu_backward, gelu_fast_backward, gelu_fast_forward, gelu_forward,
                                    gelu_new_backward, gelu_new_forward, gelu_pytorch_tanh_backward,
                                    gelu_pytorch_tanh_forward, get_activation, quick_gelu_backward,
                                    quick_gelu_forward, relu_backward, relu_forward, sigmoid_backward,
                                    sigmoid_forward, silu_backward, silu_forward, tanh_backward, tanh_forward)
from npbert.ops.dropout import dropout_backward, dropout_forward
from npbert.ops.embedding import embedding_backward, embedding_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.ops.linear import linear_backward, linear_forward
from npbert.ops.losses import (bce_with_logits_backward, bce_with_logits_forward, cross_entropy_backward,
                               cross_entropy_forward, mse_backward, mse_forward)
from npbert.ops.softmax import softmax_backward, softmax_forward


def attention_forward(q, k, v, mask=None):
    """Scaled dot-product attention: (B, N, F, D), (B, N, T, D), (B, N, T, D), additive mask
    broadcastable to (B, N, F, T) -> context (B, N, F, D), cache (probs (B, N, F, T) in it).

        scores = q k^T / sqrt(D) + mask;  probs = softmax(scores);  context = probs v
    """
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale                       # (B, N, F, T)
    if mask is not None:
        scores = scores + mask
    probs, softmax_cache = softmax_forward(scores)
    return np.matmul(probs, v), (q, k, v, probs, softmax_cache, scale)


def attention_backward(dcontext, cache):
    """-> (dq, dk, dv).  In the forward: context = probs v, probs = softmax(scores),
    scores = q k^T * scale (+ a constant mask)."""
    q, k, v, probs, softmax_cache, scale = cache
    dprobs = np.matmul(dcontext, np.swapaxes(v, -1, -2))                         # (B, N, F, T)
    dv = np.matmul(np.swapaxes(probs, -1, -2), dcontext)                          # (B, N, T, D)
    dscores = softmax_backward(dprobs, softmax_cache) * scale
    dq = np.matmul(dscores, k)                                                     # (B, N, F, D)
    dk = np.matmul(np.swapaxes(dscores, -1, -2), q)                               # (B, N, T, D)
    return dq, dk, dv


__all__ = [n for n in dir() if n.endswith(("_forward", "_backward")) or n == "get_activation"]
