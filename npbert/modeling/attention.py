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
import numpy as np

from .module import Module
from .leaf_modules import Dropout, LayerNorm, Linear


class BertSelfAttention(Module):
    """Scaled dot-product attention over N heads.

        Q, K, V = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv               (B, T, H) -> (B, N, T, D)
        probs   = dropout(softmax(Q K^T / sqrt(D) + mask)) * head_mask  (B, N, F, T)
        context = probs V                                             (B, N, F, D) -> (B, F, H)
    """

    attention_tiles_from = None     # BertEncoder.attention_tiles_from, read by the fast twin only

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

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None, output_attentions=True,
                query_rows=None):
        """hidden_states: (B, T, H); attention_mask: additive, broadcastable to (B, N, F, T)
        (0 where attended, finfo.min where masked) or None; head_mask: (N,) or None; record: an
        optional dict for the intermediates (see the module's docstring); output_attentions:
        whether the caller reads the probabilities of every query row (False also lets the fast
        twin run long sequences in tiles, which keep none); query_rows = (a, b): the context of
        rows [a, b) only, F = b - a (the encoder's last layer when the head reads the [CLS] row
        alone: the queries of those rows, or with output_attentions every row's attention),
        else F = T.  Returns (context (B, F, H), probs (B, N, F or T, T), cache)."""
        rows_only = query_rows is not None and not output_attentions              # Q of rows [a, b) alone
        x_query = hidden_states[:, query_rows[0]:query_rows[1]] if rows_only else hidden_states
        mixed_query_layer, query_cache = self.query.forward(x_query)               # (B, F, H)
        mixed_key_layer, key_cache = self.key.forward(hidden_states)               # (B, T, H)
        mixed_value_layer, value_cache = self.value.forward(hidden_states)         # (B, T, H)
        query_layer = self.split_heads(mixed_query_layer)                          # (B, N, F, D)
        key_layer = self.split_heads(mixed_key_layer)                              # (B, N, T, D)
        value_layer = self.split_heads(mixed_value_layer)                          # (B, N, T, D)
        attention_mask = query_rows_of_mask(attention_mask, query_rows if rows_only else None)
        # probs = dropout(softmax(Q K^T * scaling + mask)) * head_mask;  context = probs V
        context, attention_cache = self.ops.attention_forward(
            query_layer, key_layer, value_layer, attention_mask, head_mask,
            self.config.attention_probs_dropout_prob, self.dropout_rng(), self.training, scale=self.scaling,
            record=record)                                                         # (B, N, F, D)
        context_layer = self.merge_heads(context)                                  # (B, F, H)
        attention_probs = attention_cache["probs"]                                 # (B, N, F, T), as used
        if record is not None:         # references to arrays the forward made, none changed later
            record.update(query=query_layer, key=key_layer, value=value_layer, attentions=attention_probs,
                          context_layer=context_layer)
        if query_rows is not None and not rows_only:                               # every query ran
            context_layer = context_layer[:, query_rows[0]:query_rows[1]]          # (B, b - a, H)
        cache = {"query": query_cache, "key": key_cache, "value": value_cache, "attention": attention_cache,
                 "query_rows": query_rows if rows_only else None,
                 "context_rows": query_rows if not rows_only else None}
        return context_layer, attention_probs, cache

    def backward(self, dcontext, cache, dprobs=None, record=None):
        """dcontext: (B, F, H); dprobs: optional upstream gradient of the returned probs; record: an
        optional dict that gets "attentions", the gradient of the probabilities as used (B, N, F, T),
        and "head_mask", that of each head's head-mask value (N,).
        Returns (dhidden_states (B, T, H), grads).  Each step undoes one forward line, bottom up."""
        if cache["context_rows"] is not None:                   # the other query rows' context had no use
            dcontext = context_grad_of_every_row(dcontext, cache["context_rows"], cache["value"][0].shape[1])
        # in the forward: context = attention(Q, K, V)
        dquery_layer, dkey_layer, dvalue_layer = self.ops.attention_backward(
            self.split_heads(dcontext), cache["attention"], dprobs, record)        # (B, N, F|T, D) each
        # in the forward: query_layer = split_heads(query(x)), and the same for key and value:
        # x fed all three projections, so its gradient is the sum of theirs.
        dx_q, grads = self.query.backward(self.merge_heads(dquery_layer), cache["query"])   # (B, F, H)
        dx_k, g = self.key.backward(self.merge_heads(dkey_layer), cache["key"])
        grads.update(g)
        dx_v, g = self.value.backward(self.merge_heads(dvalue_layer), cache["value"])
        grads.update(g)
        rows = cache["query_rows"]
        if rows is None:
            dx = dx_q + dx_k + dx_v                                                # (B, T, H)
        else:                                                                      # the queries of rows [a, b)
            dx = dx_k + dx_v
            dx[:, rows[0]:rows[1]] += dx_q
            probs_grad_of_every_row(record, rows, dx.shape[1])
        return dx, grads


