"""BertModel: embeddings -> encoder -> pooler, with the checks on its inputs (the ids, types
and positions are checked by BertEmbeddings.prepare_inputs, the masks here).

    B = batch, T = sequence length, H = hidden size, N = heads, L = layers,
    V = vocab size, P = max position embeddings, Y = type vocab size
"""
import numpy as np

from npbert.ops.attention_mask import get_extended_attention_mask

from .embeddings import BertEmbeddings
from .encoder import BertEncoder
from .outputs import BaseModelOutputWithPoolingAndCrossAttentions, IntermediateGrads, Intermediates
from .pooler import BertPooler
from .pretrained import BertPreTrainedModel


class BertModel(BertPreTrainedModel):
    """transformers' BertModel.  Parameters: `embeddings.*`, `encoder.layer.<i>.*`, `pooler.*`."""

    attribution_targets = {"model": "last_hidden_state"}    # U (B, T, H): F = sum(last_hidden_state * U)

    def __init__(self, config, add_pooling_layer=True, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.embeddings = BertEmbeddings(self.state, self.prefix + "embeddings.")
        self.encoder = self.state.module_class(BertEncoder)(self.state, self.prefix + "encoder.")
        self.pooler = BertPooler(self.state, self.prefix + "pooler.") if add_pooling_layer else None
        self.post_init()

    # ---- inputs ---------------------------------------------------------------------
    def _prepare_inputs(self, input_ids, attention_mask, token_type_ids, position_ids, head_mask, inputs_embeds):
        """Check every input and fill in the defaults.  Returns (ids, types, positions,
        inputs_embeds, additive mask, head_mask (L, N) or None)."""
        input_ids, token_type_ids, position_ids, inputs_embeds = self.embeddings.prepare_inputs(
            input_ids, token_type_ids, position_ids, inputs_embeds)
        B, T = token_type_ids.shape
        mask = self._extended_attention_mask(attention_mask, B, T)
        if head_mask is not None:
            head_mask = self._check_head_mask(head_mask)
        return input_ids, token_type_ids, position_ids, inputs_embeds, mask, head_mask

    def _extended_attention_mask(self, attention_mask, B, T):
        """1/0 mask (B, T) or (B, T, T) -> additive (B, 1, 1, T) or (B, 1, T, T), 0 where attended and
        finfo(dtype).min where masked, as transformers; a decoder also masks the future."""
        return get_extended_attention_mask(attention_mask, (B, T), self.state.dtype, self.config.is_decoder)

    def get_extended_attention_mask(self, attention_mask, input_shape, dtype=None):
        """transformers 4.x's method: the additive mask this model's layers receive for a 1/0
        `attention_mask` of inputs of `input_shape` (B, T), in the model's dtype unless given."""
        return get_extended_attention_mask(attention_mask, tuple(input_shape)[:2],
                                           self.state.dtype if dtype is None else dtype, self.config.is_decoder)

    def _check_head_mask(self, head_mask):
        """(N,) or (L, N) -> (L, N) in the model's dtype."""
        L, N = self.config.num_hidden_layers, self.config.num_attention_heads
        hm = np.asarray(head_mask, dtype=self.state.dtype)
        if hm.shape == (N,):
            hm = np.broadcast_to(hm, (L, N))
        elif hm.shape != (L, N):
            raise ValueError(f"head_mask must have shape (num_heads,) = ({N},) or (num_layers, num_heads) = "
                             f"({L}, {N}), got {hm.shape}")
        return hm

    # ---- forward / backward -----------------------------------------------------------
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                head_mask=None, inputs_embeds=None, output_hidden_states=False, output_attentions=False, *,
                read_rows=None):
        """input_ids: (B, T) ints, or inputs_embeds: (B, T, H).  Returns (output, cache) with
        output.last_hidden_state (B, T, H), output.pooler_output (B, H), and with the flags
        output.hidden_states (L+1 arrays (B, T, H)) and output.attentions (L arrays (B, N, T, T)).
        read_rows = (a, b) (npbert's own; a head that reads the [CLS] row alone passes (0, 1)): the
        only rows of last_hidden_state the caller reads; in eval the last layer may compute those
        alone, and the other rows are NaN (BertEncoder.forward)."""
        ids, types, positions, inputs_embeds, mask, head_mask = self._prepare_inputs(
            input_ids, attention_mask, token_type_ids, position_ids, head_mask, inputs_embeds)
        replaced = self.state.call.replaced_outputs.get(self.prefix + "embeddings")
        if replaced is None:
            embedding_output, embeddings_cache = self.embeddings.forward(ids, types, positions, inputs_embeds)
        else:                               # run from a given embeddings output (npbert.interpret)
            embedding_output, embeddings_cache = self._check_replaced_embeddings(replaced, types.shape), None
        kept = self.state.call.intermediates      # a list in model(..., output_intermediates=True): pretrained.py
        records = [{} for _ in self.encoder.layer] if kept is not None else None
        sequence_output, hidden_states, attentions, encoder_cache = self.encoder.forward(
            embedding_output, mask, head_mask, output_hidden_states, output_attentions, records=records,
            read_rows=read_rows)                                                   # (B, T, H)
        if records is not None:
            kept.append(Intermediates.from_records(embedding_output, records))
        pooled_output, pooler_cache = None, None
        if self.pooler is not None:
            pooled_output, pooler_cache = self.pooler.forward(sequence_output)     # (B, H)
        output = BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=sequence_output,
            pooler_output=pooled_output,
            hidden_states=hidden_states,
            attentions=attentions)
        cache = {"embeddings": embeddings_cache, "encoder": encoder_cache, "pooler": pooler_cache,
                 "shape": sequence_output.shape, "hidden_states": output_hidden_states,
                 "attentions": output_attentions}
        return output, cache

    def _check_replaced_embeddings(self, value, shape):
        """The array the embeddings' output is replaced by: (B, T, H) of the inputs, the model's dtype."""
        value = np.asarray(value)
        expected = tuple(shape) + (self.config.hidden_size,)
        if value.shape != expected:
            raise ValueError(f"the replacement for {self.prefix}embeddings' output has shape {value.shape}, "
                             f"the inputs need {expected}")
        if value.dtype != self.state.dtype:
            raise TypeError(f"the replacement for {self.prefix}embeddings' output has dtype {value.dtype}, the "
                            f"model computes in {np.dtype(self.state.dtype).name}")
        return value

    def _backward(self, cache, last_hidden_state=None, pooler_output=None, hidden_states=None, attentions=None):
        """Upstream gradients by output name -> (grads, d inputs_embeds (B, T, H)).
        With model.backward(..., return_intermediate_grads=True) (pretrained.py) it also appends the
        gradients of the hidden states, attention probabilities and head-mask values to that
        call's list, self.state.call.intermediate_grads."""
        B, T, H = cache["shape"]
        L, N = self.config.num_hidden_layers, self.config.num_attention_heads
        dtype = self.state.dtype
        if all(u is None for u in (last_hidden_state, pooler_output, hidden_states, attentions)):
            raise ValueError("backward() needs the upstream gradient of at least one output, by name: "
                             "last_hidden_state=..., pooler_output=..., hidden_states=[...], attentions=[...]")
        if pooler_output is not None and self.pooler is None:
            raise ValueError("a gradient for pooler_output was given, but this model has no pooler")
        if hidden_states is not None and not cache["hidden_states"]:
            raise ValueError("a gradient for hidden_states was given, but the forward had output_hidden_states=False")
        if attentions is not None and not cache["attentions"]:
            raise ValueError("a gradient for attentions was given, but the forward had output_attentions=False")
        dlast = _upstream("last_hidden_state", last_hidden_state, (B, T, H), dtype)
        dhidden = _upstream_list("hidden_states", hidden_states, L + 1, (B, T, H), dtype)
        dattn = _upstream_list("attentions", attentions, L, (B, N, T, T), dtype)
        # With frozen parameters (model.freeze) the backward ends at the lowest layer that has a
        # trainable parameter: nothing below it needs a gradient (unless the intermediates' do).
        kept = self.state.call.intermediate_grads          # a list when the backward returns them
        records = [{} for _ in self.encoder.layer] if kept is not None else None
        stop = 0 if records is not None else self._lowest_layer_needing_grad()
        if stop == L and (self.pooler is None or not self.pooler.trainable("dense.weight")
                          and not self.pooler.trainable("dense.bias")):
            return {}, None                                  # the whole base model is frozen
        dlast = np.zeros((B, T, H), dtype=dtype) if dlast is None else dlast.copy()
        grads = {}
        dpooled = None
        if self.pooler is not None:
            dpooled = _upstream("pooler_output", pooler_output, (B, H), dtype)
            if dpooled is not None:
                dseq, grads = self.pooler.backward(dpooled, cache["pooler"])
                dlast += dseq
        if stop == L:
            return grads, None                               # only the pooler is trainable
        dembedding_output, g = self.encoder.backward(dlast, cache["encoder"], dhidden, dattn, stop=stop,
                                                     records=records)
        grads.update(g)
        if records is not None:
            if self.pooler is not None and dpooled is None:
                dpooled = np.zeros((B, H), dtype=dtype)       # the pooled output fed nothing differentiated
            kept.append(IntermediateGrads.from_records(dembedding_output, records, dpooled))
        if dembedding_output is None:                    # everything below is frozen
            return grads, None
        if cache["embeddings"] is None:                  # the embeddings' output was replaced (npbert.interpret):
            return grads, dembedding_output              # its gradient
        dinputs_embeds, g = self.embeddings.backward(dembedding_output, cache["embeddings"])
        grads.update(g)
        return grads, dinputs_embeds

    def _lowest_layer_needing_grad(self):
        """0 when the embeddings (or model.inputs_embeds_grad) need a gradient, else the lowest
        encoder layer holding a trainable parameter (L when none does)."""
        frozen = self.state.frozen
        if not frozen or self.state.need_inputs_embeds_grad:
            return 0
        trainable = [n for n in self.state.params if n.startswith(self.prefix) and n not in frozen]
        if any(n.startswith(self.prefix + "embeddings.") for n in trainable):
            return 0
        L = self.config.num_hidden_layers
        layers = [int(n[len(self.prefix + "encoder.layer."):].split(".")[0])
                  for n in trainable if n.startswith(self.prefix + "encoder.layer.")]
        return min(layers, default=L)


def _upstream(name, value, shape, dtype):
    """Check one upstream gradient: an array of the output's shape, cast to the model dtype."""
    if value is None:
        return None
    a = np.asarray(value)
    if a.shape != tuple(shape):
        raise ValueError(f"the gradient for {name} has shape {a.shape}, the output has shape {tuple(shape)}")
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"the gradient for {name} must be floating point, got {a.dtype}")
    return a.astype(dtype, copy=False)


def _upstream_list(name, values, n, shape, dtype):
    if values is None:
        return None
    if len(values) != n:
        raise ValueError(f"the gradient for {name} must be a sequence of {n} arrays (or None), got {len(values)}")
    return [_upstream(f"{name}[{i}]", v, shape, dtype) for i, v in enumerate(values)]
