"""Self-attention: BertSelfAttention, BertSelfOutput, BertAttention.

    B = batch, T = sequence length (keys), F = sequence length (queries; F = T here),
    H = hidden size, N = attention heads, D = H / N head size
"""
import numpy as np

from npbert.ops.attention import attention_backward, attention_forward
from npbert.ops.dropout import dropout_backward, dropout_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.ops.linear import linear_forward, linear_input_grad, linear_param_grads

from .module import Module


class BertSelfAttention(Module):
    """Scaled dot-product attention over N heads.

        Q, K, V = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv             (B, T, H) -> (B, N, T, D)
                  (computed as one GEMM with the three weights stacked)
        probs   = dropout(softmax(Q K^T / sqrt(D) + mask)) * head_mask  (B, N, F, T)
        context = probs V                                          (B, N, F, D) -> (B, F, H)
    """

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        H = self.config.hidden_size
        self.num_attention_heads = self.config.num_attention_heads                # N
        self.attention_head_size = H // self.num_attention_heads                  # D
        self.scaling = self.attention_head_size ** -0.5
        self.add_linear("query", H, H)
        self.add_linear("key", H, H)
        self.add_linear("value", H, H)

    def stacked_qkv(self):
        """[Wq; Wk; Wv] (3H, H) and [bq, bk, bv] (3H,): the three projections as one nn.Linear."""
        names = ("query", "key", "value")
        return (np.concatenate([self.p(f"{n}.weight") for n in names]),
                np.concatenate([self.p(f"{n}.bias") for n in names]))

    def split_heads(self, x):
        """(B, T, H) -> (B, N, T, D), a view."""
        B, T, _ = x.shape
        return x.reshape(B, T, self.num_attention_heads, self.attention_head_size).transpose(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, head_mask=None):
        """hidden_states: (B, T, H); attention_mask: additive, broadcastable to (B, N, F, T)
        (0 where attended, finfo.min where masked) or None; head_mask: (N,) or None.
        Returns (context (B, F, H), probs (B, N, F, T), cache).

        Between the projections runs npbert.ops.attention (npbert.functional.attention_forward):
        softmax(Q K^T / sqrt(D) + mask), dropout, head mask, times V."""
        cache = {}
        # Q, K and V are three nn.Linear layers (query, key, value); they read the same x, so
        # they run as one GEMM with the three weights stacked: [Wq; Wk; Wv] is (3H, H).
        H = self.config.hidden_size
        qkv_weight, qkv_bias = self.stacked_qkv()                                 # (3H, H), (3H,)
        qkv, _ = linear_forward(hidden_states, qkv_weight, qkv_bias)              # (B, T, 3H)
        cache["x"] = hidden_states      # the backward rebuilds the stacked weight rather than keep it
        q, k, v = qkv[..., :H], qkv[..., H:2 * H], qkv[..., 2 * H:]              # (B, T, H) views
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)   # (B, N, T, D) each
        B, N, T, D = q.shape
        context = np.empty((B, T, N * D), dtype=q.dtype)                          # (B, F, H)
        _, cache["attention"] = attention_forward(
            q, k, v, attention_mask, head_mask, self.config.attention_probs_dropout_prob,
            self.state.rng, self.training, out=self.split_heads(context),         # written as (B, N, F, D)
            scale=self.scaling)
        return context, cache["attention"]["probs"], cache

    def backward(self, dcontext, cache, dprobs=None):
        """dcontext: (B, F, H); dprobs: optional upstream gradient of the returned probs.
        Returns (dhidden_states (B, T, H), grads).

        Each cached array is dropped as soon as the last step that reads it has run (when the
        backward frees activations as it goes), so the peak stays low: the probs before dQ and
        dK are made, Q, K and V before the projection's GEMMs."""
        x = cache["x"]
        B, T, H = dcontext.shape
        dqkv = np.empty((B, T, 3 * H), dtype=dcontext.dtype)                      # [dQ, dK, dV] side by side
        dq, dk, dv = dqkv[..., :H], dqkv[..., H:2 * H], dqkv[..., 2 * H:]        # (B, T, H) views
        attention_backward(self.split_heads(dcontext), cache["attention"], dprobs,
                           out=(self.split_heads(dq), self.split_heads(dk), self.split_heads(dv)),
                           free=self.state.release_caches)
        self.release(cache)

        # in the forward: Q = x Wq^T + bq, K = x Wk^T + bk, V = x Wv^T + bv, one GEMM with the
        # weights stacked, so the backward is one GEMM each way too:
        #   [dWq; dWk; dWv] = [dQ, dK, dV]^T x          dx = dQ Wq + dK Wk + dV Wv = [dQ, dK, dV] [Wq; Wk; Wv]
        names = ("query", "key", "value")
        trainable = [n for n in names if self.trainable(n + ".weight") or self.trainable(n + ".bias")]
        grads = {}
        if len(trainable) == 3:
            g = linear_param_grads(dqkv, x)                                       # (3H, H), (3H,)
            for i, name in enumerate(names):
                grads[f"{self.prefix}{name}.weight"] = g["weight"][i * H:(i + 1) * H]   # (H, H) row blocks
                grads[f"{self.prefix}{name}.bias"] = g["bias"][i * H:(i + 1) * H]       # (H,)
        else:                                                                     # some of them frozen
            for name, d in zip(names, (dq, dk, dv)):
                if name in trainable:
                    grads.update(self.prefixed(name, linear_param_grads(d, x)))
        qkv_weight, _ = self.stacked_qkv()                                        # (3H, H)
        dx = linear_input_grad(dqkv, qkv_weight, x.shape)                         # (B, T, H)
        return dx, grads


