"""The position-wise feed-forward block: BertIntermediate and BertOutput.

    B = batch, T = sequence length, H = hidden size, I = intermediate size
"""
from npbert.ops.activations import gelu_backward, get_activation
from npbert.ops.linear import linear_forward

from .attention import BertSelfOutput
from .module import Module


class BertIntermediate(Module):
    """out = act(dense(hidden_states))      (B, T, H) -> (B, T, I), act = config.hidden_act"""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.add_linear("dense", self.config.hidden_size, self.config.intermediate_size)
        self.act_forward, self.act_backward = get_activation(self.config.hidden_act)

    def forward(self, hidden_states):
        cache = {}
        h, cache["dense"] = linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))   # (B, T, I)
        out, cache["act"] = self.act_forward(h)                                                          # (B, T, I)
        if self.act_backward is gelu_backward:
            cache["out"] = out          # a reference (BertOutput's dense keeps it too): Phi = out / h
        return out, cache

    def backward(self, dout, cache, overwrite_dout=False):
        """overwrite_dout=True lets the activation's gradient reuse dout's memory (BertLayer,
        which owns dout, passes it): one (B, T, I) array less at the backward's peak.
        The exact GELU reads Phi(h) off its output (gelu_backward's y=): the output then stays
        alive until here, one (B, T, I) array more at that point, half the GELU backward's time."""
        out = dout if overwrite_dout else None
        if "out" in cache:
            dh = gelu_backward(dout, cache["act"], out=out, y=cache["out"])                 # (B, T, I)
        else:
            dh = self.act_backward(dout, cache["act"], out=out)                            # (B, T, I)
        dense_cache = cache["dense"]
        self.release(cache)                      # the activation's (B, T, I) input goes before the GEMMs
        return self.linear_backward("dense", dh, dense_cache)                     # (B, T, H), grads


class BertOutput(BertSelfOutput):
    """out = LayerNorm(dropout(dense(intermediate_output)) + attention_output)   (B, T, I) -> (B, T, H)

    The same computation as BertSelfOutput, with a dense layer from I instead of H features.
    """

    def __init__(self, state, prefix):
        super().__init__(state, prefix, in_features=state.config.intermediate_size)
