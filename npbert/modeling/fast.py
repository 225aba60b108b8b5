"""The fast twins of the module classes: what differs in shape, not only in the ops, on the fast
path (transformers keeps BertSdpaSelfAttention beside BertSelfAttention the same way).  Each twin
computes what its reference class computes, tested equal (tests/fast/test_models_fast_equals_reference.py).
The attention block's twins are in npbert/modeling/fast_attention.py:

    FastBertSelfAttention   Q, K, V as one GEMM with the three weights stacked (the parameters'
                            own memory: share_qkv_memory); the context written straight into a
                            (B, F, H) array; dQ, dK, dV side by side in one (B, T, 3H) array, so
                            the backward is one GEMM each way too
    FastBertSelfOutput      the residual added in place; the dense input freed before dx
    FastBertAttention       with rows = (a, b): the output of rows [a, b) alone (below)
    FastBertIntermediate    float32 GELU: its derivative made in the forward (kept instead of
                            the pre-activation), the backward one multiplication in the
                            memory of its upstream gradient
    FastBertLayer           under npbert.no_grad() each sublayer's cache dropped at once
    FastBertEncoder         a batch of B >= 2 rows as two halves, side by side on two threads;
                            attention in tiles from attention_tiles_from tokens on (_tiles);
                            the last layer on the [CLS] row alone when the head reads only
                            the pooled output (eval mode: _last_rows); the first layer's Q, K, V
                            from the two ends of the lines when the input is an AffineRows
                            (integrated gradients: _input_lines), and then the input gradient
                            summed over each example's rows
    (all)                   each cache emptied as soon as the backward has read it (as torch
                            frees saved tensors node by node), so a training step's peak is low

A model built on the fast path is made of the twins (`state.module_class(BertSelfAttention)`,
npbert/modeling/module.py); model.set_path switches it.  A twin takes its reference class's
arguments, and one more, keyword-only: `extra=FastArgs(...)` (npbert/modeling/call.py), what the
fast encoder asks of a layer beyond them: the global index of the first row it computes, which
its dropout masks are keyed by (npbert/ops/dropout.py; a half of the batch passes its own), the
rows to compute, attention in tiles.  Measured speed: docs/performance.md.
"""
import numpy as np

import npbert.fast as fast
from npbert.fast.parallel import parallel_for, side_by_side
from npbert.ops.affine_rows import AffineRows

from .attention import BertAttention, BertSelfAttention, BertSelfOutput
from .call import NO_EXTRA, FastArgs
from .encoder import BertEncoder, BertLayer, LayerRecompute
from .fast_attention import FastBertAttention, FastBertSelfAttention, FastBertSelfOutput, _release
from .feed_forward import BertIntermediate, BertOutput


class FastBertOutput(FastBertSelfOutput, BertOutput):
    """BertOutput's numbers, FastBertSelfOutput's code (BertOutput is BertSelfOutput from I features)."""


class FastBertIntermediate(BertIntermediate):
    """BertIntermediate's numbers: act(dense(hidden_states))."""

    def forward(self, hidden_states):
        act_forward, _ = fast.get_activation(self.config.hidden_act)
        cache = {}
        h, cache["dense"] = fast.linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))   # (B, T, I)
        if self.config.hidden_act in ("gelu", "gelu_python") and h.dtype == np.float32 and self.state.call.keep_caches:
            out, cache["dact"] = fast.gelu_forward_with_grad(h, overwrite_x=True)   # (B, T, I) each: d out / d h
                                                                                 # made now; out in h's memory
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
            dh = fast.gelu_backward(dout, cache["act"], out=dout if overwrite_dout else None)              # (B, T, I)
        else:
            dh = fast.get_activation(self.config.hidden_act)[1](dout, cache["act"])                        # (B, T, I)
        dense_cache = cache["dense"]
        _release(self, cache)                    # the activation's (B, T, I) cache goes before the GEMMs
        return self.linear_backward("dense", dh, dense_cache)                     # (B, T, H), grads


