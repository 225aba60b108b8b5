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
from npbert.settings import BOOL, POSITIVE_INT_OR_NONE

from .attention import BertAttention
from .feed_forward import BertIntermediate, BertOutput
from .module import Module, ModuleList


TILES_FROM = 1024   # tokens: the fast path's attention in tiles from this length on (docs/long_sequences.md)


class BertLayer(Module):
    """attention_output = BertAttention(x); out = BertOutput(BertIntermediate(attention_output), attention_output)"""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.attention = state.module_class(BertAttention)(state, prefix + "attention.")
        self.intermediate = state.module_class(BertIntermediate)(state, prefix + "intermediate.")
        self.output = state.module_class(BertOutput)(state, prefix + "output.")

    def forward(self, hidden_states, attention_mask=None, head_mask=None, record=None):
        """(B, T, H) -> ((B, T, H), probs (B, N, T, T), cache).  record: an optional dict that gets
        the attention's intermediates, attention_output, intermediate_output and layer_output."""
        attention_output, probs, attention_cache = self.attention.forward(hidden_states, attention_mask, head_mask,
                                                                          record)
        intermediate_output, intermediate_cache = self.intermediate.forward(attention_output)   # (B, T, I)
        layer_output, output_cache = self.output.forward(intermediate_output, attention_output)  # (B, T, H)
        if record is not None:
            record.update(attention_output=attention_output, intermediate_output=intermediate_output,
                          layer_output=layer_output)
        return layer_output, probs, (attention_cache, intermediate_cache, output_cache)

    def backward(self, dout, cache, dprobs=None, record=None):
        attention_cache, intermediate_cache, output_cache = cache
        dintermediate_output, dattention_output, grads = self.output.backward(dout, output_cache)
        d, g = self.intermediate.backward(dintermediate_output, intermediate_cache)
        grads.update(g)
        dattention_output = dattention_output + d     # attention_output fed the FFN and its residual
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
        """The layer's cache, from its forward run again with the same inputs and dropout keys."""
        state = self.layer.state
        saved = state.step_seed, state.call.batch_offset
        if saved != (self.step_seed, self.batch_offset):       # (only when changed since: the halves' threads)
            state.step_seed, state.call.batch_offset = self.step_seed, self.batch_offset
        try:
            return self.layer.forward(*self.args, **self.kwargs)[2]
        finally:
            if saved != (state.step_seed, state.call.batch_offset):
                state.step_seed, state.call.batch_offset = saved


class BertEncoder(Module):
    """L BertLayers in sequence, parameters under `encoder.layer.<i>.`."""

    # What a user sets on a built encoder (docs/long_sequences.md), checked when set (npbert/settings.py).
    SETTINGS = {"attention_tiles_from": POSITIVE_INT_OR_NONE, "gradient_checkpointing": BOOL}

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.gradient_checkpointing = False       # transformers' flag: model.gradient_checkpointing_enable()
        self.attention_tiles_from = TILES_FROM    # the fast path: attention in tiles from this many tokens on
        self.layer = ModuleList(state, prefix + "layer.", [state.module_class(BertLayer)(state, f"{prefix}layer.{i}.")
                                                           for i in range(self.config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None, head_mask=None,
                output_hidden_states=False, output_attentions=False, records=None):
        """hidden_states: (B, T, H); head_mask: (L, N) or None; records: None or L dicts to fill
        with each layer's intermediates.
        Returns (last (B, T, H), all_hidden_states (L+1 arrays) or None, all_attentions
        (L arrays) or None, caches); the two tuples are collected only when asked for."""
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        caches = []
        for i, layer_module in enumerate(self.layer):
            layer_head_mask = head_mask[i] if head_mask is not None else None
            args = (hidden_states, attention_mask, layer_head_mask, None if records is None else records[i])
            hidden_states, probs, cache = layer_module.forward(*args)
            caches.append(LayerRecompute(layer_module, args, {}) if self._checkpointing(records) else cache)
            del cache
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            if output_attentions:
                all_attentions = all_attentions + (probs,)
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
        grads = {}
        dx = dout
        for i in reversed(range(stop, len(self.layer))):
            if dhidden_states is not None and dhidden_states[i + 1] is not None:
                dx = dx + dhidden_states[i + 1]       # hidden state i+1 is also an output
            dprobs = None if dattentions is None else dattentions[i]
            record = None if records is None else records[i]
            if record is not None:
                record["layer_output"] = dx           # (B, T, H); the layers' backward does not change it
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
