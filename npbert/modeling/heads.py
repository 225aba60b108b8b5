"""The task heads on top of BertModel, as transformers' `BertFor*` classes, with their losses.

    B = batch, T = sequence length, H = hidden size, V = vocab size,
    K = config.num_labels, C = number of choices (multiple choice)

Each class mirrors transformers' tree and names:

    BertForPreTraining            bert (with pooler) + cls = BertPreTrainingHeads
    BertForMaskedLM               bert (no pooler)   + cls = BertOnlyMLMHead
    BertLMHeadModel               bert (no pooler)   + cls = BertOnlyMLMHead, causal, shifted loss
    BertForNextSentencePrediction bert (with pooler) + cls = BertOnlyNSPHead
    BertForSequenceClassification bert (with pooler) + dropout + classifier
    BertForTokenClassification    bert (no pooler)   + dropout + classifier
    BertForMultipleChoice         bert (with pooler) + dropout + classifier, inputs (B, C, T)
    BertForQuestionAnswering      bert (no pooler)   + qa_outputs

`forward(**inputs, <labels>) -> (output, cache)` and `_backward(cache, **upstream) ->
(grads, d inputs_embeds)`; `model(...)` and `model.backward(...)` come from
BertPreTrainedModel.  `backward()` with no arguments differentiates the loss of the last
forward (which must have been given labels); otherwise pass upstream gradients by output name
(`logits=`, `prediction_logits=`, `seq_relationship_logits=`, `start_logits=`, `end_logits=`,
`hidden_states=`, `attentions=`, and `loss=` for a scaled loss) and get the gradient of
sum(output * upstream) over the outputs given.

The MLM decoder weight is tied: `cls.predictions.decoder.weight` is
`bert.embeddings.word_embeddings.weight` (one array, two state_dict names); its gradient is
the sum of its two uses, added in `_sum_tied_decoder_gradient` below.  Read-along: docs/heads.md.
"""
import warnings

import numpy as np

from npbert.ops.activations import get_activation
from npbert.ops.dropout import dropout_backward, dropout_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.ops.linear import linear_forward, linear_input_grad, linear_param_grads
from npbert.ops.losses import (bce_with_logits_backward, bce_with_logits_forward, cross_entropy_backward,
                               cross_entropy_forward, mse_backward, mse_forward)

from .bert import BertModel, _upstream
from .module import Module
from .outputs import (BertForPreTrainingOutput, CausalLMOutputWithCrossAttentions, MaskedLMOutput,
                      MultipleChoiceModelOutput, NextSentencePredictorOutput, QuestionAnsweringModelOutput,
                      SequenceClassifierOutput, TokenClassifierOutput)
from .pretrained import BertPreTrainedModel

WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"
DECODER_WEIGHT = "cls.predictions.decoder.weight"
DECODER_BIAS = "cls.predictions.decoder.bias"
PREDICTIONS_BIAS = "cls.predictions.bias"
IGNORE_INDEX = -100     # torch's CrossEntropyLoss default: labels equal to it do not count


# =========================================================================================
# Head modules (transformers' names; parameters under their prefix)
# =========================================================================================
class BertPredictionHeadTransform(Module):
    """dense -> hidden_act -> LayerNorm       (..., H) -> (..., H)"""

    def __init__(self, state, prefix):
        super().__init__(state, prefix)
        H = self.config.hidden_size
        self.add_linear("dense", H, H)
        self.act_forward, self.act_backward = get_activation(self.config.hidden_act)
        self.add_layer_norm("LayerNorm", H)

    def forward(self, hidden_states):
        h, dense_cache = linear_forward(hidden_states, self.p("dense.weight"), self.p("dense.bias"))   # (B, T, H)
        h, act_cache = self.act_forward(h)                                                             # (B, T, H)
        h, ln_cache = layer_norm_forward(h, self.p("LayerNorm.weight"), self.p("LayerNorm.bias"),
                                         self.config.layer_norm_eps)                                   # (B, T, H)
        return h, (dense_cache, act_cache, ln_cache)

    def backward(self, dout, cache):
        dense_cache, act_cache, ln_cache = cache
        dh, g_ln = layer_norm_backward(dout, ln_cache)
        dh = self.act_backward(dh, act_cache)
        dx, g_dense = self.linear_backward("dense", dh, dense_cache)
        return dx, {**g_dense, **self.prefixed("LayerNorm", g_ln)}


