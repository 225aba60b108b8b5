"""npbert's op-level references as a stable public API: the reference ops the modules call on the
reference path (re-exported from npbert/ops, no second copy; the fast path's twins, npbert.fast,
compute the same numbers), each a forward returning (out, cache) and a backward taking
(dout, cache), so that other people's kernels can be property-tested against them.

    linear_forward(x (..., in), W (out, in), b (out,))            -> y (..., out)
    linear_backward(dy, cache)                                     -> dx, {"weight": dW, "bias": db}
    embedding_forward(ids (B, T) ints, W (V, C))                   -> (B, T, C)
    embedding_backward(dout, cache, padding_idx=None)              -> dW (V, C)
    layer_norm_forward(x (..., C), gamma (C,), beta (C,), eps)     -> y (..., C)   biased variance, as torch
    layer_norm_backward(dy, cache)                                 -> dx, {"weight": dgamma, "bias": dbeta}
    softmax_forward(x (..., T)) / softmax_backward(dy, cache)      max-shifted, rows sum to 1
    dropout_forward(x, p, rng, training) / dropout_backward        inverted dropout; rng an np.random.Generator,
                                                                   or a DropoutKey (a model's keyed masks)
    gelu_forward, gelu_new_forward, relu_forward, tanh_forward, sigmoid_forward, silu_forward, ...
                                                                   and their *_backward(dy, cache)
    get_activation(name)                                           (forward, backward) for a hidden_act
    cross_entropy_forward(logits (N, K) or (B, T, K), labels, ignore_index=-100) / _backward
    mse_forward / mse_backward, bce_with_logits_forward / bce_with_logits_backward
    attention_forward(q (B, N, F, D), k, v (B, N, T, D), mask additive broadcastable to
                      (B, N, F, T), head_mask (N,), dropout_p, rng, training)
                                                                   -> context (B, N, F, D), cache["probs"]
    attention_backward(dcontext, cache, dprobs=None)               -> dq, dk, dv
    mean_pooling_forward(h (B, T, H), mask (B, T)) / _backward     mean over the attended tokens (Sentence-BERT)
    normalize_forward(e (B, H), eps=1e-12) / normalize_backward     e / max(||e||, eps), as F.normalize
    get_extended_attention_mask(mask (B, T) or (B, F, T) of 1/0, input_shape=None, dtype=float64,
                                is_decoder=False)                  -> additive (B, 1, 1 or F, T)
                                                                   softmax(q k^T / sqrt(D) + mask) v: the op
                                                                   BertSelfAttention runs between its
                                                                   projections

torch.nn.functional's names for what tutorials compute on a model's outputs (no backward):

    softmax(input, dim) / log_softmax(input, dim)                  along axis `dim`, as F.softmax(logits, dim=1)

Shapes and formulas: docs/ (one page per module); testing other implementations against these:
docs/testing_your_bert.md.

Which `functional` holds what: this module holds the ops, each with its hand-written backward
(and softmax / log_softmax on plain arrays); npbert.nn.functional holds torch's losses on a
model's outputs (cross_entropy, mse_loss, binary_cross_entropy_with_logits), whose result has a
`backward()` that runs the model's.
"""
import numpy as _np

from npbert.ops.activations import (gelu_backward, gelu_fast_backward, gelu_fast_forward, gelu_forward,
                                    gelu_new_backward, gelu_new_forward, gelu_pytorch_tanh_backward,
                                    gelu_pytorch_tanh_forward, get_activation, quick_gelu_backward,
                                    quick_gelu_forward, relu_backward, relu_forward, sigmoid_backward,
                                    sigmoid_forward, silu_backward, silu_forward, tanh_backward, tanh_forward)
from npbert.ops.attention import attention_backward, attention_forward
from npbert.ops.attention_mask import get_extended_attention_mask
from npbert.ops.dropout import DropoutKey, dropout_backward, dropout_forward
from npbert.ops.embedding import embedding_backward, embedding_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.ops.linear import linear_backward, linear_forward
from npbert.ops.losses import (bce_with_logits_backward, bce_with_logits_forward, cross_entropy_backward,
                               cross_entropy_forward, mse_backward, mse_forward)
from npbert.ops.pooling import mean_pooling_backward, mean_pooling_forward, normalize_backward, normalize_forward
from npbert.ops.softmax import log_softmax as _log_softmax
from npbert.ops.softmax import softmax_backward, softmax_forward


def softmax(input, dim):
    """torch.nn.functional.softmax(input, dim): softmax_forward along axis `dim`, the input's dtype kept."""
    x = _np.asarray(input)
    if not _np.issubdtype(x.dtype, _np.floating):
        raise TypeError(f"softmax needs a floating-point array, got dtype {x.dtype}")
    return _np.moveaxis(softmax_forward(_np.moveaxis(x, dim, -1))[0], -1, dim)


def log_softmax(input, dim):
    """torch.nn.functional.log_softmax(input, dim): npbert.ops.softmax's log_softmax along axis `dim`,
    x - max - log(sum(exp(x - max)))."""
    x = _np.asarray(input)
    if not _np.issubdtype(x.dtype, _np.floating):
        raise TypeError(f"log_softmax needs a floating-point array, got dtype {x.dtype}")
    return _np.moveaxis(_log_softmax(_np.moveaxis(x, dim, -1)), -1, dim)


__all__ = [n for n in dir() if n.endswith(("_forward", "_backward"))
           or n in ("get_activation", "DropoutKey", "get_extended_attention_mask", "softmax", "log_softmax")]
