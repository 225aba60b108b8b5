"""The head modules under `cls.`, as transformers' classes: BertPredictionHeadTransform,
BertLMPredictionHead, BertOnlyMLMHead, BertOnlyNSPHead, BertPreTrainingHeads.

    B = batch, T = sequence length, H = hidden size, V = vocab size
"""
from ..leaf_modules import LayerNorm, Linear, activation
from ..module import Module


class BertPredictionHeadTransform(Module):
    """dense -> hidden_act -> LayerNorm       (..., H) -> (..., H)"""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        H = self.config.hidden_size
        self.dense = Linear(state, prefix + "dense.", H, H)
        self.transform_act_fn = activation(state, prefix + "transform_act_fn.", self.config.hidden_act)
        self.LayerNorm = LayerNorm(state, prefix + "LayerNorm.", H, self.config.layer_norm_eps)

    def forward(self, hidden_states):
        h, dense_cache = self.dense.forward(hidden_states)                        # (B, T, H)
        h, act_cache = self.transform_act_fn.forward(h)                           # (B, T, H)
        h, ln_cache = self.LayerNorm.forward(h)                                   # (B, T, H)
        return h, (dense_cache, act_cache, ln_cache)

    def backward(self, dout, cache):
        dense_cache, act_cache, ln_cache = cache
        dh, grads = self.LayerNorm.backward(dout, ln_cache)
        dh, _ = self.transform_act_fn.backward(dh, act_cache)
        dx, g_dense = self.dense.backward(dh, dense_cache)
        return dx, {**g_dense, **grads}


class BertLMPredictionHead(Module):
    """transform, then the decoder: logits = h @ W_word.T + bias        (B, T, H) -> (B, T, V)

    The decoder has no weight of its own: `self.decoder` is an nn.Linear (V, H) tied to
    `decoder_weight` (the word embeddings) and to `cls.predictions.bias` (transformers ties
    `cls.predictions.decoder.bias` to it): its `.weight` is the word embeddings' Parameter and
    its `.bias` is `self.bias`, the same objects.  Its backward reports the decoder weight's
    gradient under the decoder's own name, `<prefix>decoder.weight`; the model adds it to the
    word embeddings' (_sum_tied_decoder_gradient).
    """

    def __init__(self, state, prefix, decoder_weight):
        super().__init__(state, prefix)
        # registered first: torch lists a module's own parameters before its children's
        self.add_param("bias", (self.config.vocab_size,), "zeros")                  # (V,)
        self.transform = BertPredictionHeadTransform(state, prefix + "transform.")
        H, V = self.config.hidden_size, self.config.vocab_size
        self.decoder = Linear(state, prefix + "decoder.", H, V, tied_to=(decoder_weight, prefix + "bias"),
                              grad_name={"weight": prefix + "decoder.weight"})

    @property
    def bias(self):
        """The decoder's bias (V,), `cls.predictions.bias` (transformers' nn.Parameter)."""
        return self.state.params[self.prefix + "bias"]

    def forward(self, hidden_states):
        h, transform_cache = self.transform.forward(hidden_states)                   # (B, T, H)
        logits, decoder_cache = self.decoder.forward(h)                              # (B, T, V) = h @ W.T + b
        return logits, (transform_cache, decoder_cache)

    def backward(self, dlogits, cache):
        transform_cache, decoder_cache = cache
        # dW (V, H) under "<prefix>decoder.weight": one of W's two uses; db (V,) under "<prefix>bias"
        dh, grads = self.decoder.backward(dlogits, decoder_cache)                    # (B, T, H)
        dx, g = self.transform.backward(dh, transform_cache)
        grads.update(g)
        return dx, grads


class BertOnlyMLMHead(Module):
    """cls.predictions: (B, T, H) -> (B, T, V)"""

    def __init__(self, state, prefix, decoder_weight):
        super().__init__(state, prefix)
        self.predictions = BertLMPredictionHead(state, prefix + "predictions.", decoder_weight)

    def forward(self, sequence_output):
        return self.predictions.forward(sequence_output)

    def backward(self, dprediction_scores, cache):
        return self.predictions.backward(dprediction_scores, cache)


class BertOnlyNSPHead(Module):
    """cls.seq_relationship: pooled (B, H) -> (B, 2), 0 = "B follows A", 1 = "B is random"."""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        self.seq_relationship = Linear(state, prefix + "seq_relationship.", self.config.hidden_size, 2)

    def forward(self, pooled_output):
        return self.seq_relationship.forward(pooled_output)                          # (B, 2)

    def backward(self, dscore, cache):
        return self.seq_relationship.backward(dscore, cache)                         # (B, H), grads


class BertPreTrainingHeads(Module):
    """cls.predictions (B, T, H) -> (B, T, V) and cls.seq_relationship (B, H) -> (B, 2)."""

    def __init__(self, state, prefix, decoder_weight):
        super().__init__(state, prefix)
        self.predictions = BertLMPredictionHead(state, prefix + "predictions.", decoder_weight)
        self.seq_relationship = Linear(state, prefix + "seq_relationship.", self.config.hidden_size, 2)

    def forward(self, sequence_output, pooled_output):
        prediction_scores, predictions_cache = self.predictions.forward(sequence_output)           # (B, T, V)
        seq_relationship_score, nsp_cache = self.seq_relationship.forward(pooled_output)          # (B, 2)
        return prediction_scores, seq_relationship_score, (predictions_cache, nsp_cache)

    def backward(self, dprediction_scores, dseq_relationship_score, cache):
        """Returns (d sequence_output (B, T, H), d pooled_output (B, H), grads)."""
        predictions_cache, nsp_cache = cache
        dsequence, grads = self.predictions.backward(dprediction_scores, predictions_cache)
        dpooled, g = self.seq_relationship.backward(dseq_relationship_score, nsp_cache)
        grads.update(g)
        return dsequence, dpooled, grads
