"""Self-attention: BertSelfAttention, BertSelfOutput, BertAttention.

    B = batch, T = sequence length (keys), F = sequence length (queries; F = T here),
    H = hidden size, N = attention heads, D = H / N head size

Their fast twins (Q, K, V as one stacked GEMM, the context written in place, activations freed
during the backward) are in npbert/modeling/fast_attention.py.

`record`: the forward and the backward of BertSelfAttention, BertAttention and BertLayer take an
optional dict and put their intermediates there (the forward: query, key, value, attention_scores,
attentions, context_layer; the backward: the gradients of the attention probabilities and of the
head-mask values), for `model(..., output_intermediates=True)` and
`model.backward(..., return_intermediate_grads=True)` (npbert/modeling/outputs.py).  None, the
default, keeps nothing.
"""
from npbert.ops.attention import head_mask_grad

from .module import Module
from .nn import Dropout, LayerNorm, Linear


class BertSelfAttention(Module):
    """Scaled dot-product attention over N heads.

        Q, K, V = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv               (B, T, H) -> (B, N, T, D)
        probs   = dropout(softmax(Q K^T / sqrt(D) + mask)) * head_mask  (B, N, F, T)
        context = probs V                                             (B, N, F, D) -> (B, F, H)
    """

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        H = self.config.hidden_size
        self.num_attention_heads = self.config.num_attention_heads                # N
        self.attention_head_size = H // self.num_attention_heads                  # D
        self.scaling = self.attention_head_size ** -0.5
        self.query = Linear(state, prefix + "query.", H, H)
        self.key = Linear(state, prefix + "key.", H, H)
        self.value = Linear(state, prefix + "value.", H, H)
        self.dropout = Dropout(state, prefix + "dropout.", self.config.attention_probs_dropout_prob)

    def split_heads(self, x):
        """(B, T, H) -> (B, N, T, D), a view."""
        B, T, _ = x.shape
        return x.reshape(B, T, self.num_attention_heads, self.attention_head_size).transpose(0, 2, 1, 3)

    @staticmethod
    def merge_heads(x):
        """(B, N, T, D) -> (B, T, H = N D)."""
        B, N, T, D = x.shape
        return x.transpose(0, 2, 1, 3).reshape(B, T, N * D)

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None):
        """hidden_states: (B, T, H); attention_mask: additive, broadcastable to (B, N, F, T)
        (0 where attended, finfo.min where masked) or None; head_mask: (N,) or None; record: an
        optional dict for the intermediates (see the module's docstring).
        Returns (context (B, F, H), probs (B, N, F, T), cache)."""
        ops = self.ops
        cache = {}
        query_layer, cache["query"] = ops.linear_forward(hidden_states, self.p("query.weight"), self.p("query.bias"))
        key_layer, cache["key"] = ops.linear_forward(hidden_states, self.p("key.weight"), self.p("key.bias"))
        value_layer, cache["value"] = ops.linear_forward(hidden_states, self.p("value.weight"), self.p("value.bias"))
        query_layer = self.split_heads(query_layer)                                # (B, N, F, D)
        key_layer = self.split_heads(key_layer)                                    # (B, N, T, D)
        value_layer = self.split_heads(value_layer)                                # (B, N, T, D)

        attention_scores = query_layer @ key_layer.transpose(0, 1, 3, 2) * self.scaling   # (B, N, F, T)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask                   # finfo.min: exp gives 0
        attention_probs, cache["softmax"] = ops.softmax_forward(attention_scores)    # (B, N, F, T)
        attention_probs, cache["dropout"] = ops.dropout_forward(
            attention_probs, self.config.attention_probs_dropout_prob, self.dropout_rng(), self.training)
        if head_mask is not None:
            attention_probs = attention_probs * head_mask[None, :, None, None]     # 0 switches a head off
        context_layer = attention_probs @ value_layer                              # (B, N, F, D)
        context_layer = self.merge_heads(context_layer)                            # (B, F, H)

        cache.update(query_layer=query_layer, key_layer=key_layer, value_layer=value_layer,
                     attention_probs=attention_probs, head_mask=head_mask)
        if record is not None:         # references to arrays the forward made, none changed later
            record.update(query=query_layer, key=key_layer, value=value_layer, attention_scores=attention_scores,
                          attentions=attention_probs, context_layer=context_layer)
        return context_layer, attention_probs, cache

    def backward(self, dcontext, cache, dprobs=None, record=None):
        """dcontext: (B, F, H); dprobs: optional upstream gradient of the returned probs; record: an
        optional dict that gets "attentions", the gradient of the probabilities as used (B, N, F, T),
        and "head_mask", that of each head's head-mask value (N,).
        Returns (dhidden_states (B, T, H), grads).  Each step undoes one forward line, bottom up."""
        ops = self.ops
        query_layer, key_layer, value_layer = cache["query_layer"], cache["key_layer"], cache["value_layer"]
        attention_probs, head_mask = cache["attention_probs"], cache["head_mask"]
        dcontext_layer = self.split_heads(dcontext)                                # (B, N, F, D)
        # in the forward: context_layer = attention_probs @ value_layer
        dattention_probs = dcontext_layer @ value_layer.transpose(0, 1, 3, 2)       # (B, N, F, T)
        dvalue_layer = attention_probs.transpose(0, 1, 3, 2) @ dcontext_layer       # (B, N, T, D)
        if dprobs is not None:
            dattention_probs = dattention_probs + dprobs                           # the probs were an output too
        if record is not None:         # (not changed below: each step makes a new array)
            record["attentions"] = dattention_probs
            # in the forward: attention_probs = dropout(softmax(scores)) * head_mask: d/d head_mask[h]
            record["head_mask"] = head_mask_grad(dattention_probs, cache["softmax"], cache["dropout"],
                                                 ops.dropout_backward)               # (N,)
        # in the forward: attention_probs = attention_probs * head_mask
        if head_mask is not None:
            dattention_probs = dattention_probs * head_mask[None, :, None, None]
        # in the forward: attention_probs = dropout(attention_probs)
        dattention_probs = ops.dropout_backward(dattention_probs, cache["dropout"])
        # in the forward: attention_probs = softmax(attention_scores)
        dattention_scores = ops.softmax_backward(dattention_probs, cache["softmax"])   # (B, N, F, T)
        # in the forward: attention_scores = query_layer @ key_layer^T * scaling + mask (a constant)
        dattention_scores = dattention_scores * self.scaling
        dquery_layer = dattention_scores @ key_layer                               # (B, N, F, D)
        dkey_layer = dattention_scores.transpose(0, 1, 3, 2) @ query_layer         # (B, N, T, D)

        # in the forward: query_layer = split_heads(x Wq^T + bq), and the same for key and value:
        # x fed all three projections, so its gradient is the sum of theirs.
        dx_q, grads = self.linear_backward("query", self.merge_heads(dquery_layer), cache["query"])
        dx_k, g = self.linear_backward("key", self.merge_heads(dkey_layer), cache["key"])
        grads.update(g)
        dx_v, g = self.linear_backward("value", self.merge_heads(dvalue_layer), cache["value"])
        grads.update(g)
        dx = dx_q + dx_k + dx_v                                                    # (B, T, H)
        return dx, grads


