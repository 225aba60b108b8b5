"""The fast twins of the attention block (npbert/modeling/attention.py): Q, K, V as one GEMM with
the three weights stacked, the parameters stored so that the stacked weight is their own memory,
attention in tiles for long sequences, and the self-output's residual in place.  What each
computes is its reference class's number, tested equal (tests/fast/test_models_fast_equals_reference.py); the module docstring of
npbert/modeling/fast.py lists every twin.

    B = batch, T = tokens, R = rows computed, H = hidden size, N = heads, D = H / N
"""
import numpy as np

import npbert.fast as fast
from npbert.fast.tiled_attention import tiled_attention_backward, tiled_attention_forward
from npbert.ops.linear import linear_input_grad, linear_param_grads

from .attention import (BertSelfAttention, BertSelfOutput, context_grad_of_every_row, probs_grad_of_every_row,
                        query_rows_of_mask)


def share_qkv_memory(state):
    """Store every layer's query, key and value weights (and biases) as the consecutive blocks of
    one (3H, H) array ((3H,)): FastBertSelfAttention.stacked_qkv then takes that array as it is
    instead of concatenating the three on each call.  Called where a model makes its parameters
    (post_init, from_pretrained), before anything holds them; a parameter replaced later by
    another array is concatenated again (the same numbers)."""
    for name in list(state.params):
        if not name.endswith("attention.self.query.weight"):
            continue
        prefix = name[:-len("query.weight")]
        for kind in ("weight", "bias"):
            names = [f"{prefix}{p}.{kind}" for p in ("query", "key", "value")]
            arrays = [state.arrays.get(n) for n in names]
            if any(a is None for a in arrays) or len({(a.shape, a.dtype) for a in arrays}) != 1:
                continue
            stacked = np.concatenate(arrays)                                     # (3H, H) or (3H,)
            rows = arrays[0].shape[0]
            for i, n in enumerate(names):
                state.params[n] = stacked[i * rows:(i + 1) * rows]


def _stacked(arrays):
    """The arrays joined along axis 0: their common buffer when they are its consecutive blocks
    (share_qkv_memory), else a new array."""
    base = arrays[0].base
    if (isinstance(base, np.ndarray) and base.flags.c_contiguous and base.dtype == arrays[0].dtype
            and base.shape == (sum(a.shape[0] for a in arrays),) + arrays[0].shape[1:]):
        offset = 0
        for a in arrays:
            if a.base is not base or not a.flags.c_contiguous or a.ctypes.data != base.ctypes.data + offset:
                break
            offset += a.nbytes
        else:
            return base
    return np.concatenate(arrays)


def _release(module, cache):
    """During a backward that frees activations as it goes (not retain_graph), empty the cache
    dict so its arrays are freed now, not when the whole layer is done."""
    if module.state.call.release_caches:
        cache.clear()