def context_grad_of_every_row(dcontext, rows, T):
    """The gradient of rows [a, b) of the context (B, b - a, H) -> that of every row (B, T, H),
    0 in the others."""
    full = np.zeros((dcontext.shape[0], T, dcontext.shape[2]), dtype=dcontext.dtype)
    full[:, rows[0]:rows[1]] = dcontext
    return full


def probs_grad_of_every_row(record, query_rows, T):
    """A backward's record of the probabilities' gradient (B, N, b - a, T) for query rows [a, b)
    -> (B, N, T, T), 0 in the other rows (the attention the caller reads is every row's)."""
    if record is not None and "attentions" in record:
        rows_grad = record["attentions"]
        full = np.zeros(rows_grad.shape[:2] + (T, T), dtype=rows_grad.dtype)
        full[:, :, query_rows[0]:query_rows[1]] = rows_grad
        record["attentions"] = full                                                # (B, N, T, T)


def query_rows_of_mask(attention_mask, query_rows):
    """The additive mask's rows for queries [a, b): a decoder's (B, 1, T, T) sliced on its query
    axis; a mask that broadcasts over the queries (B, 1, 1, T) stays whole."""
    if query_rows is None or attention_mask is None or np.ndim(attention_mask) < 4 or attention_mask.shape[2] == 1:
        return attention_mask
    return attention_mask[:, :, query_rows[0]:query_rows[1]]


class BertSelfOutput(Module):
    """out = LayerNorm(dropout(dense(hidden_states)) + input_tensor)     (B, T, H) -> (B, T, H)"""

    def __init__(self, state, prefix, in_features=None):
        super().__init__(state, prefix)
        H = self.config.hidden_size
        self.dense = Linear(state, prefix + "dense.", in_features or H, H)
        self.LayerNorm = LayerNorm(state, prefix + "LayerNorm.", H, self.config.layer_norm_eps)
        self.dropout = Dropout(state, prefix + "dropout.", self.config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        h, dense_cache = self.dense.forward(hidden_states)                         # (B, T, H)
        h, dropout_cache = self.dropout.forward(h)
        out, ln_cache = self.LayerNorm.forward(h + input_tensor)                   # the residual, then LayerNorm
        return out, {"dense": dense_cache, "dropout": dropout_cache, "ln": ln_cache}

    def backward(self, dout, cache):
        """Returns (dhidden_states, dinput_tensor, grads).
        In the forward: out = LayerNorm(h + input_tensor): the sum sends dsum to both terms."""
        dsum, grads = self.LayerNorm.backward(dout, cache["ln"])                  # (B, T, H)
        dh, _ = self.dropout.backward(dsum, cache["dropout"])
        dhidden_states, g = self.dense.backward(dh, cache["dense"])
        grads.update(g)
        return dhidden_states, dsum, grads


class BertAttention(Module):
    """BertSelfAttention followed by BertSelfOutput (with the residual from its input)."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.self = state.module_class(BertSelfAttention)(state, prefix + "self.")
        self.output = state.module_class(BertSelfOutput)(state, prefix + "output.")

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None, output_attentions=True,
                query_rows=None):
        """(B, T, H) -> ((B, F, H), probs (B, N, F, T), cache); query_rows = (a, b): the output of
        rows [a, b) alone, F = b - a (BertSelfAttention.forward), else F = T."""
        context, probs, self_cache = self.self.forward(hidden_states, attention_mask, head_mask, record,
                                                       output_attentions, query_rows)   # (B, F, H)
        residual = hidden_states if query_rows is None else hidden_states[:, query_rows[0]:query_rows[1]]
        attention_output, output_cache = self.output.forward(context, residual)
        return attention_output, probs, (self_cache, output_cache, query_rows)

    def backward(self, dout, cache, dprobs=None, record=None):
        self_cache, output_cache, query_rows = cache
        dcontext, dresidual, grads = self.output.backward(dout, output_cache)
        dx, g = self.self.backward(dcontext, self_cache, dprobs, record)          # (B, T, H)
        grads.update(g)
        if query_rows is None:
            dx += dresidual                                                       # the residual path
        else:
            dx[:, query_rows[0]:query_rows[1]] += dresidual                       # the residual, rows [a, b)
        return dx, grads
