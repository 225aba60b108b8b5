"""The fast path: twins of the reference ops (npbert/ops) that compute the same numbers with
threads, row blocks, fused passes and preallocated buffers (cs231n's fast_layers.py beside its
layers.py; llm.c's matmul_forward beside matmul_forward_naive).  Tested equal to the reference
in tests/fast/test_ops_fast_equals_reference.py: float64 to round-off (bit-equal where the
arithmetic is the same), float32 within a few ulp.

This namespace holds every name npbert.ops holds, so a module reads its ops from whichever path
is its model's (`ops = self.ops`, npbert/modeling/module.py): the fast twin where there is one, the
reference op itself where the reference is already as fast as it gets (linear, losses, ...).

    twin                                reference                      what is fast
    fast/layer_norm.py                  ops/layer_norm.py              row blocks on threads, out= buffers
    fast/softmax.py                     ops/softmax.py                 in place
    fast/attention.py                   ops/attention.py               per-row GEMMs on threads, one BLAS thread each, out=
    fast/tiled_attention.py             ops/attention.py               in tiles: no (B, N, F, T) array (long sequences)
    fast/gelu.py                        ops/activations.py (gelu)      float32: 17 fused passes on threads; with its derivative for a backward
    fast/embedding.py                   ops/embedding.py               the scatter-add as a one-hot GEMM
    fast/dropout.py                     ops/dropout.py                 keyed masks drawn on threads, threaded multiply
    fast/parallel.py                    (none)                         npbert's threads, OpenBLAS's thread count and spin

The module-level fast variants (Q/K/V as one stacked GEMM, the encoder's two halves side by
side, activations freed during the backward) are the fast twins of the module classes, in
npbert/modeling/fast.py.  Importing this package starts no thread and touches no native library:
that happens on the first parallel loop (npbert/fast/parallel.py).
"""
from npbert.ops import (ACT2FN, DropoutKey, bce_with_logits_backward, bce_with_logits_forward,  # noqa: F401
                        cross_entropy_backward, cross_entropy_forward, embedding_forward, gelu_fast_backward,
                        gelu_fast_forward, gelu_new_backward, gelu_new_forward, gelu_pytorch_tanh_backward,
                        gelu_pytorch_tanh_forward, linear_backward, linear_forward, linear_input_grad,
                        linear_param_grads, mean_pooling_backward, mean_pooling_forward, mse_backward,
                        mse_forward, normalize_backward, normalize_forward, quick_gelu_backward,
                        quick_gelu_forward, relu_backward, relu_forward, sigmoid_backward, sigmoid_forward,
                        silu_backward, silu_forward, swish_backward, swish_forward, tanh_backward, tanh_forward)
from npbert.fast.attention import attention_backward, attention_forward
from npbert.fast.dropout import dropout_backward, dropout_forward, keep_mask
from npbert.fast.embedding import embedding_backward
from npbert.fast.gelu import gelu_backward, gelu_forward, gelu_forward_with_grad, get_activation
from npbert.fast.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.fast.parallel import get_num_threads, set_num_threads
from npbert.fast.tiled_attention import tiled_attention_backward, tiled_attention_forward
from npbert.fast.softmax import softmax_backward, softmax_forward