class FastBertSelfAttention(BertSelfAttention):
    """BertSelfAttention.forward's numbers: Q, K, V = x [Wq; Wk; Wv]^T + [bq, bk, bv] in one GEMM,
    then npbert/fast/attention.py (softmax(Q K^T / sqrt(D) + mask), dropout, head mask, times V),
    or, for a long sequence whose probabilities no one reads, npbert/fast/tiled_attention.py (the
    same formula in tiles, no (B, N, F, T) array: the returned probs are None)."""

    def stacked_qkv(self):
        """[Wq; Wk; Wv] (3H, H) and [bq, bk, bv] (3H,): the three projections as one nn.Linear
        (the parameters' own memory when they are its blocks: share_qkv_memory)."""
        names = ("query", "key", "value")
        return (_stacked([self.p(f"{n}.weight") for n in names]),
                _stacked([self.p(f"{n}.bias") for n in names]))

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None, output_attentions=True,
                query_rows=None):
        """BertSelfAttention.forward's arguments and numbers.  When no one reads the probabilities
        (output_attentions=False, no record, not npbert.interpret's attention_probs_read), a
        sequence of at least `attention_tiles_from` tokens runs in tiles (no (B, N, F, T) array:
        the returned probs are None)."""
        if query_rows is not None and not output_attentions:
            return self._forward_rows(hidden_states, attention_mask, head_mask, record, output_attentions,
                                      query_rows)
        H = self.config.hidden_size
        T = hidden_states.shape[1]
        tiles = (not output_attentions and record is None and not self.state.call.attention_probs_read
                 and self.attention_tiles_from is not None and T >= self.attention_tiles_from)
        qkv_weight, qkv_bias = self.stacked_qkv()                                 # (3H, H), (3H,)
        qkv, _ = fast.linear_forward(hidden_states, qkv_weight, qkv_bias)         # (B, T, 3H)
        q, k, v = qkv[..., :H], qkv[..., H:2 * H], qkv[..., 2 * H:]              # (B, T, H) views
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)   # (B, N, T, D) each
        B, N, T, D = q.shape
        context = np.empty((B, T, N * D), dtype=q.dtype)                          # (B, F, H)
        attention = tiled_attention_forward if tiles else fast.attention_forward
        _, attention_cache = attention(
            q, k, v, attention_mask, head_mask, self.config.attention_probs_dropout_prob,
            self.dropout_rng(), self.training, scale=self.scaling,
            out=self.split_heads(context), **({} if tiles else {"record": record}))   # written as (B, N, F, D)
        # the backward rebuilds the stacked weight; the record's scores come from attention_forward
        cache = {"x": hidden_states, "attention": attention_cache, "tiles": tiles}
        probs = None if tiles else attention_cache["probs"]                       # (B, N, F, T)
        if record is not None:
            record.update(query=q, key=k, value=v, attentions=probs, context_layer=context)
        if query_rows is not None:                    # every query ran (its probabilities are read)
            context = context[:, query_rows[0]:query_rows[1]]                     # (B, b - a, H)
            cache["context_rows"] = query_rows
        return context, probs, cache

    def _forward_rows(self, hidden_states, attention_mask, head_mask, record, output_attentions, rows):
        """The context of query rows [a, b) only (B, b - a, H): K and V of every row, Q of those
        rows as one GEMM each.  (A record takes the reference code: it keeps Q, K, V apart.)"""
        if record is not None:
            return super().forward(hidden_states, attention_mask, head_mask, record, output_attentions, rows)
        H = self.config.hidden_size
        a, b = rows
        qkv_weight, qkv_bias = self.stacked_qkv()                                 # (3H, H), (3H,)
        kv, _ = fast.linear_forward(hidden_states, qkv_weight[H:], qkv_bias[H:])     # (B, T, 2H)
        q, _ = fast.linear_forward(hidden_states[:, a:b], qkv_weight[:H], qkv_bias[:H])   # (B, b - a, H)
        q, k, v = self.split_heads(q), self.split_heads(kv[..., :H]), self.split_heads(kv[..., H:])
        B, N, R, D = q.shape
        attention_mask = query_rows_of_mask(attention_mask, rows)                 # a decoder's (B, 1, R, T)
        context = np.empty((B, R, N * D), dtype=q.dtype)                          # (B, b - a, H)
        _, attention_cache = fast.attention_forward(
            q, k, v, attention_mask, head_mask, self.config.attention_probs_dropout_prob,
            self.dropout_rng(), self.training, scale=self.scaling, out=self.split_heads(context))
        return context, attention_cache["probs"], {"x": hidden_states, "attention": attention_cache, "rows": rows}

    def backward(self, dcontext, cache, dprobs=None, record=None):
        """Each cached array is dropped as soon as the last step that reads it has run (when the
        backward frees activations as it goes): the probs before dQ and dK are made, Q, K and V
        before the projection's GEMMs."""
        if "query" in cache:                          # the reference code ran (_forward_rows with a record)
            return super().backward(dcontext, cache, dprobs, record)
        if "rows" in cache:
            return self._backward_rows(dcontext, cache, dprobs, record)
        x = cache["x"]
        if "context_rows" in cache:                   # the other query rows' context had no use
            dcontext = context_grad_of_every_row(dcontext, cache["context_rows"], x.shape[1])
        B, T, H = dcontext.shape
        dqkv = np.empty((B, T, 3 * H), dtype=dcontext.dtype)                      # [dQ, dK, dV] side by side
        dq, dk, dv = dqkv[..., :H], dqkv[..., H:2 * H], dqkv[..., 2 * H:]        # (B, T, H) views
        out = (self.split_heads(dq), self.split_heads(dk), self.split_heads(dv))
        if cache["tiles"]:
            if dprobs is not None or record is not None:
                raise ValueError("this forward ran its attention in tiles (sequences of at least "
                                 "model.bert.encoder.attention_tiles_from tokens), which keeps no probabilities: their "
                                 "gradients cannot be asked for.  Run the forward with output_attentions=True, or "
                                 "inside `with model.state.call.setting(attention_probs_read=True):` "
                                 "(docs/long_sequences.md)")
            tiled_attention_backward(self.split_heads(dcontext), cache["attention"], out=out)
        else:
            fast.attention_backward(self.split_heads(dcontext), cache["attention"], dprobs, out=out,
                                    free=self.state.call.release_caches, record=record)
        _release(self, cache)
        # [dWq; dWk; dWv] = [dQ, dK, dV]^T x          dx = [dQ, dK, dV] [Wq; Wk; Wv] = dQ Wq + dK Wk + dV Wv
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

    def _backward_rows(self, dcontext, cache, dprobs, record):
        """backward of _forward_rows: dQ of rows [a, b), dK and dV of every row; dx (B, T, H)."""
        x, (a, b) = cache["x"], cache["rows"]
        B, R, H = dcontext.shape
        T = x.shape[1]
        dq = np.empty((B, R, H), dtype=dcontext.dtype)
        dkv = np.empty((B, T, 2 * H), dtype=dcontext.dtype)                       # [dK, dV] side by side
        fast.attention_backward(self.split_heads(dcontext), cache["attention"], dprobs,
                             out=(self.split_heads(dq), self.split_heads(dkv[..., :H]),
                                  self.split_heads(dkv[..., H:])),
                             free=self.state.call.release_caches, record=record)
        probs_grad_of_every_row(record, (a, b), T)                   # the other query rows' gradient is 0
        _release(self, cache)
        grads = {}
        xr = x[:, a:b]
        names = ("query", "key", "value")
        trainable = [n for n in names if self.trainable(n + ".weight") or self.trainable(n + ".bias")]
        if len(trainable) == 3:                                       # dWq from rows [a, b); [dWk; dWv] as one
            grads.update(self.prefixed("query", linear_param_grads(dq, xr)))
            g = linear_param_grads(dkv, x)                                        # (2H, H), (2H,)
            for i, name in enumerate(names[1:]):
                grads[f"{self.prefix}{name}.weight"] = g["weight"][i * H:(i + 1) * H]
                grads[f"{self.prefix}{name}.bias"] = g["bias"][i * H:(i + 1) * H]
        else:                                                         # some of them frozen
            for name, d, xin in (("query", dq, xr), ("key", dkv[..., :H], x), ("value", dkv[..., H:], x)):
                if name in trainable:
                    grads.update(self.prefixed(name, linear_param_grads(d, xin)))
        qkv_weight, _ = self.stacked_qkv()                                        # (3H, H)
        dx = linear_input_grad(dkv, qkv_weight[H:], x.shape)                      # (B, T, H)
        dx[:, a:b] += linear_input_grad(dq, qkv_weight[:H], xr.shape)             # (B, b - a, H)
        return dx, grads


