"""The fast twins of the module classes: what differs in shape, not only in the ops, on the fast
path (transformers keeps BertSdpaSelfAttention beside BertSelfAttention the same way).  Each twin
computes what its reference class computes, tested equal (tests/modeling/test_fast_equals_reference.py):

    FastBertSelfAttention   Q, K, V as one GEMM with the three weights stacked; the context
                            written straight into a (B, F, H) array; dQ, dK, dV side by side
                            in one (B, T, 3H) array, so the backward is one GEMM each way too
    FastBertSelfOutput      the residual added in place; the dense input freed before dx
    FastBertIntermediate    float32 GELU: its derivative made in the forward (kept instead of
                            the pre-activation), the backward one multiplication in the
                            memory of its upstream gradient
    FastBertLayer           under npbert.no_grad() each sublayer's cache dropped at once
    FastBertEncoder         a batch of B >= 2 rows as two halves, side by side on two threads
    (all)                   each cache emptied as soon as the backward has read it (as torch
                            frees saved tensors node by node), so a training step's peak is low

`ModelState.use_path` (npbert/modeling/module.py) makes every module an instance of its twin
when the model is called on the fast path.  The twins take one more argument, `first_row`: the
global index of the first row they compute, which their dropout masks are keyed by
(npbert/ops/dropout.py); a half of the batch passes its own.  Measured speed: docs/performance.md.
"""
import numpy as np

import npbert.fast as F
from npbert.fast.parallel import parallel_for, side_by_side
from npbert.ops.linear import linear_input_grad, linear_param_grads

from .attention import BertAttention, BertSelfAttention, BertSelfOutput
from .encoder import BertEncoder, BertLayer
from .feed_forward import BertIntermediate, BertOutput


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
    if module.state.release_caches:
        cache.clear()