class BertLMPredictionHead(Module):
    """transform, then the decoder: logits = h @ W_word.T + bias        (B, T, H) -> (B, T, V)

    The decoder has no weight of its own: it reads `decoder_weight` (the word embeddings) from
    the model's dict.  Its bias is `cls.predictions.bias` (transformers ties
    `cls.predictions.decoder.bias` to it).  backward() reports the decoder weight's gradient
    under its own name, `<prefix>decoder.weight`; the model adds it to the word embeddings'.
    """

    def __init__(self, state, prefix, decoder_weight):
        super().__init__(state, prefix)
        # registered first: torch lists a module's own parameters before its children's
        self.add_param("bias", (self.config.vocab_size,), "zeros")                  # (V,)
        self.transform = BertPredictionHeadTransform(state, prefix + "transform.")
        self.decoder_weight = decoder_weight                                         # name of the (V, H) array

    def forward(self, hidden_states):
        h, transform_cache = self.transform.forward(hidden_states)                   # (B, T, H)
        logits, decoder_cache = linear_forward(h, self.state.params[self.decoder_weight], self.p("bias"))  # (B, T, V)
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
        self.add_linear("seq_relationship", self.config.hidden_size, 2)

    def forward(self, pooled_output):
        return linear_forward(pooled_output, self.p("seq_relationship.weight"), self.p("seq_relationship.bias"))

    def backward(self, dscore, cache):
        return self.linear_backward("seq_relationship", dscore, cache)


class BertPreTrainingHeads(Module):
    """cls.predictions (B, T, H) -> (B, T, V) and cls.seq_relationship (B, H) -> (B, 2)."""

    def __init__(self, state, prefix, decoder_weight):
        super().__init__(state, prefix)
        self.predictions = BertLMPredictionHead(state, prefix + "predictions.", decoder_weight)
        self.add_linear("seq_relationship", self.config.hidden_size, 2)

    def forward(self, sequence_output, pooled_output):
        prediction_scores, predictions_cache = self.predictions.forward(sequence_output)           # (B, T, V)
        seq_relationship_score, nsp_cache = linear_forward(
            pooled_output, self.p("seq_relationship.weight"), self.p("seq_relationship.bias"))     # (B, 2)
        return prediction_scores, seq_relationship_score, (predictions_cache, nsp_cache)

    def backward(self, dprediction_scores, dseq_relationship_score, cache):
        """Returns (d sequence_output (B, T, H), d pooled_output (B, H), grads)."""
        predictions_cache, nsp_cache = cache
        dsequence, grads = self.predictions.backward(dprediction_scores, predictions_cache)
        dpooled, g = self.linear_backward("seq_relationship", dseq_relationship_score, nsp_cache)
        grads.update(g)
        return dsequence, dpooled, grads


# =========================================================================================
# Shared pieces of the top-level heads
# =========================================================================================
# ---- the tied decoder weight ------------------------------------------------------------
# `cls.predictions.decoder.weight` IS `bert.embeddings.word_embeddings.weight`: one (V, H)
# array with two names.  It is used twice, looked up at the input (embeddings: x = W[ids]) and
# multiplied at the output (decoder: logits = h @ W.T + b), so
#     d loss / d W = (gradient of the lookup) + (gradient of the decoder).
# This is the one place where the two are added.
def _sum_tied_decoder_gradient(grads):
    d_decoder = grads.pop(DECODER_WEIGHT, None)       # (V, H) = dlogits^T @ h, every row; absent when frozen
    if d_decoder is None:
        return
    d_lookup = grads.get(WORD_EMBEDDINGS)             # (V, H) scatter-add, padding row 0; absent with inputs_embeds
    grads[WORD_EMBEDDINGS] = d_decoder if d_lookup is None else d_lookup + d_decoder


def _class_labels(name, labels, shape):
    """Integer class labels (int64) of `shape`; also accepted as transformers' `labels.view(-1)`
    accepts them: flattened, or with a trailing axis of 1."""
    a = np.asarray(labels)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be integer class indices, got dtype {a.dtype}")
    shape = tuple(shape)
    n = int(np.prod(shape))
    if a.shape not in (shape, shape + (1,), (n,)):
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    return a.reshape(shape).astype(np.int64, copy=False)


