"""BertEmbeddings: word + position + token_type embeddings, LayerNorm, dropout.

    B = batch, T = sequence length, H = hidden size,
    V = vocab size, P = max position embeddings, Y = type vocab size
"""
import numpy as np

from .module import Module
from .leaf_modules import Dropout, Embedding, LayerNorm, as_int_array, check_range


class BertEmbeddings(Module):
    """transformers' `BertEmbeddings`; parameters under `embeddings.`."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        c = self.config
        self.word_embeddings = Embedding(state, prefix + "word_embeddings.", c.vocab_size, c.hidden_size,
                                         padding_idx=c.pad_token_id)
        self.position_embeddings = Embedding(state, prefix + "position_embeddings.", c.max_position_embeddings,
                                             c.hidden_size)
        self.token_type_embeddings = Embedding(state, prefix + "token_type_embeddings.", c.type_vocab_size,
                                               c.hidden_size)
        self.LayerNorm = LayerNorm(state, prefix + "LayerNorm.", c.hidden_size, c.layer_norm_eps)
        self.dropout = Dropout(state, prefix + "dropout.", c.hidden_dropout_prob)

    def prepare_inputs(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        """Check the inputs and fill in the defaults (token types 0, positions 0..T-1), as
        BertModel's forward does.  Returns (input_ids, token_type_ids, position_ids,
        inputs_embeds), the first three (B, T) int64 (input_ids None when inputs_embeds is given)."""
        c, dtype = self.config, self.state.dtype
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        if input_ids is not None:
            input_ids = as_int_array("input_ids", input_ids)
            if input_ids.ndim != 2:
                raise ValueError(f"input_ids must be 2-D (batch, sequence), got shape {input_ids.shape}")
            check_range("input_ids", input_ids, c.vocab_size, "vocab_size")
            B, T = input_ids.shape
        else:
            inputs_embeds = np.asarray(inputs_embeds)
            if inputs_embeds.ndim != 3 or inputs_embeds.shape[2] != c.hidden_size:
                raise ValueError(f"inputs_embeds must be (batch, sequence, hidden_size={c.hidden_size}), "
                                 f"got shape {inputs_embeds.shape}")
            if inputs_embeds.dtype != dtype:
                raise TypeError(f"inputs_embeds has dtype {inputs_embeds.dtype}, the model computes in "
                                f"{np.dtype(dtype).name}")
            B, T = inputs_embeds.shape[:2]
        if T == 0:
            raise ValueError("the sequence length is 0")

        if position_ids is None:
            if T > c.max_position_embeddings:
                raise ValueError(f"sequence length {T} is longer than max_position_embeddings="
                                 f"{c.max_position_embeddings}")
            position_ids = np.broadcast_to(np.arange(T, dtype=np.int64), (B, T))
        else:
            position_ids = as_int_array("position_ids", position_ids)
            try:
                position_ids = np.broadcast_to(position_ids, (B, T))
            except ValueError:
                raise ValueError(f"position_ids of shape {position_ids.shape} does not fit the inputs "
                                 f"(batch {B}, sequence {T})") from None
            check_range("position_ids", position_ids, c.max_position_embeddings, "max_position_embeddings")

        if token_type_ids is None:
            token_type_ids = np.zeros((B, T), dtype=np.int64)
        else:
            token_type_ids = as_int_array("token_type_ids", token_type_ids)
            if token_type_ids.shape != (B, T):
                raise ValueError(f"token_type_ids has shape {token_type_ids.shape}, the inputs are ({B}, {T})")
            check_range("token_type_ids", token_type_ids, c.type_vocab_size, "type_vocab_size")

        return input_ids, token_type_ids, position_ids, inputs_embeds

    def __call__(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        """embeddings(input_ids) as transformers' BertEmbeddings: the inputs checked and
        defaulted as BertModel does (prepare_inputs).  Returns (B, T, H)."""
        return self.forward(*self.prepare_inputs(input_ids, token_type_ids, position_ids, inputs_embeds))[0]

    def forward(self, input_ids, token_type_ids, position_ids, inputs_embeds=None):
        """input_ids, token_type_ids, position_ids: (B, T) ints (already checked);
        inputs_embeds: (B, T, H) used instead of the word embeddings when given.
        Returns ((B, T, H) embeddings, cache)."""
        cache = {}
        if inputs_embeds is None:
            inputs_embeds, cache["word"] = self.word_embeddings.forward(input_ids)            # (B, T, H)
        token_type_embeddings, cache["type"] = self.token_type_embeddings.forward(token_type_ids)   # (B, T, H)
        embeddings = inputs_embeds + token_type_embeddings                                     # (B, T, H)
        position_embeddings, cache["pos"] = self.position_embeddings.forward(position_ids)    # (B, T, H)
        embeddings += position_embeddings                                                      # (B, T, H)
        embeddings, cache["ln"] = self.LayerNorm.forward(embeddings)
        embeddings, cache["drop"] = self.dropout.forward(embeddings)
        return embeddings, cache

    def backward(self, dout, cache):
        """dout: (B, T, H).  Returns (d inputs_embeds (B, T, H), grads).

        The three embeddings were summed, so each receives the same gradient `de`.
        The word embedding gradient is absent when the forward was given inputs_embeds.
        """
        de, _ = self.dropout.backward(dout, cache["drop"])
        de, grads = self.LayerNorm.backward(de, cache["ln"])
        # embeddings = inputs_embeds + token_type_embeddings + position_embeddings
        # (a frozen table's scatter-add is skipped: model.freeze)
        if "word" in cache:
            grads.update(self.word_embeddings.backward(de, cache["word"])[1])
        grads.update(self.position_embeddings.backward(de, cache["pos"])[1])
        grads.update(self.token_type_embeddings.backward(de, cache["type"])[1])
        return de, grads
