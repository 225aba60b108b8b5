"""BertLayer (attention + feed-forward) and BertEncoder (a stack of L layers).

    B = batch, T = sequence length, H = hidden size, N = heads, L = layers

Their fast twins (the encoder's two batch halves side by side on two threads, caches freed as
the backward goes) are in npbert/modeling/fast.py.

`records`: a list of L dicts, one per layer, that the encoder's forward fills with each layer's
intermediates and its backward with their gradients (npbert/modeling/attention.py); None, the
default, keeps nothing.

Gradient checkpointing (`model.gradient_checkpointing_enable()`, transformers' name; the flag
is `BertEncoder.gradient_checkpointing`, as transformers keeps it): in a training forward each
layer keeps only its call (its input, masks and the dropout step it ran in, a LayerRecompute)
instead of its activations, and the backward runs the layer's forward again to get them.
Dropout masks are keyed by (step, site, row), so the second forward draws the same masks: the
gradients are the same, bit for bit, for one more forward of each layer (docs/long_sequences.md).
"""
import numpy as np

from npbert.settings import BOOL, POSITIVE_INT_OR_NONE

from .attention import BertAttention
from .feed_forward import BertIntermediate, BertOutput
from .halves import HalfCaches, backward_in_halves, forward_in_halves
from .module import Module, ModuleList


TILES_FROM = 1024   # tokens: the fast path's attention in tiles from this length on (docs/long_sequences.md)


class BertLayer(Module):
    """attention_output = BertAttention(x); out = BertOutput(BertIntermediate(attention_output), attention_output)"""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.attention = state.module_class(BertAttention)(state, prefix + "attention.")
        self.intermediate = state.module_class(BertIntermediate)(state, prefix + "intermediate.")
        self.output = state.module_class(BertOutput)(state, prefix + "output.")

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None, output_attentions=True,
                query_rows=None):
        """(B, T, H) -> ((B, F, H), probs (B, N, F, T), cache), F = T, or b - a with query_rows = (a, b)
        (BertSelfAttention.forward).  record: an optional dict that gets the attention's
        intermediates, attention_output, intermediate_output and layer_output.  Under
        npbert.no_grad() each sublayer's cache is dropped as soon as it is made, and the cache
        returned is None."""
        keep = self.state.call.keep_caches
        attention_output, probs, attention_cache = self.attention.forward(
            hidden_states, attention_mask, head_mask, record, output_attentions, query_rows)     # (B, F, H)
        attention_cache = attention_cache if keep else None
        intermediate_output, intermediate_cache = self.intermediate.forward(attention_output)   # (B, F, I)
        intermediate_cache = intermediate_cache if keep else None
        layer_output, output_cache = self.output.forward(intermediate_output, attention_output)  # (B, F, H)
        if record is not None:
            record.update(attention_output=attention_output, intermediate_output=intermediate_output,
                          layer_output=layer_output)
        if not keep:
            return layer_output, probs, None          # (the output's cache holds the (B, F, I) activation)
        return layer_output, probs, (attention_cache, intermediate_cache, output_cache)

    def backward(self, dout, cache, dprobs=None, record=None):
        attention_cache, intermediate_cache, output_cache = cache
        dintermediate_output, dattention_output, grads = self.output.backward(dout, output_cache)
        d, g = self.intermediate.backward(dintermediate_output, intermediate_cache, overwrite_dout=True)
        grads.update(g)
        dattention_output += d     # attention_output fed the FFN and its residual (the array is this backward's)
        del dintermediate_output, d                   # (B, T, I) and (B, T, H) not held through the attention
        dx, g = self.attention.backward(dattention_output, attention_cache, dprobs, record)
        grads.update(g)
        return dx, grads


class LayerRecompute:
    """What a checkpointed layer keeps from its forward: the call, to run again in the backward."""

    def __init__(self, layer, args, kwargs):
        state = layer.state
        self.layer, self.args, self.kwargs = layer, args, kwargs
        self.step_seed, self.batch_offset = state.step_seed, state.call.batch_offset     # its dropout masks' keys

    def cache(self):
        """The layer's cache, from its forward run again with the same inputs and dropout keys: its
        batch_offset in this thread's call options, its step seed in the state (only when changed
        since, i.e. after another forward)."""
        state = self.layer.state
        seed_now = state.step_seed
        if seed_now != self.step_seed:
            state.step_seed = self.step_seed
        try:
            with state.call.setting(batch_offset=self.batch_offset):
                return self.layer.forward(*self.args, **self.kwargs)[2]
        finally:
            if state.step_seed != seed_now:
                state.step_seed = seed_now


