"""BertEmbeddings: word + position + token_type embeddings, LayerNorm, dropout.

    B = batch, T = sequence length, H = hidden size,
    V = vocab size, P = max position embeddings, Y = type vocab size
"""
import numpy as np

from npbert.ops.dropout import dropout_backward, dropout_forward
from npbert.ops.embedding import embedding_backward, embedding_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward

from .module import Module


class BertEmbeddings(Module):
    """transformers' `BertEmbeddings`; parameters under `embeddings.`."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        c = self.config
        self.add_param("word_embeddings.weight", (c.vocab_size, c.hidden_size), ("embedding", c.pad_token_id))
        self.add_param("position_embeddings.weight", (c.max_position_embeddings, c.hidden_size), ("embedding", None))
        self.add_param("token_type_embeddings.weight", (c.type_vocab_size, c.hidden_size), ("embedding", None))
        self.add_layer_norm("LayerNorm", c.hidden_size)

    def __call__(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        """embeddings(input_ids) as transformers' BertEmbeddings: token types default to 0 and
        positions to 0..T-1.  Returns (B, T, H)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("BertEmbeddings: give exactly one of input_ids and inputs_embeds")
        shape = np.shape(input_ids) if inputs_embeds is None else np.shape(inputs_embeds)[:2]
        if len(shape) != 2:
            raise ValueError(f"BertEmbeddings: input_ids must be (B, T), got shape {shape}")
        B, T = shape
        if token_type_ids is None:
            token_type_ids = np.zeros((B, T), dtype=np.int64)
        if position_ids is None:
            position_ids = np.broadcast_to(np.arange(T), (B, T))
        ids = None if input_ids is None else np.asarray(input_ids)
        for name, a, n in (("input_ids", ids, self.config.vocab_size),
                           ("token_type_ids", np.asarray(token_type_ids), self.config.type_vocab_size),
                           ("position_ids", np.asarray(position_ids), self.config.max_position_embeddings)):
            if a is not None and a.size and (a.min() < 0 or a.max() >= n):
                raise ValueError(f"BertEmbeddings: {name} must be in [0, {n}), got values in "
                                 f"[{a.min()}, {a.max()}]")
        return self.forward(ids, np.asarray(token_type_ids), np.asarray(position_ids), inputs_embeds)[0]

    def forward(self, input_ids, token_type_ids, position_ids, inputs_embeds=None):
        """input_ids, token_type_ids, position_ids: (B, T) ints (already checked);
        inputs_embeds: (B, T, H) used instead of the word embeddings when given.
        Returns ((B, T, H) embeddings, cache)."""
        cache = {}
        if inputs_embeds is None:
            inputs_embeds, cache["word"] = embedding_forward(input_ids, self.p("word_embeddings.weight"))   # (B, T, H)
        token_type_embeddings, cache["type"] = embedding_forward(token_type_ids, self.p("token_type_embeddings.weight"))
        embeddings = inputs_embeds + token_type_embeddings                                   # (B, T, H)
        position_embeddings, cache["pos"] = embedding_forward(position_ids, self.p("position_embeddings.weight"))
        embeddings += position_embeddings                                                    # (B, T, H)
        embeddings, cache["ln"] = layer_norm_forward(embeddings, self.p("LayerNorm.weight"),
                                                     self.p("LayerNorm.bias"), self.config.layer_norm_eps)
        embeddings, cache["drop"] = dropout_forward(embeddings, self.config.hidden_dropout_prob,
                                                    self.state.rng, self.training)
        return embeddings, cache

    def backward(self, dout, cache):
        """dout: (B, T, H).  Returns (d inputs_embeds (B, T, H), grads).

        The three embeddings were summed, so each receives the same gradient `de`.
        The word embedding gradient is absent when the forward was given inputs_embeds.
        """
        grads = {}
        de = dropout_backward(dout, cache["drop"])
        de, g = layer_norm_backward(de, cache["ln"])
        grads.update(self.prefixed("LayerNorm", g))
        # embeddings = inputs_embeds + token_type_embeddings + position_embeddings
        # (a frozen table's scatter-add is skipped: model.freeze)
        if "word" in cache and self.trainable("word_embeddings.weight"):
            grads[self.prefix + "word_embeddings.weight"] = embedding_backward(de, cache["word"], self.config.pad_token_id)
        if self.trainable("position_embeddings.weight"):
            grads[self.prefix + "position_embeddings.weight"] = embedding_backward(de, cache["pos"])
        if self.trainable("token_type_embeddings.weight"):
            grads[self.prefix + "token_type_embeddings.weight"] = embedding_backward(de, cache["type"])
        self.release(cache)
        return de, grads