class FastBertSelfAttention(BertSelfAttention):
    """BertSelfAttention.forward's numbers: Q, K, V = x [Wq; Wk; Wv]^T + [bq, bk, bv] in one GEMM,
    then npbert/fast/attention.py (softmax(Q K^T / sqrt(D) + mask), dropout, head mask, times V)."""

    def stacked_qkv(self):
        """[Wq; Wk; Wv] (3H, H) and [bq, bk, bv] (3H,): the three projections as one nn.Linear
        (the parameters' own memory when they are its blocks: share_qkv_memory)."""
        names = ("query", "key", "value")
        return (_stacked([self.p(f"{n}.weight") for n in names]),
                _stacked([self.p(f"{n}.bias") for n in names]))

    def forward(self, hidden_states, attention_mask=None, head_mask=None, first_row=None, record=None, rows=None):
        if rows is not None:
            return self._forward_rows(hidden_states, attention_mask, head_mask, first_row, rows)
        H = self.config.hidden_size
        qkv_weight, qkv_bias = self.stacked_qkv()                                 # (3H, H), (3H,)
        qkv, _ = F.linear_forward(hidden_states, qkv_weight, qkv_bias)            # (B, T, 3H)
        q, k, v = qkv[..., :H], qkv[..., H:2 * H], qkv[..., 2 * H:]              # (B, T, H) views
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)   # (B, N, T, D) each
        B, N, T, D = q.shape
        context = np.empty((B, T, N * D), dtype=q.dtype)                          # (B, F, H)
        _, attention_cache = F.attention_forward(
            q, k, v, attention_mask, head_mask, self.config.attention_probs_dropout_prob,
            self.dropout_rng(first_row), self.training, scale=self.scaling,
            out=self.split_heads(context), record=record)                         # written as (B, N, F, D)
        cache = {"x": hidden_states, "attention": attention_cache}   # the backward rebuilds the stacked weight
        if record is not None:                                       # (the scores: from attention_forward)
            record.update(query=q, key=k, value=v, attentions=attention_cache["probs"], context_layer=context)
        return context, attention_cache["probs"], cache

    def _forward_rows(self, hidden_states, attention_mask, head_mask, first_row, rows):
        """The context of query rows [a, b) only (B, b - a, H): K and V of every row, Q of those rows."""
        H = self.config.hidden_size
        a, b = rows
        qkv_weight, qkv_bias = self.stacked_qkv()                                 # (3H, H), (3H,)
        kv, _ = F.linear_forward(hidden_states, qkv_weight[H:], qkv_bias[H:])     # (B, T, 2H)
        q, _ = F.linear_forward(hidden_states[:, a:b], qkv_weight[:H], qkv_bias[:H])   # (B, b - a, H)
        q, k, v = self.split_heads(q), self.split_heads(kv[..., :H]), self.split_heads(kv[..., H:])
        B, N, R, D = q.shape
        if attention_mask is not None and np.ndim(attention_mask) == 4 and attention_mask.shape[2] > 1:
            attention_mask = attention_mask[:, :, a:b]                            # a decoder's (B, 1, T, T)
        context = np.empty((B, R, N * D), dtype=q.dtype)                          # (B, b - a, H)
        _, attention_cache = F.attention_forward(
            q, k, v, attention_mask, head_mask, self.config.attention_probs_dropout_prob,
            self.dropout_rng(first_row), self.training, scale=self.scaling, out=self.split_heads(context))
        return context, attention_cache["probs"], {"x": hidden_states, "attention": attention_cache, "rows": rows}

    def backward(self, dcontext, cache, dprobs=None, record=None):
        """Each cached array is dropped as soon as the last step that reads it has run (when the
        backward frees activations as it goes): the probs before dQ and dK are made, Q, K and V
        before the projection's GEMMs."""
        if "rows" in cache:
            return self._backward_rows(dcontext, cache, dprobs, record)
        x = cache["x"]
        B, T, H = dcontext.shape
        dqkv = np.empty((B, T, 3 * H), dtype=dcontext.dtype)                      # [dQ, dK, dV] side by side
        dq, dk, dv = dqkv[..., :H], dqkv[..., H:2 * H], dqkv[..., 2 * H:]        # (B, T, H) views
        F.attention_backward(self.split_heads(dcontext), cache["attention"], dprobs,
                             out=(self.split_heads(dq), self.split_heads(dk), self.split_heads(dv)),
                             free=self.state.release_caches, record=record)
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
        F.attention_backward(self.split_heads(dcontext), cache["attention"], dprobs,
                             out=(self.split_heads(dq), self.split_heads(dkv[..., :H]),
                                  self.split_heads(dkv[..., H:])),
                             free=self.state.release_caches, record=record)
        if record is not None and "attentions" in record:           # the other query rows' gradient is 0
            full = np.zeros(record["attentions"].shape[:2] + (T, T), dtype=dcontext.dtype)
            full[:, :, a:b] = record["attentions"]
            record["attentions"] = full                                           # (B, N, T, T)
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

    def forward(self, hidden_states, input_tensor, first_row=None):
        cache = {}
        h, cache["dense"] = F.linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))
        h, cache["dropout"] = F.dropout_forward(h, self.config.hidden_dropout_prob, self.dropout_rng(first_row),
                                                self.training)
        h += input_tensor                       # in place: neither the dense nor the dropout cache holds h
        h, cache["ln"] = F.layer_norm_forward(h, self.p("LayerNorm.weight"), self.p("LayerNorm.bias"),
                                              self.config.layer_norm_eps)
        return h, cache

    def backward(self, dout, cache):
        ln_grads = self.trainable("LayerNorm.weight") or self.trainable("LayerNorm.bias")
        dsum, g = F.layer_norm_backward(dout, cache["ln"], param_grads=ln_grads)  # (B, T, H)
        grads = self.prefixed("LayerNorm", g)
        dh = F.dropout_backward(dsum, cache["dropout"])
        x, weight, _ = cache["dense"]
        _release(self, cache)
        if self.trainable("dense.weight") or self.trainable("dense.bias"):
            grads.update(self.prefixed("dense", linear_param_grads(dh, x)))
        x_shape = x.shape
        del x           # the dense input (in BertOutput the (B, T, I) GELU output) goes before dx is made
        dx = linear_input_grad(dh, weight, x_shape)
        return dx, dsum, grads


