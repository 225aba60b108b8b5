"""BertLayer (attention + feed-forward) and BertEncoder (a stack of L layers).

    B = batch, T = sequence length, H = hidden size, N = heads, L = layers
"""
import numpy as np

from npbert.ops.dropout import substream
from npbert.ops.parallel import parallel_for, side_by_side

from .attention import BertAttention
from .feed_forward import BertIntermediate, BertOutput
from .module import Module


class BertLayer(Module):
    """attention_output = BertAttention(x); out = BertOutput(BertIntermediate(attention_output), attention_output)"""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.attention = BertAttention(state, prefix + "attention.")
        self.intermediate = BertIntermediate(state, prefix + "intermediate.")
        self.output = BertOutput(state, prefix + "output.")

    def forward(self, hidden_states, attention_mask=None, head_mask=None):
        """(B, T, H) -> ((B, T, H), probs (B, N, T, T), cache)."""
        keep = self.state.keep_caches          # False under npbert.no_grad(): free each cache at once
        attention_output, probs, attention_cache = self.attention.forward(hidden_states, attention_mask, head_mask)
        attention_cache = attention_cache if keep else None
        intermediate_output, intermediate_cache = self.intermediate.forward(attention_output)   # (B, T, I)
        intermediate_cache = intermediate_cache if keep else None
        layer_output, output_cache = self.output.forward(intermediate_output, attention_output)  # (B, T, H)
        return layer_output, probs, (attention_cache, intermediate_cache, output_cache)

    def backward(self, dout, cache, dprobs=None):
        attention_cache, intermediate_cache, output_cache = cache
        dintermediate, dattention_output, grads = self.output.backward(dout, output_cache)
        d, g = self.intermediate.backward(dintermediate, intermediate_cache, overwrite_dout=True)
        grads.update(g)
        dattention_output += d                        # attention_output fed the FFN and its residual
        del dintermediate, d                          # (B, T, I) and (B, T, H) not held through the attention
        dx, g = self.attention.backward(dattention_output, attention_cache, dprobs)
        grads.update(g)
        return dx, grads