def _loss_upstream(model, cache, loss, others):
    """The upstream gradient of the loss: 1 when backward() is given nothing, `loss` when given,
    0 when only other outputs' gradients are given."""
    if loss is None and all(v is None for v in others):
        if cache["loss"] is None:
            raise RuntimeError(
                f"{type(model).__name__}.backward() without arguments differentiates the loss, but the last "
                f"forward call computed no loss ({model._loss_needs}). Pass the labels to the forward, or "
                f"pass upstream gradients by output name, e.g. backward({model._main_output}=...)")
        return 1.0
    if loss is None:
        return None
    if cache["loss"] is None:
        raise ValueError("a gradient for loss was given, but the last forward call computed no loss")
    d = np.asarray(loss)
    if d.shape != () or not np.issubdtype(d.dtype, np.floating) and not np.issubdtype(d.dtype, np.integer):
        raise ValueError(f"the gradient for loss must be a scalar, got shape {d.shape} dtype {d.dtype}")
    return float(d)


def _grad_or_zeros(name, value, shape, dtype):
    d = _upstream(name, value, shape, dtype)
    return np.zeros(shape, dtype=dtype) if d is None else d.copy()


class _BertHeadModel(BertPreTrainedModel):
    """What the heads share: the `bert` forward call and its backward."""

    _loss_needs = "pass labels="
    _main_output = "logits"

    def _bert_forward(self, input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                      inputs_embeds, output_hidden_states, output_attentions):
        return self.bert.forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                 position_ids=position_ids, head_mask=head_mask, inputs_embeds=inputs_embeds,
                                 output_hidden_states=output_hidden_states, output_attentions=output_attentions)

    def _bert_backward(self, cache, grads, hidden_states, attentions, last_hidden_state=None, pooler_output=None):
        bert_grads, dinputs_embeds = self.bert._backward(cache, last_hidden_state=last_hidden_state,
                                                         pooler_output=pooler_output,
                                                         hidden_states=hidden_states, attentions=attentions)
        grads.update(bert_grads)
        return grads, dinputs_embeds