class BertSelfOutput(Module):
    """out = LayerNorm(dropout(dense(hidden_states)) + input_tensor)     (B, T, H) -> (B, T, H)"""

    def __init__(self, state, prefix, in_features=None):
        super().__init__(state, prefix)
        H = self.config.hidden_size
        self.add_linear("dense", in_features or H, H)
        self.add_layer_norm("LayerNorm", H)

    def forward(self, hidden_states, input_tensor):
        cache = {}
        h, cache["dense"] = linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))
        h, cache["dropout"] = dropout_forward(h, self.config.hidden_dropout_prob, self.state.rng, self.training)
        h += input_tensor                       # in place: neither the dense nor the dropout cache holds h
        h, cache["ln"] = layer_norm_forward(h, self.p("LayerNorm.weight"), self.p("LayerNorm.bias"),
                                            self.config.layer_norm_eps)
        return h, cache

    def backward(self, dout, cache):
        """Returns (dhidden_states, dinput_tensor, grads): the residual sends dsum to both."""
        grads = {}
        dsum, g = layer_norm_backward(dout, cache["ln"])                           # (B, T, H)
        grads.update(self.prefixed("LayerNorm", g))
        dh = dropout_backward(dsum, cache["dropout"])
        x, weight, _ = cache["dense"]
        self.release(cache)
        if self.trainable("dense.weight") or self.trainable("dense.bias"):
            grads.update(self.prefixed("dense", linear_param_grads(dh, x)))
        x_shape = x.shape
        del x           # the dense input (in BertOutput the (B, T, I) GELU output) goes before dx is made
        dx = linear_input_grad(dh, weight, x_shape)
        return dx, dsum, grads


class BertAttention(Module):
    """BertSelfAttention followed by BertSelfOutput (with the residual from its input)."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.self = BertSelfAttention(state, prefix + "self.")
        self.output = BertSelfOutput(state, prefix + "output.")

    def forward(self, hidden_states, attention_mask=None, head_mask=None):
        """(B, T, H) -> ((B, T, H), probs (B, N, T, T), cache)."""
        context, probs, self_cache = self.self.forward(hidden_states, attention_mask, head_mask)
        out, output_cache = self.output.forward(context, hidden_states)
        return out, probs, (self_cache, output_cache)

    def backward(self, dout, cache, dprobs=None):
        self_cache, output_cache = cache
        dcontext, dresidual, grads = self.output.backward(dout, output_cache)
        dx, g = self.self.backward(dcontext, self_cache, dprobs)
        grads.update(g)
        dx += dresidual                                                           # the residual path
        return dx, grads
