"""The fast path's encoder on a batch of B >= 2 rows: two halves, rows [0, B//2) and [B//2, B),
each through all L layers of the same loop (BertEncoder.forward_layers / backward_layers), side
by side on two threads (npbert/fast/parallel.py: side_by_side), one thread each, instead of
every op splitting itself over the threads.

Rows never meet inside the encoder, so each half's outputs are its rows' own.  Each half runs
with model.batch_offset moved to its first row (state.call.adopted), so its dropout masks are
the whole batch's masks of those rows; the weight gradients are half 0's plus half 1's.  The
halves are the same on any thread count, so are the numbers (docs/encoder.md,
docs/performance.md).

    B = batch, T = tokens, H = hidden size, L = layers
"""
import numpy as np

from npbert.fast.parallel import parallel_for, side_by_side


class HalfCaches(list):
    """The caches of a forward that ran in halves: entry k is half k's LayerCaches; `bounds` the
    halves' rows [a, b)."""

    def __init__(self, bounds, halves):
        super().__init__(halves)
        self.bounds = bounds


def forward_in_halves(encoder, hidden_states, attention_mask, head_mask, output_hidden_states, output_attentions,
                      records, read_rows):
    """BertEncoder.forward's result, each half of the rows run by forward_layers."""
    B = hidden_states.shape[0]
    bounds = ((0, B // 2), (B // 2, B))
    half_records = _half_records(records, len(bounds))

    def half(k, a, b):
        return encoder.forward_layers(hidden_states[a:b], _rows(attention_mask, a, b), head_mask,
                                      output_hidden_states, output_attentions, half_records[k], read_rows)
    halves = _side_by_side(encoder, bounds, half)
    _merge_records(records, half_records)
    last = np.concatenate([h[0] for h in halves])                       # (B, T, H)
    all_hidden_states = all_attentions = None
    if output_hidden_states:
        all_hidden_states = (hidden_states,) + tuple(np.concatenate(h) for h in zip(*(p[1][1:] for p in halves)))
    if output_attentions:
        all_attentions = tuple(np.concatenate(a) for a in zip(*(p[2] for p in halves)))
    return last, all_hidden_states, all_attentions, HalfCaches(bounds, [p[3] for p in halves])


def backward_in_halves(encoder, dout, caches, dhidden_states, dattentions, stop, records):
    """BertEncoder.backward's result for caches of forward_in_halves: each half's backward_layers
    side by side, their weight gradients (and head-mask gradients) added."""
    half_records = _half_records(records, len(caches.bounds))

    def half(k, a, b):
        return encoder.backward_layers(dout[a:b], caches[k], _rows_of(dhidden_states, a, b),
                                       _rows_of(dattentions, a, b), stop, half_records[k])
    halves = _side_by_side(encoder, caches.bounds, half)
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


def _side_by_side(encoder, bounds, work):
    """[work(k, a, b) for each half k, rows [a, b)], side by side; each half in a copy of the
    caller's call options with batch_offset moved to its first row (its rows' dropout masks)."""
    call = encoder.state.call
    options = call.options

    def half(k):
        a, b = bounds[k]
        with call.adopted(options, batch_offset=options.batch_offset + a):
            return work(k, a, b)
    return side_by_side([lambda k=k: half(k) for k in range(len(bounds))])


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