# =========================================================================================
# Masked / causal language modelling and next sentence prediction
# =========================================================================================
class BertForPreTraining(_BertHeadModel):
    """BERT's pre-training model: masked LM over the sequence plus next sentence prediction
    on the pooled [CLS].  loss = MLM cross-entropy (-100 ignored) + NSP cross-entropy, computed
    (as in transformers) only when both `labels` and `next_sentence_label` are given."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)
    _tied_aliases = {DECODER_WEIGHT: WORD_EMBEDDINGS, DECODER_BIAS: PREDICTIONS_BIAS}
    _loss_needs = "it needs both labels= and next_sentence_label="
    _main_output = "prediction_logits"

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.bert = BertModel(config, add_pooling_layer=True, _parent=self, _prefix="bert.")
        self.cls = BertPreTrainingHeads(self.state, "cls.", decoder_weight=WORD_EMBEDDINGS)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None,
                next_sentence_label=None):
        """labels: (B, T) token ids in [0, V) or -100; next_sentence_label: (B,) in {0, 1}.
        Returns prediction_logits (B, T, V), seq_relationship_logits (B, 2), loss when both labels are given."""
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        sequence_output, pooled_output = outputs.last_hidden_state, outputs.pooler_output        # (B, T, H), (B, H)
        gathered = None
        if (getattr(self.config, "gather_masked_lm", False) and self.training and labels is not None
                and next_sentence_label is not None):
            # Google's gather_indexes: the MLM head only at the M labelled positions, (1, M, H) -> (1, M, V).
            # The loss (a mean over the labelled positions) and every gradient are those of the full
            # (B, T, V) computation; prediction_logits is then (1, M, V), in row-major position order.
            B, T, H = sequence_output.shape
            labels = _class_labels("labels", labels, (B, T))
            gathered = np.flatnonzero(labels.reshape(-1) != -100)                               # (M,)
            sequence_output = sequence_output.reshape(B * T, H)[gathered][None]                 # (1, M, H)
            labels = labels.reshape(-1)[gathered][None]                                         # (1, M)
        prediction_scores, seq_relationship_score, cls_cache = self.cls.forward(sequence_output, pooled_output)
        total_loss, loss_cache = None, None
        if labels is not None and next_sentence_label is not None:
            B, T, V = prediction_scores.shape
            labels = _class_labels("labels", labels, (B, T))
            next_sentence_label = _class_labels("next_sentence_label", next_sentence_label,
                                                (seq_relationship_score.shape[0],))
            masked_lm_loss, mlm_cache = cross_entropy_forward(prediction_scores, labels)           # (B, T, V), (B, T)
            next_sentence_loss, nsp_cache = cross_entropy_forward(seq_relationship_score, next_sentence_label)
            total_loss = masked_lm_loss + next_sentence_loss
            loss_cache = (mlm_cache, nsp_cache)
        output = BertForPreTrainingOutput(loss=total_loss, prediction_logits=prediction_scores,
                                          seq_relationship_logits=seq_relationship_score,
                                          hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        cache = {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache,
                 "shapes": (prediction_scores.shape, seq_relationship_score.shape),
                 "gathered": None if gathered is None else (gathered, outputs.last_hidden_state.shape)}
        return output, cache

    def _backward(self, cache, loss=None, prediction_logits=None, seq_relationship_logits=None,
                  hidden_states=None, attentions=None):
        dtype = self.state.dtype
        dloss = _loss_upstream(self, cache, loss, (prediction_logits, seq_relationship_logits, hidden_states, attentions))
        mlm_shape, nsp_shape = cache["shapes"]
        dprediction = _grad_or_zeros("prediction_logits", prediction_logits, mlm_shape, dtype)   # (B, T, V)
        dseq_relationship = _grad_or_zeros("seq_relationship_logits", seq_relationship_logits, nsp_shape, dtype)
        if dloss is not None:
            mlm_cache, nsp_cache = cache["loss"]
            # total_loss = masked_lm_loss + next_sentence_loss: each gets dloss
            dprediction += cross_entropy_backward(dloss, mlm_cache)
            dseq_relationship += cross_entropy_backward(dloss, nsp_cache)
        dsequence, dpooled, grads = self.cls.backward(dprediction, dseq_relationship, cache["cls"])
        if cache["gathered"] is not None:                  # scatter the M rows back to their (B, T) positions
            gathered, shape = cache["gathered"]
            full = np.zeros((shape[0] * shape[1], shape[2]), dtype=dsequence.dtype)
            full[gathered] = dsequence[0]
            dsequence = full.reshape(shape)                                                     # (B, T, H)
        grads, dinputs_embeds = self._bert_backward(cache["bert"], grads, hidden_states, attentions,
                                                    last_hidden_state=dsequence, pooler_output=dpooled)
        _sum_tied_decoder_gradient(grads)
        return grads, dinputs_embeds


class BertForMaskedLM(_BertHeadModel):
    """Masked LM: logits (B, T, V) over the whole sequence; loss = cross-entropy over the positions
    whose label is not -100 (the masked tokens), averaged over those positions."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)
    _tied_aliases = {DECODER_WEIGHT: WORD_EMBEDDINGS, DECODER_BIAS: PREDICTIONS_BIAS}

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        if config.is_decoder:
            warnings.warn("If you want to use `BertForMaskedLM` make sure `config.is_decoder=False` for "
                          "bi-directional self-attention.", stacklevel=2)
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.bert = BertModel(config, add_pooling_layer=False, _parent=self, _prefix="bert.")
        self.cls = BertOnlyMLMHead(self.state, "cls.", decoder_weight=WORD_EMBEDDINGS)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        """labels: (B, T) token ids in [0, V), -100 where no prediction is asked for."""
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        prediction_scores, cls_cache = self.cls.forward(outputs.last_hidden_state)                 # (B, T, V)
        masked_lm_loss, loss_cache = None, None
        if labels is not None:
            labels = _class_labels("labels", labels, prediction_scores.shape[:2])                  # (B, T)
            masked_lm_loss, loss_cache = cross_entropy_forward(prediction_scores, labels)
        output = MaskedLMOutput(loss=masked_lm_loss, logits=prediction_scores,
                                hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache, "shape": prediction_scores.shape}

    def _backward(self, cache, loss=None, logits=None, hidden_states=None, attentions=None):
        dloss = _loss_upstream(self, cache, loss, (logits, hidden_states, attentions))
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, T, V)
        if dloss is not None:
            dlogits += cross_entropy_backward(dloss, cache["loss"])
        dsequence, grads = self.cls.backward(dlogits, cache["cls"])                                 # (B, T, H)
        grads, dinputs_embeds = self._bert_backward(cache["bert"], grads, hidden_states, attentions,
                                                    last_hidden_state=dsequence)
        _sum_tied_decoder_gradient(grads)
        return grads, dinputs_embeds