class BertEncoder(Module):
    """L BertLayers in sequence, parameters under `encoder.layer.<i>.`."""

    # What a user sets on a built encoder (docs/long_sequences.md), checked when set (npbert/settings.py).
    SETTINGS = {"attention_tiles_from": POSITIVE_INT_OR_NONE, "gradient_checkpointing": BOOL}

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.gradient_checkpointing = False       # transformers' flag: model.gradient_checkpointing_enable()
        self.layer = ModuleList(state, prefix + "layer.", [state.module_class(BertLayer)(state, f"{prefix}layer.{i}.")
                                                           for i in range(self.config.num_hidden_layers)])
        self.attention_tiles_from = TILES_FROM    # the fast path: attention in tiles from this many tokens on

    @property
    def attention_tiles_from(self):
        """The fast path runs a layer's attention in tiles (npbert/fast/tiled_attention.py) for
        sequences of at least this many tokens, when no one reads its probabilities; None: never.
        Each layer's self-attention holds the value (FastBertSelfAttention reads it)."""
        return self.layer[0].attention.self.attention_tiles_from if len(self.layer) else None

    @attention_tiles_from.setter
    def attention_tiles_from(self, value):
        for layer in self.layer:
            layer.attention.self.attention_tiles_from = value

    def forward(self, hidden_states, attention_mask=None, head_mask=None,
                output_hidden_states=False, output_attentions=False, records=None, read_rows=None):
        """hidden_states: (B, T, H); head_mask: (L, N) or None; records: None or L dicts to fill
        with each layer's intermediates; read_rows = (a, b): the only rows of the last hidden state
        anyone reads (a head reading the [CLS] row alone), so that on the fast path, in eval and
        when nothing else reads the last layer's other rows, it computes rows [a, b) only, and
        the returned last hidden state is NaN in the others (as nanoGPT's `x[:, [-1], :]` at
        generation).
        Returns (last (B, T, H), all_hidden_states (L+1 arrays) or None, all_attentions
        (L arrays) or None, caches); the two tuples are collected only when asked for.

        On the fast path a batch of B >= 2 rows runs as two halves side by side (halves.py), each
        through this same loop (forward_layers)."""
        if read_rows is not None and (self.state.path != "fast" or output_hidden_states or records is not None
                                      or self.training):
            read_rows = None                          # (the reference path computes every row: the plain formula)
        if self.state.path == "fast" and hidden_states.shape[0] >= 2:
            return forward_in_halves(self, hidden_states, attention_mask, head_mask, output_hidden_states,
                                     output_attentions, records, read_rows)
        return self.forward_layers(hidden_states, attention_mask, head_mask, output_hidden_states,
                                   output_attentions, records, read_rows)

    def forward_layers(self, hidden_states, attention_mask=None, head_mask=None,
                       output_hidden_states=False, output_attentions=False, records=None, read_rows=None):
        """forward's loop over the layers, on the rows given (forward's arguments)."""
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        caches = LayerCaches()
        probs_read = output_attentions or records is not None     # every query row's probabilities are read
        L = len(self.layer)
        for i, layer_module in enumerate(self.layer):
            layer_head_mask = head_mask[i] if head_mask is not None else None
            query_rows = read_rows if i == L - 1 else None
            args = (hidden_states, attention_mask, layer_head_mask, None if records is None else records[i],
                    probs_read, query_rows)
            layer_output, probs, cache = layer_module.forward(*args)
            caches.append(LayerRecompute(layer_module, args, {}) if self._checkpointing(records) else cache)
            del cache
            if query_rows is not None:                # rows [a, b) of (B, T, H); nothing reads the others
                B, T, H = hidden_states.shape
                hidden_states = np.full((B, T, H), np.nan, dtype=layer_output.dtype)
                hidden_states[:, query_rows[0]:query_rows[1]] = layer_output
                caches.read_rows = query_rows
            else:
                hidden_states = layer_output
            del layer_output
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            if output_attentions:
                all_attentions = all_attentions + (probs,)
            del probs                                 # not held while the next layer runs
        return hidden_states, all_hidden_states, all_attentions, caches

    def _checkpointing(self, records):
        """True when this forward keeps each layer's call instead of its activations: checkpointing on,
        in training, with a backward to come, and no intermediates asked for."""
        return (self.gradient_checkpointing and self.training and self.state.call.keep_caches and records is None)

    def backward(self, dout, caches, dhidden_states=None, dattentions=None, stop=0, records=None):
        """dout: (B, T, H) gradient of the last hidden state (zeros if it had none); dhidden_states: L+1
        optional gradients of every hidden state; dattentions: L optional gradients of the
        attention probabilities; records: None or L dicts to fill with layer i's gradients: its
        output's ("layer_output", the whole gradient of hidden state i+1), its attention
        probabilities' and its head-mask values'.  Returns (d embedding_output (B, T, H), grads).

        stop > 0: layers below `stop` hold only frozen parameters and nothing below them needs a
        gradient (model.freeze), so the backward ends after layer `stop` and returns (None, grads)."""
        if isinstance(caches, HalfCaches):
            return backward_in_halves(self, dout, caches, dhidden_states, dattentions, stop, records)
        return self.backward_layers(dout, caches, dhidden_states, dattentions, stop, records)

    def backward_layers(self, dout, caches, dhidden_states=None, dattentions=None, stop=0, records=None):
        """backward's loop over the layers (backward's arguments), for caches of forward_layers."""
        grads = {}
        dx = dout
        L = len(self.layer)
        for i in reversed(range(stop, L)):
            if dhidden_states is not None and dhidden_states[i + 1] is not None:
                dx = dx + dhidden_states[i + 1]       # hidden state i+1 is also an output
            dprobs = None if dattentions is None else dattentions[i]
            record = None if records is None else records[i]
            if record is not None:
                record["layer_output"] = dx           # (B, T, H); the layers' backward does not change it
            if i == L - 1 and caches.read_rows is not None:    # the last layer made rows [a, b) only
                dx = np.ascontiguousarray(dx[:, caches.read_rows[0]:caches.read_rows[1]])
            cache = caches[i].cache() if isinstance(caches[i], LayerRecompute) else caches[i]
            if self.state.call.release_caches:
                caches[i] = None                      # (freed with this layer; kept for retain_graph)
            dx, g = self.layer[i].backward(dx, cache, dprobs, record)
            del cache
            grads.update(g)
        if stop > 0:
            return None, grads
        if dhidden_states is not None and dhidden_states[0] is not None:
            dx = dx + dhidden_states[0]
        return dx, grads


class LayerCaches(list):
    """The L layers' caches of one forward_layers run; read_rows: the rows [a, b) its last layer
    computed alone (None: every row)."""

    read_rows = None
