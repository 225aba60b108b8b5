"""One piece of a model at a time, forward and backward: to test your own BERT layer against
npbert's, and to find which layer a bug is in.

    get_extended_attention_mask(attention_mask, input_shape=None, dtype=np.float64, is_decoder=False)
        1/0 mask (B, T) or (B, F, T) -> the additive mask (B, 1, 1, T) or (B, 1, F, T) the layers
        receive: 0 where attended, finfo(dtype).min where masked (transformers 4.x's name)
    layer_state_dict(model, i)                    {name: array} of encoder layer i, keyed as
                                                  transformers' BertLayer.state_dict()
    layer_forward(model, i, hidden_states, attention_mask=None, head_mask=None)
                                                  (B, T, H) -> (layer_output (B, T, H), cache)
    layer_backward(dout, cache, dprobs=None)      -> (dhidden_states (B, T, H), grads keyed as
                                                  layer_state_dict)
    embeddings_forward(model, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None)
                                                  -> (embedding_output (B, T, H), cache)
    embeddings_backward(dout, cache)              -> (dinputs_embeds (B, T, H), grads keyed as
                                                  BertEmbeddings.state_dict(): "word_embeddings.weight", ...)

`model` is a BertModel or any BertFor* (its `bert`).  Each function runs the model's own module
(`model.encoder.layer[i]`, `model.embeddings`) on its current parameters, in the model's dtype
and mode: call `model.eval()` first to compare without dropout.  The caches are plain dicts:
cache["probs"] holds layer i's attention probabilities (B, N, F, T) as used.

(npbert/interpret/layer_runs.py is another thing: it runs the whole model from a named layer's
output, for attribution, as captum's layer methods do.)
"""
import numpy as np

from npbert.ops.attention_mask import get_extended_attention_mask  # noqa: F401  (public here too)

__all__ = ["get_extended_attention_mask", "layer_state_dict", "layer_forward", "layer_backward",
           "embeddings_forward", "embeddings_backward"]


def _base(model):
    """The BertModel inside `model` (itself, or a head's `bert`)."""
    base = getattr(model, "bert", model)
    if not (hasattr(base, "encoder") and hasattr(base, "embeddings")):
        raise TypeError(f"expected a BertModel or a BertFor* model, got {type(model).__name__}")
    return base


def _layer(model, i):
    layers = _base(model).encoder.layer
    if not isinstance(i, (int, np.integer)) or not 0 <= i < len(layers):
        raise IndexError(f"layer index {i!r} out of range: the model has {len(layers)} layers")
    return layers[int(i)]


def layer_state_dict(model, i):
    """{name: array} of encoder layer i, keyed as transformers' `BertLayer.state_dict()`
    ("attention.self.query.weight", ...): the model's own arrays (views), not copies."""
    prefix = _layer(model, i).prefix
    return {k[len(prefix):]: v for k, v in _base(model).state.params.items() if k.startswith(prefix)}


def layer_forward(model, i, hidden_states, attention_mask=None, head_mask=None):
    """Encoder layer i of `model` on its own, as transformers' `model.encoder.layer[i](...)`.

    Args:
        hidden_states: (B, T, H) in the model's dtype.
        attention_mask: the additive mask (get_extended_attention_mask of a 1/0 mask), 4-D and
            broadcastable to (B, N, F, T), or None.  A 1/0 mask (2-D, 3-D) is refused: it would
            broadcast silently into the wrong axes.
        head_mask: (N,) multiplying each head's probabilities, or None.
    Returns:
        (layer_output (B, T, H), cache); cache["probs"]: the probabilities (B, N, F, T).
    """
    layer = _layer(model, i)
    state = _base(model).state
    config = state.config
    x = np.asarray(hidden_states)
    if x.ndim != 3 or x.shape[2] != config.hidden_size:
        raise ValueError(f"hidden_states must be (batch, seq, hidden_size={config.hidden_size}), got {x.shape}")
    if x.dtype != state.dtype:
        raise TypeError(f"hidden_states has dtype {x.dtype}, the model computes in {np.dtype(state.dtype).name}")
    if attention_mask is not None:
        attention_mask = np.asarray(attention_mask)
        if attention_mask.ndim != 4:
            raise ValueError(f"layer_forward takes the additive 4-D mask (B, 1, 1, T), got shape "
                             f"{attention_mask.shape}: pass get_extended_attention_mask(attention_mask)")
        B, T = x.shape[:2]
        try:
            np.broadcast_shapes(attention_mask.shape, (B, config.num_attention_heads, T, T))
        except ValueError:
            raise ValueError(f"attention_mask of shape {attention_mask.shape} does not broadcast to "
                             f"(B, N, F, T) = {(B, config.num_attention_heads, T, T)}") from None
    if head_mask is not None:
        head_mask = np.asarray(head_mask, dtype=state.dtype)
        if head_mask.shape != (config.num_attention_heads,):
            raise ValueError(f"head_mask must be (num_heads,) = ({config.num_attention_heads},), got {head_mask.shape}")
    out, probs, cache = layer.forward(x, attention_mask, head_mask)
    return out, {"module": layer, "layer": cache, "probs": probs}


def layer_backward(dout, cache, dprobs=None):
    """The backward of layer_forward: dout (B, T, H) -> (dhidden_states (B, T, H), grads keyed
    as layer_state_dict).  dprobs: an optional upstream gradient of cache["probs"]."""
    layer = cache["module"]
    dx, grads = layer.backward(np.asarray(dout, dtype=layer.state.dtype), cache["layer"], dprobs)
    return dx, {k[len(layer.prefix):]: v for k, v in grads.items()}


def embeddings_forward(model, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
    """The embeddings of `model` on their own: LayerNorm(word + position + token type), dropout
    in train mode.  Inputs are checked and defaulted as the model does (positions 0..T-1, types 0).
    Returns (embedding_output (B, T, H), cache)."""
    embeddings = _base(model).embeddings
    out, cache = embeddings.forward(*embeddings.prepare_inputs(input_ids, token_type_ids, position_ids, inputs_embeds))
    return out, {"module": embeddings, "embeddings": cache}


def embeddings_backward(dout, cache):
    """The backward of embeddings_forward: (dinputs_embeds (B, T, H), grads keyed as
    BertEmbeddings' state dict: "word_embeddings.weight", ...).  The pad_token_id row of the word
    table gets no gradient (torch's padding_idx); no word table gradient after inputs_embeds."""
    embeddings = cache["module"]
    dx, grads = embeddings.backward(np.asarray(dout, dtype=embeddings.state.dtype), cache["embeddings"])
    return dx, {k[len(embeddings.prefix):]: v for k, v in grads.items()}