class BertLMHeadModel(_BertHeadModel):
    """Causal LM (config.is_decoder=True: position t attends to positions <= t, and not to padding;
    the mask is built in BertModel._extended_attention_mask).  logits (B, T, V); the loss is
    next-token cross-entropy: logits at t predict labels at t + 1, i.e. labels shifted left by
    one with -100 appended, so the last position never counts.

    transformers 5.x computes this loss after casting the logits to float32 (`logits.float()`);
    npbert computes it in the model's dtype, as transformers 4.x did."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)
    _tied_aliases = {DECODER_WEIGHT: WORD_EMBEDDINGS, DECODER_BIAS: PREDICTIONS_BIAS}

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        if not config.is_decoder:
            warnings.warn("If you want to use `BertLMHeadModel` as a standalone, add `is_decoder=True.`", stacklevel=2)
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.bert = BertModel(config, add_pooling_layer=False, _parent=self, _prefix="bert.")
        self.cls = BertOnlyMLMHead(self.state, "cls.", decoder_weight=WORD_EMBEDDINGS)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        """labels: (B, T) token ids in [0, V) or -100, usually input_ids itself (not shifted: the
        shift happens here)."""
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        prediction_scores, cls_cache = self.cls.forward(outputs.last_hidden_state)                 # (B, T, V)
        lm_loss, loss_cache = None, None
        if labels is not None:
            B, T = prediction_scores.shape[:2]
            labels = _class_labels("labels", labels, (B, T))
            # tokens < t predict token t: position t is scored against labels[t + 1]
            shift_labels = np.concatenate([labels[:, 1:], np.full((B, 1), IGNORE_INDEX, dtype=np.int64)], axis=1)  # (B, T)
            lm_loss, loss_cache = cross_entropy_forward(prediction_scores, shift_labels)
        output = CausalLMOutputWithCrossAttentions(loss=lm_loss, logits=prediction_scores,
                                                   hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache, "shape": prediction_scores.shape}

    _backward = BertForMaskedLM._backward


class BertForNextSentencePrediction(_BertHeadModel):
    """NSP: pooled [CLS] -> cls.seq_relationship -> logits (B, 2); loss = cross-entropy on labels (B,)."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.bert = BertModel(config, add_pooling_layer=True, _parent=self, _prefix="bert.")
        self.cls = BertOnlyNSPHead(self.state, "cls.")
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        """labels: (B,) with 0 = sentence B follows A, 1 = sentence B is random (or -100)."""
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        seq_relationship_scores, cls_cache = self.cls.forward(outputs.pooler_output)               # (B, 2)
        next_sentence_loss, loss_cache = None, None
        if labels is not None:
            labels = _class_labels("labels", labels, seq_relationship_scores.shape[:1])            # (B,)
            next_sentence_loss, loss_cache = cross_entropy_forward(seq_relationship_scores, labels)
        output = NextSentencePredictorOutput(loss=next_sentence_loss, logits=seq_relationship_scores,
                                             hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache,
                        "shape": seq_relationship_scores.shape}

    def _backward(self, cache, loss=None, logits=None, hidden_states=None, attentions=None):
        dloss = _loss_upstream(self, cache, loss, (logits, hidden_states, attentions))
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, 2)
        if dloss is not None:
            dlogits += cross_entropy_backward(dloss, cache["loss"])
        dpooled, grads = self.cls.backward(dlogits, cache["cls"])                                   # (B, H)
        return self._bert_backward(cache["bert"], grads, hidden_states, attentions, pooler_output=dpooled)


# =========================================================================================
# Classification heads: dropout + classifier
# =========================================================================================
def _classifier_dropout(config):
    return config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob


