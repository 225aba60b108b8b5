"""The head modules under `cls.`, as transformers' classes: BertPredictionHeadTransform,
BertLMPredictionHead, BertOnlyMLMHead, BertOnlyNSPHead, BertPreTrainingHeads.

    B = batch, T = sequence length, H = hidden size, V = vocab size
"""
from npbert.ops.linear import linear_input_grad, linear_param_grads

from ..module import Module
from ..leaf_modules import LayerNorm, Linear, activation


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

    The decoder has no weight of its own: it reads `decoder_weight` (the word embeddings) from
    the model's dict.  Its bias is `cls.predictions.bias` (transformers ties
    `cls.predictions.decoder.bias` to it).  backward() reports the decoder weight's gradient
    under its own name, `<prefix>decoder.weight`; the model adds it to the word embeddings'.
    `self.decoder` is that nn.Linear (V, H) as torch holds it: its `.weight` is the word
    embeddings' Parameter and its `.bias` is `self.bias`, the same objects.
    """

    def __init__(self, state, prefix, decoder_weight):
        super().__init__(state, prefix)
        # registered first: torch lists a module's own parameters before its children's
        self.add_param("bias", (self.config.vocab_size,), "zeros")                  # (V,)
        self.transform = BertPredictionHeadTransform(state, prefix + "transform.")
        self.decoder_weight = decoder_weight                                         # name of the (V, H) array
        H, V = self.config.hidden_size, self.config.vocab_size
        self.decoder = Linear(state, prefix + "decoder.", H, V, tied_to=(decoder_weight, prefix + "bias"))

    @property
    def bias(self):
        """The decoder's bias (V,), `cls.predictions.bias` (transformers' nn.Parameter)."""
        return self.state.params[self.prefix + "bias"]

    def forward(self, hidden_states):
        h, transform_cache = self.transform.forward(hidden_states)                   # (B, T, H)
        logits, decoder_cache = self.ops.linear_forward(h, self.state.arrays[self.decoder_weight],
                                                              self.p("bias"))                        # (B, T, V)
        return logits, (transform_cache, decoder_cache)

    def backward(self, dlogits, cache):
        transform_cache, decoder_cache = cache
        # in the forward: logits = h @ W.T + b
        h, weight, _ = decoder_cache
        dh = linear_input_grad(dlogits, weight, h.shape)                             # (B, T, H)
        grads = {}
        if self.decoder_weight not in self.state.frozen:                             # the (V, H) GEMM, skipped when frozen
            grads[self.prefix + "decoder.weight"] = linear_param_grads(dlogits, h, has_bias=False)["weight"]   # (V, H), one of W's two uses
        if self.trainable("bias"):
            grads[self.prefix + "bias"] = dlogits.reshape(-1, dlogits.shape[-1]).sum(axis=0)                  # (V,)
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
        return self.ops.linear_forward(pooled_output, self.p("seq_relationship.weight"),
                                             self.p("seq_relationship.bias"))

    def backward(self, dscore, cache):
        return self.linear_backward("seq_relationship", dscore, cache)


class BertPreTrainingHeads(Module):
    """cls.predictions (B, T, H) -> (B, T, V) and cls.seq_relationship (B, H) -> (B, 2)."""

    def __init__(self, state, prefix, decoder_weight):
        super().__init__(state, prefix)
        self.predictions = BertLMPredictionHead(state, prefix + "predictions.", decoder_weight)
        self.seq_relationship = Linear(state, prefix + "seq_relationship.", self.config.hidden_size, 2)

    def forward(self, sequence_output, pooled_output):
        prediction_scores, predictions_cache = self.predictions.forward(sequence_output)           # (B, T, V)
        seq_relationship_score, nsp_cache = self.ops.linear_forward(
            pooled_output, self.p("seq_relationship.weight"), self.p("seq_relationship.bias"))     # (B, 2)
        return prediction_scores, seq_relationship_score, (predictions_cache, nsp_cache)

    def backward(self, dprediction_scores, dseq_relationship_score, cache):
        """Returns (d sequence_output (B, T, H), d pooled_output (B, H), grads)."""
        predictions_cache, nsp_cache = cache
        dsequence, grads = self.predictions.backward(dprediction_scores, predictions_cache)
        dpooled, g = self.linear_backward("seq_relationship", dseq_relationship_score, nsp_cache)
        grads.update(g)
        return dsequence, dpooled, grads
