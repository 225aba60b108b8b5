"""The fast twins of the module classes: the fast path computes these modules' formulas with
other arithmetic, or keeps less memory than their reference code (transformers keeps
BertSdpaSelfAttention beside BertSelfAttention the same way).  Each is a subclass with its
reference class's signature and numbers, tested equal (tests/fast/test_models_fast_equals_reference.py);
every other module computes its reference code on the fast path too, with the fast ops
(`self.ops`).  The attention block's twins are in npbert/modeling/fast_attention.py:

    FastBertSelfAttention   Q, K, V as one GEMM with the three weights stacked (the parameters'
                            own memory: share_qkv_memory); the context written straight into a
                            (B, F, H) array; dQ, dK, dV side by side in one (B, T, 3H) array, so
                            the backward is one GEMM each way too; attention in tiles from
                            `attention_tiles_from` tokens on when no one reads the probabilities
    FastBertSelfOutput      the residual added in place, LayerNorm written over its input, the
    (FastBertOutput)        dense input (BertOutput's (B, T, I) GELU output) freed before dx is
                            made: one (B, T, I) array less at the backward's peak
    FastBertIntermediate    float32 GELU: its derivative made in the forward (kept instead of
                            the pre-activation), the backward one multiplication in the
                            memory of its upstream gradient
    (all)                   each cache emptied as soon as the backward has read it (as torch
                            frees saved tensors node by node), so a training step's peak is low

The encoder's two batch halves side by side are a helper over BertEncoder's own loop
(npbert/modeling/halves.py), not a twin.  A model built on the fast path is made of the twins
(`state.module_class(BertSelfAttention)`, npbert/modeling/module.py); model.set_path switches
it.  Measured speed: docs/performance.md.
"""
import numpy as np

import npbert.fast as fast

from .attention import BertSelfAttention, BertSelfOutput
from .fast_attention import FastBertSelfAttention, FastBertSelfOutput, _release
from .feed_forward import BertIntermediate, BertOutput
from .module import FAST_TWINS


class FastBertOutput(FastBertSelfOutput, BertOutput):
    """BertOutput's numbers, FastBertSelfOutput's code (BertOutput is BertSelfOutput from I features)."""


class FastBertIntermediate(BertIntermediate):
    """BertIntermediate's numbers: act(dense(hidden_states)).  The exact GELU in float32 with a
    backward to come makes its derivative in the forward, from the pre-activation while it is at
    hand, and keeps that instead of the pre-activation: the backward is then one multiplication,
    in place of 11 passes.  Any other activation or dtype is the reference code (super())."""

    def _derivative_in_forward(self, dtype):
        return (self.config.hidden_act in ("gelu", "gelu_python") and dtype == np.float32
                and self.state.call.keep_caches)

    def forward(self, hidden_states):
        if not self._derivative_in_forward(hidden_states.dtype):
            return super().forward(hidden_states)
        cache = {}
        h, cache["dense"] = fast.linear_forward(hidden_states, self.p("dense.weight"),
                                                self.p("dense.bias"))                           # (B, T, I)
        out, cache["dact"] = fast.gelu_forward_with_grad(h, overwrite_x=True)   # (B, T, I) each: d out / d h
        return out, cache                                                       # made now; out in h's memory

    def backward(self, dout, cache, overwrite_dout=False):
        """overwrite_dout=True (BertLayer, which owns dout, passes it) lets the activation's
        gradient reuse dout's memory: one (B, T, I) array less at the backward's peak."""
        if not isinstance(cache, dict):                   # the reference code's forward
            return super().backward(dout, cache, overwrite_dout)
        dh = np.multiply(dout, cache["dact"], out=dout if overwrite_dout else None)                      # (B, T, I)
        dense_cache = cache["dense"]
        _release(self, cache)                    # the activation's (B, T, I) cache goes before the GEMMs
        return self.linear_backward("dense", dh, dense_cache)                     # (B, T, H), grads


# reference class -> fast twin: what ModelState.module_class builds on the fast path
FAST_TWINS.update({BertSelfAttention: FastBertSelfAttention, BertSelfOutput: FastBertSelfOutput,
                   BertOutput: FastBertOutput, BertIntermediate: FastBertIntermediate})