class FastBertOutput(FastBertSelfOutput, BertOutput):
    """BertOutput's numbers, FastBertSelfOutput's code (BertOutput is BertSelfOutput from I features)."""


class FastBertIntermediate(BertIntermediate):
    """BertIntermediate's numbers: act(dense(hidden_states))."""

    def forward(self, hidden_states):
        act_forward, _ = F.get_activation(self.config.hidden_act)
        cache = {}
        h, cache["dense"] = F.linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))   # (B, T, I)
        if self.config.hidden_act in ("gelu", "gelu_python") and h.dtype == np.float32 and self.state.keep_caches:
            out, cache["dact"] = F.gelu_forward_with_grad(h)      # (B, T, I) each: d out / d h made now
        else:
            out, cache["act"] = act_forward(h)                                                            # (B, T, I)
        return out, cache

    def backward(self, dout, cache, overwrite_dout=False):
        """overwrite_dout=True lets the activation's gradient reuse dout's memory (BertLayer,
        which owns dout, passes it): one (B, T, I) array less at the backward's peak.
        The exact GELU in float32 made its derivative in the forward, from the pre-activation
        while it was in cache (gelu_forward_with_grad), and kept it instead of the
        pre-activation: here one multiplication, in place of 11 passes."""
        if "dact" in cache:
            dh = np.multiply(dout, cache["dact"], out=dout if overwrite_dout else None)                  # (B, T, I)
        elif self.config.hidden_act in ("gelu", "gelu_python"):
            dh = F.gelu_backward(dout, cache["act"], out=dout if overwrite_dout else None)              # (B, T, I)
        else:
            dh = F.get_activation(self.config.hidden_act)[1](dout, cache["act"])                        # (B, T, I)
        dense_cache = cache["dense"]
        _release(self, cache)                    # the activation's (B, T, I) cache goes before the GEMMs
        return self.linear_backward("dense", dh, dense_cache)                     # (B, T, H), grads


class FastBertAttention(BertAttention):
    """BertAttention, passing `first_row` on to its two children; with `rows` = (a, b), the
    output of rows [a, b) only, (B, b - a, H)."""

    def forward(self, hidden_states, attention_mask=None, head_mask=None, first_row=None, record=None, rows=None):
        context, probs, self_cache = self.self.forward(hidden_states, attention_mask, head_mask, first_row, record,
                                                       rows)
        residual = hidden_states if rows is None else hidden_states[:, rows[0]:rows[1]]
        out, output_cache = self.output.forward(context, residual, first_row)
        return out, probs, (self_cache, output_cache)

    def backward(self, dout, cache, dprobs=None, record=None):
        self_cache, output_cache = cache
        rows = self_cache.get("rows")
        if rows is None:
            return super().backward(dout, cache, dprobs, record)
        dcontext, dresidual, grads = self.output.backward(dout, output_cache)
        dx, g = self.self.backward(dcontext, self_cache, dprobs, record)
        grads.update(g)
        dx[:, rows[0]:rows[1]] += dresidual                                       # the residual path, those rows
        return dx, grads


class FastBertLayer(BertLayer):
    """BertLayer's numbers; under npbert.no_grad() each sublayer's cache is dropped at once, and
    the backward works in place where it owns its arrays."""

    def forward(self, hidden_states, attention_mask=None, head_mask=None, first_row=None, record=None, rows=None):
        """rows = (a, b): only rows [a, b) of the output are computed, (B, b - a, H) (the encoder's
        last layer when the head reads only the [CLS] row)."""
        keep = self.state.keep_caches          # False under npbert.no_grad(): free each cache at once
        attention_output, probs, attention_cache = self.attention.forward(hidden_states, attention_mask, head_mask,
                                                                          first_row, record, rows)
        attention_cache = attention_cache if keep else None
        intermediate_output, intermediate_cache = self.intermediate.forward(attention_output)   # (B, T, I)
        intermediate_cache = intermediate_cache if keep else None
        layer_output, output_cache = self.output.forward(intermediate_output, attention_output, first_row)
        if record is not None:
            record.update(attention_output=attention_output, intermediate_output=intermediate_output,
                          layer_output=layer_output)
        return layer_output, probs, (attention_cache, intermediate_cache, output_cache)

    def backward(self, dout, cache, dprobs=None, record=None):
        attention_cache, intermediate_cache, output_cache = cache
        rows = attention_cache[0].get("rows")
        if rows is not None:                          # a forward of rows [a, b): the other rows' dout is 0
            dout = np.ascontiguousarray(dout[:, rows[0]:rows[1]])
        dintermediate, dattention_output, grads = self.output.backward(dout, output_cache)
        d, g = self.intermediate.backward(dintermediate, intermediate_cache, overwrite_dout=True)
        grads.update(g)
        dattention_output += d                        # attention_output fed the FFN and its residual
        del dintermediate, d                          # (B, T, I) and (B, T, H) not held through the attention
        dx, g = self.attention.backward(dattention_output, attention_cache, dprobs, record)
        grads.update(g)
        return dx, grads


