"""Self-attention: BertSelfAttention, BertSelfOutput, BertAttention.

    B = batch, T = sequence length (keys), F = sequence length (queries; F = T here),
    H = hidden size, N = attention heads, D = H / N head size
"""
import numpy as np

from npbert.ops.dropout import dropout_backward, dropout_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.ops.linear import linear_forward, linear_input_grad, linear_param_grads
from npbert.ops.parallel import over_batch
from npbert.ops.softmax import softmax_backward, softmax_forward

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

        The per-head products run batch row by batch row with one BLAS thread each, and the
        scaling, masking and softmax between them on npbert's threads (`over_batch`): the same
        numbers as one batched matmul, faster than BLAS's own threads on such small GEMMs."""
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
        scale = q.dtype.type(self.scaling)

        scores = np.empty((B, N, T, T), dtype=q.dtype)                            # (B, N, F, T)

        def attention_scores_and_softmax(a, b):                                   # batch rows [a, b)
            s = np.matmul(q[a:b], k[a:b].transpose(0, 1, 3, 2), out=scores[a:b])  # Q K^T
            s *= scale                                                            # / sqrt(D)
            if attention_mask is not None:
                s += attention_mask[a:b]
            softmax_forward(s, out=s)                                             # in place
        over_batch(attention_scores_and_softmax, B)
        probs = cache["softmax"] = scores                                         # softmax's cache is its output
        probs, cache["dropout"] = dropout_forward(probs, self.config.attention_probs_dropout_prob,
                                                  self.state.rng, self.training)
        if head_mask is not None:
            probs = probs * head_mask[None, :, None, None]                        # (B, N, F, T)

        context = np.empty((B, T, N * D), dtype=q.dtype)                          # (B, F, H)
        context_heads = self.split_heads(context)                                 # (B, N, F, D), a view

        def weighted_values(a, b):
            np.matmul(probs[a:b], v[a:b], out=context_heads[a:b])                 # probs V
        over_batch(weighted_values, B)
        cache.update(q=q, k=k, v=v, probs=probs, head_mask=head_mask)
        return context, probs, cache

    def backward(self, dcontext, cache, dprobs=None):
        """dcontext: (B, F, H); dprobs: optional upstream gradient of the returned probs.
        Returns (dhidden_states (B, T, H), grads).

        Each cached array is dropped as soon as the last step that reads it has run (when the
        backward frees activations as it goes), so the peak stays low: the probs before dQ and
        dK are made, Q, K and V before the projection's GEMMs."""
        q, k, v, probs = cache["q"], cache["k"], cache["v"], cache["probs"]
        B, N, T, D = q.shape
        scale = q.dtype.type(self.scaling)
        dctx = self.split_heads(dcontext)                                         # (B, N, F, D)
        dprobs_total = np.empty_like(probs)                                       # (B, N, F, T)
        dq, dk, dv = (np.empty_like(dcontext) for _ in range(3))                  # (B, T, H) each
        dq_heads, dk_heads, dv_heads = self.split_heads(dq), self.split_heads(dk), self.split_heads(dv)

        def through_weighted_values(a, b):
            # in the forward: context = probs @ v
            np.matmul(dctx[a:b], v[a:b].transpose(0, 1, 3, 2), out=dprobs_total[a:b])
            np.matmul(probs[a:b].transpose(0, 1, 3, 2), dctx[a:b], out=dv_heads[a:b])
        over_batch(through_weighted_values, B)
        if dprobs is not None:
            dprobs_total += dprobs
        # in the forward: probs = dropout(softmax(scores)) * head_mask
        if cache["head_mask"] is not None:
            dprobs_total *= cache["head_mask"][None, :, None, None]
        dprobs_total = dropout_backward(dprobs_total, cache["dropout"])
        softmax_out = cache["softmax"]

        def through_softmax(a, b):
            softmax_backward(dprobs_total[a:b], softmax_out[a:b], out=dprobs_total[a:b])
            # in the forward: scores = q @ k^T * scaling  (+ a constant mask)
            dprobs_total[a:b] *= scale
        over_batch(through_softmax, B)
        dscores = dprobs_total                                                    # (B, N, F, T)
        del dprobs_total, probs, softmax_out
        x = cache["x"]
        self.release(cache)                        # from here on only Q, K (below) and x are read

        def through_scores(a, b):
            np.matmul(dscores[a:b], k[a:b], out=dq_heads[a:b])                    # (b-a, N, F, D)
            np.matmul(dscores[a:b].transpose(0, 1, 3, 2), q[a:b], out=dk_heads[a:b])   # (b-a, N, T, D)
        over_batch(through_scores, B)
        del dscores, q, k, v

        # in the forward: Q = x Wq^T + bq, K = x Wk^T + bk, V = x Wv^T + bv (one stacked GEMM);
        # x fed all three, so dx = dQ Wq + dK Wk + dV Wv.
        grads = {}
        for name, d in (("query", dq), ("key", dk), ("value", dv)):
            if self.trainable(name + ".weight") or self.trainable(name + ".bias"):
                grads.update(self.prefixed(name, linear_param_grads(d, x)))       # (H, H), (H,)
        dx = linear_input_grad(dq, self.p("query.weight"), x.shape)               # (B, T, H)
        dx += linear_input_grad(dk, self.p("key.weight"), x.shape)
        dx += linear_input_grad(dv, self.p("value.weight"), x.shape)
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