class BertEncoder(Module):
    """L BertLayers in sequence, parameters under `encoder.layer.<i>.`.

    A batch of B >= 2 rows runs as two parts, rows [0, B//2) and [B//2, B), each through all
    L layers: on a 2-core machine the two parts run side by side, one thread each
    (`npbert.ops.parallel.side_by_side`), instead of every op splitting itself over the threads.
    Rows never meet inside the encoder, so the outputs are the rows' own; in training each part
    draws its dropout masks from its own generator, seeded by one draw from the model's; the
    weight gradients are part 0's plus part 1's.  The parts are the same on any number of
    threads, so are the numbers."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.layer = [BertLayer(state, f"{prefix}layer.{i}.") for i in range(self.config.num_hidden_layers)]

    def forward(self, hidden_states, attention_mask=None, head_mask=None,
                output_hidden_states=False, output_attentions=False):
        """hidden_states: (B, T, H); head_mask: (L, N) or None.
        Returns (last (B, T, H), all_hidden_states (L+1 arrays) or None, all_attentions
        (L arrays) or None, cache); the two tuples are collected only when asked for."""
        B = hidden_states.shape[0]
        if B < 2:
            return self._forward_layers(hidden_states, attention_mask, head_mask,
                                        output_hidden_states, output_attentions)
        bounds = ((0, B // 2), (B // 2, B))
        rngs = self._part_generators(len(bounds))

        def part(k):
            a, b = bounds[k]
            with self.state.part_rng(rngs[k]):
                return self._forward_layers(hidden_states[a:b], _rows(attention_mask, a, b), head_mask,
                                            output_hidden_states, output_attentions)
        parts = side_by_side([lambda k=k: part(k) for k in range(len(bounds))])
        last = np.concatenate([p[0] for p in parts])                        # (B, T, H)
        all_hidden_states = all_attentions = None
        if output_hidden_states:
            all_hidden_states = (hidden_states,) + tuple(
                np.concatenate(h) for h in zip(*(p[1][1:] for p in parts)))
        if output_attentions:
            all_attentions = tuple(np.concatenate(a) for a in zip(*(p[2] for p in parts)))
        caches = _PartCaches(bounds, [list(c) for c in zip(*(p[3] for p in parts))])
        return last, all_hidden_states, all_attentions, caches

    def _part_generators(self, n):
        """In training, one generator per part, seeded by one draw from the model's; else Nones."""
        if not self.state.training:
            return [None] * n
        seed = int(self.state.rng.bit_generator.random_raw())
        return [np.random.Generator(substream(seed, k)) for k in range(n)]

    def _forward_layers(self, hidden_states, attention_mask, head_mask, output_hidden_states, output_attentions):
        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        caches = []
        for i, layer in enumerate(self.layer):
            hidden_states, probs, c = layer.forward(hidden_states, attention_mask,
                                                    None if head_mask is None else head_mask[i])
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

    def backward(self, dout, caches, dhidden_states=None, dattentions=None, stop=0):
        """dout: (B, T, H) gradient of the last hidden state (zeros if it had none); dhidden_states: L+1
        optional gradients of every hidden state; dattentions: L optional gradients of the
        attention probabilities.  Returns (d embedding_output (B, T, H), grads).

        stop > 0: layers below `stop` hold only frozen parameters and nothing below them needs a
        gradient (model.freeze), so the backward ends after layer `stop` and returns (None, grads)."""
        if not isinstance(caches, _PartCaches):
            return self._backward_layers(dout, caches, dhidden_states, dattentions, stop, None)

        def part(k):
            a, b = caches.bounds[k]
            return self._backward_layers(dout[a:b], caches, _rows_of(dhidden_states, a, b),
                                         _rows_of(dattentions, a, b), stop, k)
        parts = side_by_side([lambda k=k: part(k) for k in range(len(caches.bounds))])
        grads = parts[0][1]
        names = list(grads)

        def add(lo, hi):                              # part 0's weight gradients += part 1's, ...
            for name in names[lo:hi]:
                for p in parts[1:]:
                    grads[name] += p[1][name]
        parallel_for(add, len(names))
        if stop > 0:
            return None, grads
        return np.concatenate([p[0] for p in parts]), grads

    def _backward_layers(self, dout, caches, dhidden_states, dattentions, stop, part):
        """The layers' backward from the top down to `stop`; `part`: which part's caches
        (caches[i][part]) when the forward ran in parts, else None."""
        grads = {}
        dx = dout
        for i in reversed(range(stop, len(self.layer))):
            if dhidden_states is not None and dhidden_states[i + 1] is not None:
                dx = dx + dhidden_states[i + 1]       # hidden state i+1 is also an output
            dprobs = None if dattentions is None else dattentions[i]
            cache = caches[i] if part is None else caches[i][part]
            dx, g = self.layer[i].backward(dx, cache, dprobs)
            grads.update(g)
            if self.state.release_caches:             # layer i's activations are no longer needed
                if part is None:
                    caches[i] = None
                else:
                    caches[i][part] = None
        if stop > 0:
            return None, grads
        if dhidden_states is not None and dhidden_states[0] is not None:
            dx = dx + dhidden_states[0]
        return dx, grads


class _PartCaches(list):
    """The caches of a forward that ran the batch in parts: entry i is [part 0's cache of
    layer i, part 1's, ...]; `bounds` the parts' rows [a, b)."""

    def __init__(self, bounds, per_layer):
        super().__init__(per_layer)
        self.bounds = bounds


def _rows(mask, a, b):
    """Rows [a, b) of an additive mask (B, N or 1, F or 1, T); one that broadcasts over the
    batch (first axis 1, or fewer than 4 axes) stays whole."""
    if mask is None or np.ndim(mask) < 4 or mask.shape[0] == 1:
        return mask
    return mask[a:b]


def _rows_of(arrays, a, b):
    """Rows [a, b) of each optional upstream gradient in a list (or None)."""
    if arrays is None:
        return None
    return [None if x is None else x[a:b] for x in arrays]
