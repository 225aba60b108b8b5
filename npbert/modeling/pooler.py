"""BertPooler: pooled = tanh(dense(hidden_states[:, 0]))      (B, T, H) -> (B, H)"""
import numpy as np

from .module import Module
from .nn import Linear, activation


class BertPooler(Module):
    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.dense = Linear(state, prefix + "dense.", self.config.hidden_size, self.config.hidden_size)
        self.activation = activation(state, prefix + "activation.", "tanh")      # transformers: nn.Tanh()

    def forward(self, hidden_states):
        ops = self.ops
        first_token_tensor = hidden_states[:, 0]                                  # (B, H), the [CLS] position
        h, dense_cache = ops.linear_forward(first_token_tensor, self.p("dense.weight"), self.p("dense.bias"))
        pooled, tanh_cache = ops.tanh_forward(h)                                    # (B, H)
        return pooled, (dense_cache, tanh_cache, hidden_states.shape)

    def backward(self, dpooled, cache):
        """dpooled: (B, H).  Returns (dhidden_states (B, T, H), zero except at t = 0; grads)."""
        ops = self.ops
        dense_cache, tanh_cache, shape = cache
        dh = ops.tanh_backward(dpooled, tanh_cache)
        dfirst, grads = self.linear_backward("dense", dh, dense_cache)            # (B, H)
        dhidden_states = np.zeros(shape, dtype=dfirst.dtype)                      # (B, T, H)
        dhidden_states[:, 0] = dfirst
        return dhidden_states, grads
