"""The reference ops: pure forward/backward function pairs with no model knowledge, each the
formula a reader expects in a few lines, a shape on every line.

    <op>_forward(inputs..., params...) -> (out, cache)
    <op>_backward(dout, cache)         -> dinput, or (dinput, {param name: dparam})

Every op computes in its input's dtype (float32 or float64) and never mutates its arguments.
This package's namespace holds every op by name; npbert.fast holds the fast path's twins under
the same names, so a module reads its ops as `ops = self.ops` and `ops.layer_norm_forward(...)`
(npbert/modeling/module.py).
"""
from npbert.ops.activations import (ACT2FN, erf, gelu_backward, gelu_fast_backward, gelu_fast_forward,
                                    gelu_forward, gelu_new_backward, gelu_new_forward,
                                    gelu_pytorch_tanh_backward, gelu_pytorch_tanh_forward, get_activation,
                                    quick_gelu_backward, quick_gelu_forward, relu_backward, relu_forward,
                                    sigmoid_backward, sigmoid_forward, silu_backward, silu_forward,
                                    swish_backward, swish_forward, tanh_backward, tanh_forward)
from npbert.ops.attention import attention_backward, attention_forward
from npbert.ops.dropout import DropoutKey, dropout_backward, dropout_forward, keep_mask
from npbert.ops.embedding import embedding_backward, embedding_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.ops.linear import linear_backward, linear_forward, linear_input_grad, linear_param_grads
from npbert.ops.losses import (bce_with_logits_backward, bce_with_logits_forward, cross_entropy_backward,
                               cross_entropy_forward, mse_backward, mse_forward)
from npbert.ops.pooling import mean_pooling_backward, mean_pooling_forward, normalize_backward, normalize_forward
from npbert.ops.softmax import softmax_backward, softmax_forward

# The names every path provides (npbert.fast has the same list): what a module may read from F.
OP_NAMES = sorted(n for n in dir() if n.endswith(("_forward", "_backward"))
                  or n in ("get_activation", "keep_mask", "linear_input_grad", "linear_param_grads"))