class FastBertLayer(BertLayer):
    """BertLayer's numbers; under npbert.no_grad() each sublayer's cache is dropped at once, and
    the backward works in place where it owns its arrays."""

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None, *, extra=NO_EXTRA):
        """extra (npbert/modeling/call.py: FastArgs): extra.rows = (a, b): only rows [a, b) of the
        output are computed, (B, b - a, H) (the encoder's last layer when the head reads only the
        [CLS] row); the rest: FastBertAttention's and FastBertSelfAttention's."""
        keep = self.state.call.keep_caches          # False under npbert.no_grad(): free each cache at once
        attention_output, probs, attention_cache = self.attention.forward(hidden_states, attention_mask, head_mask,
                                                                          record, extra=extra)
        attention_cache = attention_cache if keep else None
        intermediate_output, intermediate_cache = self.intermediate.forward(attention_output)   # (B, T, I)
        intermediate_cache = intermediate_cache if keep else None
        layer_output, output_cache = self.output.forward(intermediate_output, attention_output, extra=extra)
        if record is not None:
            record.update(attention_output=attention_output, intermediate_output=intermediate_output,
                          layer_output=layer_output)
        return layer_output, probs, (attention_cache, intermediate_cache, output_cache)

    def backward(self, dout, cache, dprobs=None, record=None):
        attention_cache, intermediate_cache, output_cache = cache
        rows = attention_cache[0].get("rows", attention_cache[0].get("context_rows"))
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
        B, T, _ = hidden_states.shape
        last = self._last_rows(output_hidden_states, output_attentions, records)
        tiles = self._tiles(T, output_attentions, records)
        if B < 2:
            return self._forward_layers(hidden_states, attention_mask, head_mask, output_hidden_states,
                                        output_attentions, first_row=None, records=records, last=last, tiles=tiles)
        bounds = ((0, B // 2), (B // 2, B))
        offset = self.state.call.batch_offset
        half_records = _half_records(records, len(bounds))
        lines = self._input_lines(hidden_states, output_hidden_states, records, last)

        def half(k):
            a, b = bounds[k]
            return self._forward_layers(hidden_states[a:b], _rows(attention_mask, a, b), head_mask,
                                        output_hidden_states, output_attentions, first_row=offset + a,
                                        records=half_records[k], last=last,
                                        lines=None if lines is None else lines.rows(a, b), tiles=tiles)
        halves = side_by_side([lambda k=k: half(k) for k in range(len(bounds))])
        _merge_records(records, half_records)
        last = np.concatenate([h[0] for h in halves])                       # (B, T, H)
        all_hidden_states = all_attentions = None
        if output_hidden_states:
            all_hidden_states = (hidden_states,) + tuple(
                np.concatenate(h) for h in zip(*(p[1][1:] for p in halves)))
        if output_attentions:
            all_attentions = tuple(np.concatenate(a) for a in zip(*(p[2] for p in halves)))
        caches = HalfCaches(bounds, [list(c) for c in zip(*(p[3] for p in halves))], summed=lines is not None)
        return last, all_hidden_states, all_attentions, caches

    def _input_lines(self, hidden_states, output_hidden_states, records, last):
        """The AffineRows the embeddings' output was replaced by (npbert.interpret's integrated
        gradients: npbert/ops/affine_rows.py) when the first layer may take its Q, K, V from the
        lines' two ends: the replacement's rows are hidden_states, and no one reads the gradient
        of a single row (no hidden states, no records: the backward returns each example's sum).
        Else None."""
        lines = self.state.call.replaced_outputs.get(self.prefix[:-len("encoder.")] + "embeddings")
        if (not isinstance(lines, AffineRows) or lines.shape != hidden_states.shape or output_hidden_states
                or records is not None or (last is not None and len(self.layer) == 1)):
            return None
        return lines

    def _tiles(self, T, output_attentions, records):
        """True when every layer runs its attention in tiles (npbert/fast/tiled_attention.py): at
        least `attention_tiles_from` tokens (BertEncoder), and nobody reads the probabilities or
        their gradients (output_attentions, intermediates, npbert.interpret)."""
        return (self.attention_tiles_from is not None and T >= self.attention_tiles_from and not output_attentions
                and records is None and not self.state.call.attention_probs_read)

    def _last_rows(self, output_hidden_states, output_attentions, records):
        """{"rows": (a, b), "all_queries": ...} (FastArgs' fields) when the head reads only rows [a, b) of the last
        hidden state (state.call.read_rows), nothing else reads the others' hidden states, and no
        dropout runs: the last layer then computes those rows only (K and V of every row, the
        rest of the layer for those rows; with output_attentions, the attention of every query
        row and the rest for those rows).  Else None."""
        rows = self.state.call.read_rows
        if rows is None or output_hidden_states or records is not None or self.training:
            return None
        return {"rows": rows, "all_queries": bool(output_attentions)}

    def _forward_layers(self, hidden_states, attention_mask, head_mask, output_hidden_states, output_attentions,
                        first_row, records=None, last=None, lines=None, tiles=False):
        """BertEncoder.forward's loop on the rows given, their first row's global index `first_row`.
        last = {"rows": (a, b), "all_queries": ...} (_last_rows): the last layer's extra arguments;
        it computes only rows [a, b) of its output, and the other rows of the returned last hidden
        state are NaN (nothing reads them).  lines: the AffineRows these rows are (_input_lines), the
        first layer's.  tiles: every layer's attention in tiles (_tiles)."""
        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        caches = []
        L = len(self.layer)
        for i, layer in enumerate(self.layer):
            rows = last if last is not None and i == L - 1 else {}
            extra = FastArgs(first_row=first_row, lines=lines if i == 0 else None, tiles=tiles and not rows,
                             **rows)                    # (never lines with `last`: _input_lines)
            B, T, H = hidden_states.shape
            args = (hidden_states, attention_mask, None if head_mask is None else head_mask[i],
                    None if records is None else records[i])
            hidden_states, probs, c = layer.forward(*args, extra=extra)
            if self._checkpointing(records):          # keep the call, not the activations (encoder.py)
                c = LayerRecompute(layer, args, {"extra": extra})
            if extra.rows is not None:
                a, b = extra.rows
                full = np.full((B, T, H), np.nan, dtype=hidden_states.dtype)                     # (B, T, H)
                full[:, a:b] = hidden_states
                hidden_states = full
            if output_hidden_states:
                all_hidden_states.append(hidden_states)
            if output_attentions:
                all_attentions.append(probs)
            caches.append(c if self.state.call.keep_caches else None)   # under no_grad: freed right away
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
        if caches.summed:                             # each half's per-example sums (_input_lines)
            return halves[0][0] + halves[1][0], grads
        return np.concatenate([h[0] for h in halves]), grads


class HalfCaches(list):
    """The caches of a forward that ran the batch in halves: entry i is [half 0's cache of
    layer i, half 1's]; `bounds` the halves' rows [a, b); summed: the first layer ran on an
    AffineRows, and the input gradient is each example's sum over its rows (examples, T, H)."""

    def __init__(self, bounds, per_layer, summed=False):
        super().__init__(per_layer)
        self.bounds = bounds
        self.summed = summed


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


# reference class -> fast twin: what ModelState.module_class builds on the fast path
FAST_TWINS = {BertSelfAttention: FastBertSelfAttention, BertSelfOutput: FastBertSelfOutput,
              BertOutput: FastBertOutput, BertIntermediate: FastBertIntermediate,
              BertAttention: FastBertAttention, BertLayer: FastBertLayer, BertEncoder: FastBertEncoder}