class BertForSequenceClassification(_BertHeadModel):
    """pooled [CLS] -> dropout -> classifier -> logits (B, K).  The loss depends on the problem type:

        regression                  (K == 1, or set in the config)  MSE on float labels (B,) or (B, K)
        single_label_classification (K > 1, int64/int32 labels)     cross-entropy, labels (B,) in [0, K) or -100
        multi_label_classification  (K > 1, any other labels)       BCE-with-logits, float labels (B, K)

    When config.problem_type is None it is inferred from the first labels seen and written into
    the config, exactly as transformers does (so it is then saved with the config)."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("classifier.",)

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=True, _parent=self, _prefix="bert.")
        self.classifier_dropout = _classifier_dropout(config)
        self.add_linear("classifier", config.hidden_size, config.num_labels)
        self.post_init()

    def _problem_type(self, labels):
        """transformers' inference, kept in the config as transformers keeps it."""
        if self.config.problem_type is None:
            if self.num_labels == 1:
                self.config.problem_type = "regression"
            elif self.num_labels > 1 and labels.dtype in (np.int64, np.int32):
                self.config.problem_type = "single_label_classification"
            else:
                self.config.problem_type = "multi_label_classification"
        return self.config.problem_type

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        pooled_output, drop_cache = dropout_forward(outputs.pooler_output, self.classifier_dropout,
                                                    self.state.rng, self.training)                  # (B, H)
        logits, clf_cache = linear_forward(pooled_output, self.p("classifier.weight"), self.p("classifier.bias"))  # (B, K)
        loss, loss_cache = None, None
        if labels is not None:
            labels = np.asarray(labels)
            problem_type = self._problem_type(labels)
            B, K = logits.shape
            if problem_type == "regression":
                if labels.dtype == bool or not np.issubdtype(labels.dtype, np.number):
                    raise TypeError(f"regression labels must be numbers, got dtype {labels.dtype}")
                if K == 1:   # transformers: MSELoss(logits.squeeze(), labels.squeeze())
                    if labels.squeeze().shape != logits.squeeze().shape:
                        raise ValueError(f"regression labels have shape {labels.shape}, expected ({B},) for "
                                         f"num_labels=1")
                    loss, mse_cache = mse_forward(logits.squeeze(), labels.squeeze())
                else:
                    if labels.shape != (B, K):
                        raise ValueError(f"regression labels have shape {labels.shape}, expected ({B}, {K})")
                    loss, mse_cache = mse_forward(logits, labels)
                loss_cache = ("mse", mse_cache)
            elif problem_type == "single_label_classification":
                if labels.dtype == bool or not np.issubdtype(labels.dtype, np.integer):
                    raise TypeError(f"single-label classification needs integer class labels, got dtype "
                                    f"{labels.dtype}")
                labels = _class_labels("labels", labels, (B,))
                loss, ce_cache = cross_entropy_forward(logits, labels)
                loss_cache = ("ce", ce_cache)
            else:  # multi_label_classification
                if not np.issubdtype(labels.dtype, np.floating):
                    raise TypeError(f"multi-label classification needs float labels (B, num_labels) of 0.0/1.0, "
                                    f"got dtype {labels.dtype}; for single-label classification pass int64 "
                                    f"class indices")
                if labels.shape != (B, K):
                    raise ValueError(f"multi-label classification labels have shape {labels.shape}, expected "
                                     f"({B}, {K})")
                loss, bce_cache = bce_with_logits_forward(logits, labels)
                loss_cache = ("bce", bce_cache)
        output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                          attentions=outputs.attentions)
        return output, {"bert": bert_cache, "dropout": drop_cache, "classifier": clf_cache, "loss": loss_cache,
                        "shape": logits.shape}

    def _loss_backward(self, dloss, loss_cache, shape):
        kind, c = loss_cache
        if kind == "mse":
            return mse_backward(dloss, c).reshape(shape)          # undo the squeeze: (B,) -> (B, 1)
        if kind == "ce":
            return cross_entropy_backward(dloss, c)
        return bce_with_logits_backward(dloss, c)

    def _backward(self, cache, loss=None, logits=None, hidden_states=None, attentions=None):
        dloss = _loss_upstream(self, cache, loss, (logits, hidden_states, attentions))
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, K)
        if dloss is not None:
            dlogits += self._loss_backward(dloss, cache["loss"], cache["shape"])
        dpooled, g = self.linear_backward("classifier", dlogits, cache["classifier"])                # (B, H)
        dpooled = dropout_backward(dpooled, cache["dropout"])
        return self._bert_backward(cache["bert"], g, hidden_states, attentions,
                                   pooler_output=dpooled)


