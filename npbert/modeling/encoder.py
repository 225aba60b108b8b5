"""BertLayer (attention + feed-forward) and BertEncoder (a stack of L layers).

    B = batch, T = sequence length, H = hidden size, N = heads, L = layers
"""
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
    """L BertLayers in sequence, parameters under `encoder.layer.<i>.`."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.layer = [BertLayer(state, f"{prefix}layer.{i}.") for i in range(self.config.num_hidden_layers)]

    def forward(self, hidden_states, attention_mask=None, head_mask=None,
                output_hidden_states=False, output_attentions=False):
        """hidden_states: (B, T, H); head_mask: (L, N) or None.
        Returns (last (B, T, H), all_hidden_states (L+1 arrays) or None, all_attentions
        (L arrays) or None, cache); the two tuples are collected only when asked for."""
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
        grads = {}
        dx = dout
        for i in reversed(range(stop, len(self.layer))):
            if dhidden_states is not None and dhidden_states[i + 1] is not None:
                dx = dx + dhidden_states[i + 1]       # hidden state i+1 is also an output
            dprobs = None if dattentions is None else dattentions[i]
            dx, g = self.layer[i].backward(dx, caches[i], dprobs)
            grads.update(g)
            if self.state.release_caches:
                caches[i] = None                      # layer i's activations are no longer needed
        if stop > 0:
            return None, grads
        if dhidden_states is not None and dhidden_states[0] is not None:
            dx = dx + dhidden_states[0]
        return dx, grads