class FastBertSelfOutput(BertSelfOutput):
    """BertSelfOutput's numbers: LayerNorm(dropout(dense(hidden_states)) + input_tensor)."""

    def forward(self, hidden_states, input_tensor):
        cache = {}
        h, cache["dense"] = fast.linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))
        h, cache["dropout"] = fast.dropout_forward(h, self.config.hidden_dropout_prob,
                                                   self.dropout_rng(), self.training)
        h += input_tensor                       # in place: neither the dense nor the dropout cache holds h
        h, cache["ln"] = fast.layer_norm_forward(h, self.p("LayerNorm.weight"), self.p("LayerNorm.bias"),
                                              self.config.layer_norm_eps, overwrite_x=True)   # xhat in h
        return h, cache

    def backward(self, dout, cache):
        ln_grads = self.trainable("LayerNorm.weight") or self.trainable("LayerNorm.bias")
        dsum, g = fast.layer_norm_backward(dout, cache["ln"], param_grads=ln_grads)  # (B, T, H)
        grads = self.prefixed("LayerNorm", g)
        dh = fast.dropout_backward(dsum, cache["dropout"])
        x, weight, _ = cache["dense"]
        _release(self, cache)
        if self.trainable("dense.weight") or self.trainable("dense.bias"):
            grads.update(self.prefixed("dense", linear_param_grads(dh, x)))
        x_shape = x.shape
        del x           # the dense input (in BertOutput the (B, T, I) GELU output) goes before dx is made
        dx = linear_input_grad(dh, weight, x_shape)
        return dx, dsum, grads
