"""The position-wise feed-forward block: BertIntermediate and BertOutput.

    B = batch, T = sequence length, H = hidden size, I = intermediate size

The fast twins (BertIntermediate's float32 GELU with its derivative made in the forward;
BertOutput's in-place residual) are in npbert/modeling/fast.py.
"""
from .attention import BertSelfOutput
from .module import Module
from .leaf_modules import Linear, activation


class BertIntermediate(Module):
    """out = act(dense(hidden_states))      (B, T, H) -> (B, T, I), act = config.hidden_act"""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.dense = Linear(state, prefix + "dense.", self.config.hidden_size, self.config.intermediate_size)
        self.intermediate_act_fn = activation(state, prefix + "intermediate_act_fn.", self.config.hidden_act)

    def forward(self, hidden_states):
        h, dense_cache = self.dense.forward(hidden_states)                         # (B, T, I)
        out, act_cache = self.intermediate_act_fn.forward(h)                       # (B, T, I), ACT2FN[hidden_act]
        return out, (dense_cache, act_cache)

    def backward(self, dout, cache, overwrite_dout=False):
        """dout: (B, T, I).  Returns (dhidden_states (B, T, H), grads).  overwrite_dout=True: the
        caller no longer needs dout (the fast twin may write over it; this code does not)."""
        dense_cache, act_cache = cache
        dh, _ = self.intermediate_act_fn.backward(dout, act_cache)                 # (B, T, I)
        return self.dense.backward(dh, dense_cache)                                # (B, T, H), grads


class BertOutput(BertSelfOutput):
    """out = LayerNorm(dropout(dense(intermediate_output)) + attention_output)   (B, T, I) -> (B, T, H)

    The same computation as BertSelfOutput, with a dense layer from I instead of H features.
    """

    def __init__(self, state, prefix):
        super().__init__(state, prefix, in_features=state.config.intermediate_size)