class BertForTokenClassification(_BertHeadModel):
    """Every token: dropout -> classifier -> logits (B, T, K); loss = cross-entropy over the
    positions whose label is not -100."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("classifier.",)

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False, _parent=self, _prefix="bert.")
        self.classifier_dropout = _classifier_dropout(config)
        self.add_linear("classifier", config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        """labels: (B, T) in [0, K), -100 where a token has no label (padding, sub-words)."""
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        sequence_output, drop_cache = dropout_forward(outputs.last_hidden_state, self.classifier_dropout,
                                                      self.state.rng, self.training)                # (B, T, H)
        logits, clf_cache = linear_forward(sequence_output, self.p("classifier.weight"), self.p("classifier.bias"))  # (B, T, K)
        loss, loss_cache = None, None
        if labels is not None:
            labels = _class_labels("labels", labels, logits.shape[:2])                             # (B, T)
            loss, loss_cache = cross_entropy_forward(logits, labels)
        output = TokenClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                       attentions=outputs.attentions)
        return output, {"bert": bert_cache, "dropout": drop_cache, "classifier": clf_cache, "loss": loss_cache,
                        "shape": logits.shape}

    def _backward(self, cache, loss=None, logits=None, hidden_states=None, attentions=None):
        dloss = _loss_upstream(self, cache, loss, (logits, hidden_states, attentions))
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, T, K)
        if dloss is not None:
            dlogits += cross_entropy_backward(dloss, cache["loss"])
        dsequence, g = self.linear_backward("classifier", dlogits, cache["classifier"])              # (B, T, H)
        dsequence = dropout_backward(dsequence, cache["dropout"])
        return self._bert_backward(cache["bert"], g, hidden_states, attentions,
                                   last_hidden_state=dsequence)


class BertForMultipleChoice(_BertHeadModel):
    """C candidate sequences per example: inputs (B, C, T) are flattened to (B*C, T), each
    pooled [CLS] is scored by `classifier` (H -> 1), and the scores reshaped to logits (B, C);
    loss = cross-entropy over the choices, labels (B,) in [0, C).

    hidden_states / attentions (and their upstream gradients) are per flattened row, (B*C, ...);
    `inputs_embeds_grad` is (B, C, T, H)."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("classifier.",)

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.bert = BertModel(config, add_pooling_layer=True, _parent=self, _prefix="bert.")
        self.classifier_dropout = _classifier_dropout(config)
        self.add_linear("classifier", config.hidden_size, 1)
        self.post_init()

    @staticmethod
    def _flatten(name, value, ndim):
        """(B, C, T[, H]) -> (B*C, T[, H]); anything else is an error."""
        if value is None:
            return None, None
        a = np.asarray(value)
        if a.ndim != ndim:
            dims = "(batch, num_choices, sequence" + (", hidden_size)" if ndim == 4 else ")")
            raise ValueError(f"BertForMultipleChoice: {name} must be {ndim}-D {dims}, got shape {a.shape}")
        return a.reshape(-1, *a.shape[2:]), a.shape

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        """input_ids, attention_mask, token_type_ids, position_ids: (B, C, T); inputs_embeds (B, C, T, H);
        labels (B,) the index of the right choice."""
        input_ids, ids_shape = self._flatten("input_ids", input_ids, 3)
        inputs_embeds, embeds_shape = self._flatten("inputs_embeds", inputs_embeds, 4)
        B, C = (ids_shape or embeds_shape or (0, 0))[:2]
        for name, value in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids),
                            ("position_ids", position_ids)):
            flat, shape = self._flatten(name, value, 3)
            if shape is not None and shape[:2] != (B, C):
                raise ValueError(f"BertForMultipleChoice: {name} has shape {shape}, the inputs have "
                                 f"(batch, num_choices) = ({B}, {C})")
            if name == "attention_mask":
                attention_mask = flat
            elif name == "token_type_ids":
                token_type_ids = flat
            else:
                position_ids = flat
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        pooled_output, drop_cache = dropout_forward(outputs.pooler_output, self.classifier_dropout,
                                                    self.state.rng, self.training)                  # (B*C, H)
        logits, clf_cache = linear_forward(pooled_output, self.p("classifier.weight"), self.p("classifier.bias"))  # (B*C, 1)
        reshaped_logits = logits.reshape(B, C)                                                      # (B, C)
        loss, loss_cache = None, None
        if labels is not None:
            labels = _class_labels("labels", labels, (B,))
            loss, loss_cache = cross_entropy_forward(reshaped_logits, labels)
        output = MultipleChoiceModelOutput(loss=loss, logits=reshaped_logits, hidden_states=outputs.hidden_states,
                                           attentions=outputs.attentions)
        return output, {"bert": bert_cache, "dropout": drop_cache, "classifier": clf_cache, "loss": loss_cache,
                        "shape": (B, C), "embeds_shape": embeds_shape}

    def _backward(self, cache, loss=None, logits=None, hidden_states=None, attentions=None):
        dloss = _loss_upstream(self, cache, loss, (logits, hidden_states, attentions))
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, C)
        if dloss is not None:
            dlogits += cross_entropy_backward(dloss, cache["loss"])
        dpooled, g = self.linear_backward("classifier", dlogits.reshape(-1, 1), cache["classifier"])  # (B*C, H)
        dpooled = dropout_backward(dpooled, cache["dropout"])
        grads, dinputs_embeds = self._bert_backward(cache["bert"], g, hidden_states,
                                                    attentions, pooler_output=dpooled)
        B, C = cache["shape"]
        if dinputs_embeds is None:                                                                  # frozen below
            return grads, None
        return grads, dinputs_embeds.reshape(B, C, *dinputs_embeds.shape[1:])                      # (B, C, T, H)


