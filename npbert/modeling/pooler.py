"""BertPooler: pooled = tanh(dense(hidden_states[:, 0]))      (B, T, H) -> (B, H)"""
import numpy as np

from .module import Module
from .leaf_modules import Linear, activation


class BertPooler(Module):
    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.dense = Linear(state, prefix + "dense.", self.config.hidden_size, self.config.hidden_size)
        self.activation = activation(state, prefix + "activation.", "tanh")      # transformers: nn.Tanh()

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]                                  # (B, H), the [CLS] position
        h, dense_cache = self.dense.forward(first_token_tensor)                   # (B, H)
        pooled, tanh_cache = self.activation.forward(h)                           # (B, H)
        return pooled, (dense_cache, tanh_cache, hidden_states.shape)

    def backward(self, dpooled, cache):
        """dpooled: (B, H).  Returns (dhidden_states (B, T, H), zero except at t = 0; grads)."""
        dense_cache, tanh_cache, shape = cache
        dh, _ = self.activation.backward(dpooled, tanh_cache)
        dfirst, grads = self.dense.backward(dh, dense_cache)                      # (B, H)
        dhidden_states = np.zeros(shape, dtype=dfirst.dtype)                      # (B, T, H)
        dhidden_states[:, 0] = dfirst
        return dhidden_states, grads