class BertSelfOutput(Module):
    """out = LayerNorm(dropout(dense(hidden_states)) + input_tensor)     (B, T, H) -> (B, T, H)"""

    def __init__(self, state, prefix, in_features=None):
        super().__init__(state, prefix)
        H = self.config.hidden_size
        self.dense = Linear(state, prefix + "dense.", in_features or H, H)
        self.LayerNorm = LayerNorm(state, prefix + "LayerNorm.", H, self.config.layer_norm_eps)
        self.dropout = Dropout(state, prefix + "dropout.", self.config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        ops = self.ops
        cache = {}
        hidden_states, cache["dense"] = ops.linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))
        hidden_states, cache["dropout"] = ops.dropout_forward(hidden_states, self.config.hidden_dropout_prob,
                                                            self.dropout_rng(), self.training)
        hidden_states, cache["ln"] = ops.layer_norm_forward(hidden_states + input_tensor, self.p("LayerNorm.weight"),
                                                          self.p("LayerNorm.bias"), self.config.layer_norm_eps)
        return hidden_states, cache

    def backward(self, dout, cache):
        """Returns (dhidden_states, dinput_tensor, grads).
        In the forward: out = LayerNorm(h + input_tensor): the sum sends dsum to both terms."""
        ops = self.ops
        dsum, g = ops.layer_norm_backward(dout, cache["ln"])                        # (B, T, H)
        grads = self.prefixed("LayerNorm", g)
        dh = ops.dropout_backward(dsum, cache["dropout"])
        dhidden_states, g = self.linear_backward("dense", dh, cache["dense"])
        grads.update(g)
        return dhidden_states, dsum, grads


class BertAttention(Module):
    """BertSelfAttention followed by BertSelfOutput (with the residual from its input)."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.self = state.module_class(BertSelfAttention)(state, prefix + "self.")
        self.output = state.module_class(BertSelfOutput)(state, prefix + "output.")

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None):
        """(B, T, H) -> ((B, T, H), probs (B, N, T, T), cache)."""
        context, probs, self_cache = self.self.forward(hidden_states, attention_mask, head_mask, record)
        attention_output, output_cache = self.output.forward(context, hidden_states)
        return attention_output, probs, (self_cache, output_cache)

    def backward(self, dout, cache, dprobs=None, record=None):
        self_cache, output_cache = cache
        dcontext, dresidual, grads = self.output.backward(dout, output_cache)
        dx, g = self.self.backward(dcontext, self_cache, dprobs, record)
        grads.update(g)
        dx += dresidual                                                           # the residual path
        return dx, grads