# =========================================================================================
# Extractive question answering
# =========================================================================================
class BertForQuestionAnswering(_BertHeadModel):
    """Span extraction: qa_outputs (H -> 2) on every token, split into start_logits and
    end_logits (B, T).  Positions are clamped to [0, T]; position T (an answer outside the
    window) is the ignore index.  loss = (start cross-entropy + end cross-entropy) / 2, computed
    when both start_positions and end_positions are given."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("qa_outputs.",)
    _loss_needs = "it needs both start_positions= and end_positions="
    _main_output = "start_logits"

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False, _parent=self, _prefix="bert.")
        self.add_linear("qa_outputs", config.hidden_size, config.num_labels)
        self.post_init()

    @staticmethod
    def _positions(name, positions, B, T):
        """(B,) or (B, 1) integer token positions, clamped to [0, T]; T means "not in this window"."""
        a = np.asarray(positions)
        if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{name} must be integer token positions, got dtype {a.dtype}")
        if a.ndim > 1:
            a = a.squeeze(-1)
        if a.shape != (B,):
            raise ValueError(f"{name} has shape {np.shape(positions)}, expected ({B},)")
        return np.clip(a.astype(np.int64), 0, T)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, start_positions=None,
                end_positions=None):
        """start_positions, end_positions: (B,) token indices of the answer span."""
        if self.num_labels != 2:
            raise ValueError(f"BertForQuestionAnswering splits qa_outputs into start and end logits and needs "
                             f"config.num_labels == 2, got {self.num_labels}")
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        logits, qa_cache = linear_forward(outputs.last_hidden_state, self.p("qa_outputs.weight"),
                                          self.p("qa_outputs.bias"))                                # (B, T, 2)
        start_logits = np.ascontiguousarray(logits[..., 0])                                         # (B, T)
        end_logits = np.ascontiguousarray(logits[..., 1])                                           # (B, T)
        total_loss, loss_cache = None, None
        if start_positions is not None and end_positions is not None:
            B, T = start_logits.shape
            ignored_index = T       # positions outside the window are clamped to T and ignored
            start_positions = self._positions("start_positions", start_positions, B, T)
            end_positions = self._positions("end_positions", end_positions, B, T)
            start_loss, start_cache = cross_entropy_forward(start_logits, start_positions, ignore_index=ignored_index)
            end_loss, end_cache = cross_entropy_forward(end_logits, end_positions, ignore_index=ignored_index)
            total_loss = (start_loss + end_loss) / start_logits.dtype.type(2)
            loss_cache = (start_cache, end_cache)
        output = QuestionAnsweringModelOutput(loss=total_loss, start_logits=start_logits, end_logits=end_logits,
                                              hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "qa": qa_cache, "loss": loss_cache, "shape": start_logits.shape}

    def _backward(self, cache, loss=None, start_logits=None, end_logits=None, hidden_states=None, attentions=None):
        dtype = self.state.dtype
        dloss = _loss_upstream(self, cache, loss, (start_logits, end_logits, hidden_states, attentions))
        dstart = _grad_or_zeros("start_logits", start_logits, cache["shape"], dtype)                # (B, T)
        dend = _grad_or_zeros("end_logits", end_logits, cache["shape"], dtype)                      # (B, T)
        if dloss is not None:
            start_cache, end_cache = cache["loss"]
            # total_loss = (start_loss + end_loss) / 2
            dstart += cross_entropy_backward(dloss / 2, start_cache)
            dend += cross_entropy_backward(dloss / 2, end_cache)
        dlogits = np.stack([dstart, dend], axis=-1)                                                 # (B, T, 2)
        dsequence, g = self.linear_backward("qa_outputs", dlogits, cache["qa"])                      # (B, T, H)
        return self._bert_backward(cache["bert"], g, hidden_states, attentions,
                                   last_hidden_state=dsequence)