class FastBertEncoder(BertEncoder):
    """BertEncoder's numbers, a batch of B >= 2 rows run as two halves, rows [0, B//2) and
    [B//2, B), each through all L layers: with 2 or 3 npbert threads side by side, one thread
    each (`side_by_side`), instead of every op splitting itself over the threads.  Rows never
    meet inside the encoder, so the outputs are the rows' own; each half keys its dropout masks
    by its own rows' global indices, so they are the masks of the whole batch; the weight
    gradients are half 0's plus half 1's.  The halves are the same on any thread count, so are
    the numbers (docs/encoder.md, docs/performance.md)."""

    def forward(self, hidden_states, attention_mask=None, head_mask=None,
                output_hidden_states=False, output_attentions=False, records=None):
        B = hidden_states.shape[0]
        rows = self._last_rows(output_hidden_states, output_attentions, records)
        if B < 2:
            return self._forward_layers(hidden_states, attention_mask, head_mask, output_hidden_states,
                                        output_attentions, first_row=None, records=records, rows=rows)
        bounds = ((0, B // 2), (B // 2, B))
        offset = self.state.batch_offset
        half_records = _half_records(records, len(bounds))

        def half(k):
            a, b = bounds[k]
            return self._forward_layers(hidden_states[a:b], _rows(attention_mask, a, b), head_mask,
                                        output_hidden_states, output_attentions, first_row=offset + a,
                                        records=half_records[k], rows=rows)
        halves = side_by_side([lambda k=k: half(k) for k in range(len(bounds))])
        _merge_records(records, half_records)
        last = np.concatenate([h[0] for h in halves])                       # (B, T, H)
        all_hidden_states = all_attentions = None
        if output_hidden_states:
            all_hidden_states = (hidden_states,) + tuple(
                np.concatenate(h) for h in zip(*(p[1][1:] for p in halves)))
        if output_attentions:
            all_attentions = tuple(np.concatenate(a) for a in zip(*(p[2] for p in halves)))
        caches = HalfCaches(bounds, [list(c) for c in zip(*(p[3] for p in halves))])
        return last, all_hidden_states, all_attentions, caches

    def _last_rows(self, output_hidden_states, output_attentions, records):
        """(a, b) when the head reads only rows [a, b) of the last hidden state (state.read_rows),
        nothing else reads the others, and no dropout runs: the last layer then computes those
        rows only (K and V of every row, the rest of the layer for those rows).  Else None."""
        rows = self.state.read_rows
        if rows is None or output_hidden_states or output_attentions or records is not None or self.training:
            return None
        return rows

    def _forward_layers(self, hidden_states, attention_mask, head_mask, output_hidden_states, output_attentions,
                        first_row, records=None, rows=None):
        """BertEncoder.forward's loop on the rows given, their first row's global index `first_row`.
        rows = (a, b): the last layer computes only rows [a, b) of its output; the other rows of
        the returned last hidden state are NaN (nothing reads them: _last_rows)."""
        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        caches = []
        L = len(self.layer)
        for i, layer in enumerate(self.layer):
            last_rows = {"rows": rows} if rows is not None and i == L - 1 else {}
            B, T, H = hidden_states.shape
            hidden_states, probs, c = layer.forward(hidden_states, attention_mask,
                                                    None if head_mask is None else head_mask[i], first_row,
                                                    None if records is None else records[i], **last_rows)
            if last_rows:
                full = np.full((B, T, H), np.nan, dtype=hidden_states.dtype)                     # (B, T, H)
                full[:, rows[0]:rows[1]] = hidden_states
                hidden_states = full
            if output_hidden_states:
                all_hidden_states.append(hidden_states)
            if output_attentions:
                all_attentions.append(probs)
            caches.append(c if self.state.keep_caches else None)   # under no_grad: freed right away
            del c, probs               # not held while the next layer runs
        if output_hidden_states:
            all_hidden_states = tuple(all_hidden_states)
        if output_attentions:
            all_attentions = tuple(all_attentions)
        return hidden_states, all_hidden_states, all_attentions, caches

    def backward(self, dout, caches, dhidden_states=None, dattentions=None, stop=0, records=None):
        """BertEncoder.backward, run on each half's rows and caches side by side; the weight
        gradients of the two halves are added, so are their head-mask gradients.  (Each layer's
        caches are emptied by the layers' own backward: FastBertSelfAttention, FastBertSelfOutput,
        FastBertIntermediate.)"""
        if not isinstance(caches, HalfCaches):
            return super().backward(dout, caches, dhidden_states, dattentions, stop, records)
        half_records = _half_records(records, len(caches.bounds))

        def half(k):
            a, b = caches.bounds[k]
            return super(FastBertEncoder, self).backward(dout[a:b], [c[k] for c in caches],
                                                         _rows_of(dhidden_states, a, b),
                                                         _rows_of(dattentions, a, b), stop, half_records[k])
        halves = side_by_side([lambda k=k: half(k) for k in range(len(caches.bounds))])
        _merge_records(records, half_records)
        grads = halves[0][1]
        names = list(grads)

        def add(lo, hi):                              # half 0's weight gradients += half 1's
            for name in names[lo:hi]:
                for h in halves[1:]:
                    grads[name] += h[1][name]
        parallel_for(add, len(names))
        if stop > 0:
            return None, grads
        return np.concatenate([h[0] for h in halves]), grads


class HalfCaches(list):
    """The caches of a forward that ran the batch in halves: entry i is [half 0's cache of
    layer i, half 1's]; `bounds` the halves' rows [a, b)."""

    def __init__(self, bounds, per_layer):
        super().__init__(per_layer)
        self.bounds = bounds


def _rows(mask, a, b):
    """Rows [a, b) of an additive mask (B, N or 1, F or 1, T); one that broadcasts over the
    batch (first axis 1, or fewer than 4 axes) stays whole."""
    if mask is None or np.ndim(mask) < 4 or mask.shape[0] == 1:
        return mask
    return mask[a:b]


def _half_records(records, halves):
    """Each half's own L dicts of intermediates (None when none are asked for)."""
    return [None if records is None else [{} for _ in records] for _ in range(halves)]


def _merge_records(records, half_records):
    """Layer i's intermediates of the whole batch into records[i]: the halves' arrays joined along
    the batch axis; the head-mask gradients (N,), sums over the batch, added."""
    if records is None:
        return
    for i, record in enumerate(records):
        for name in half_records[0][i]:
            parts = [h[i][name] for h in half_records]
            record[name] = np.sum(parts, axis=0) if name == "head_mask" else np.concatenate(parts)


def _rows_of(arrays, a, b):
    """Rows [a, b) of each optional upstream gradient in a list (or None)."""
    if arrays is None:
        return None
    return [None if x is None else x[a:b] for x in arrays]


# reference class -> fast twin: what ModelState.use_path swaps
FAST_TWINS = {BertSelfAttention: FastBertSelfAttention, BertSelfOutput: FastBertSelfOutput,
              BertOutput: FastBertOutput, BertIntermediate: FastBertIntermediate,
              BertAttention: FastBertAttention, BertLayer: FastBertLayer, BertEncoder: FastBertEncoder}
