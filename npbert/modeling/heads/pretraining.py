"""The pre-training heads: BertForPreTraining (masked LM + next sentence prediction),
BertForMaskedLM, BertLMHeadModel (causal LM) and BertForNextSentencePrediction.

    B = batch, T = sequence length, H = hidden size, V = vocab size
"""
import warnings

import numpy as np

from ..bert import BertModel
from ..loss_terms import LossTerm, batch_length, batch_rows, cross_entropy, has_labels
from ..outputs import (BertForPreTrainingOutput, CausalLMOutputWithCrossAttentions, MaskedLMOutput,
                       NextSentencePredictorOutput)
from ..pretrained import BertPreTrainedModel
from .base import (IGNORE_INDEX, WORD_EMBEDDINGS, DECODER_BIAS, DECODER_WEIGHT, PREDICTIONS_BIAS, _BertHeadModel,
                   _class_labels, _grad_or_zeros, _sum_tied_decoder_gradient)
from .modules import BertOnlyMLMHead, BertOnlyNSPHead, BertPreTrainingHeads


class BertForPreTraining(_BertHeadModel):
    """BERT's pre-training model: masked LM over the sequence plus next sentence prediction
    on the pooled [CLS].  loss = MLM cross-entropy (-100 ignored) + NSP cross-entropy, computed
    (as in transformers) only when both `labels` and `next_sentence_label` are given."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)
    _tied_aliases = {DECODER_WEIGHT: WORD_EMBEDDINGS, DECODER_BIAS: PREDICTIONS_BIAS}
    attribution_targets = {"class": "seq_relationship_logits", "token": "prediction_logits"}

    def loss_terms(self, batch):
        """transformers' `total_loss = masked_lm_loss + next_sentence_loss`, computed when both labels
        are given: masked_lm, a cross-entropy over the vocabulary at the positions whose label is not
        -100; next_sentence, a cross-entropy over {IsNext, NotNext} for the pairs."""
        if not has_labels(batch, "labels", "next_sentence_label"):
            return []
        B, T = batch_rows(batch), batch_length(batch)
        labels = _class_labels("labels", batch["labels"], (B, T))
        if self._gathers(batch):                 # prediction_logits is then (1, M, V): the M labelled positions
            labels = labels.reshape(-1)[_labelled(labels)][None]                                    # (1, M)
        return [LossTerm("masked_lm", "prediction_logits", cross_entropy, labels),
                LossTerm("next_sentence", "seq_relationship_logits", cross_entropy,
                         _class_labels("next_sentence_label", batch["next_sentence_label"], (B,)))]

    def _gathers(self, batch):
        """True when the MLM head runs at the labelled positions alone (config.gather_masked_lm, in training)."""
        return bool(getattr(self.config, "gather_masked_lm", False) and self.training
                    and has_labels(batch, "labels", "next_sentence_label"))

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
        if self._gathers({"labels": labels, "next_sentence_label": next_sentence_label}):
            # Google's gather_indexes: the MLM head only at the M labelled positions, (1, M, H) -> (1, M, V).
            # The loss (a mean over the labelled positions) and every gradient are those of the full
            # (B, T, V) computation; prediction_logits is then (1, M, V), in row-major position order.
            B, T, H = sequence_output.shape
            labels = _class_labels("labels", labels, (B, T))
            gathered = _labelled(labels)                                                        # (M,)
            sequence_output = sequence_output.reshape(B * T, H)[gathered][None]                 # (1, M, H)
        prediction_scores, seq_relationship_score, cls_cache = self.cls.forward(sequence_output, pooled_output)
        # the loss: loss_terms above, computed on these outputs by the model's call
        output = BertForPreTrainingOutput(prediction_logits=prediction_scores,
                                          seq_relationship_logits=seq_relationship_score,
                                          hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        cache = {"bert": bert_cache, "cls": cls_cache,
                 "shapes": (prediction_scores.shape, seq_relationship_score.shape),
                 "gathered": None if gathered is None else (gathered, outputs.last_hidden_state.shape)}
        return output, cache

    def _backward(self, cache, prediction_logits=None, seq_relationship_logits=None, hidden_states=None,
                  attentions=None):
        dtype = self.state.dtype
        mlm_shape, nsp_shape = cache["shapes"]
        dprediction = _grad_or_zeros("prediction_logits", prediction_logits, mlm_shape, dtype)   # (B, T, V)
        dseq_relationship = _grad_or_zeros("seq_relationship_logits", seq_relationship_logits, nsp_shape, dtype)
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


def _labelled(labels):
    """(M,) the flat indices of the labelled positions (label != -100), in row-major order."""
    return np.flatnonzero(labels.reshape(-1) != IGNORE_INDEX)


class BertForMaskedLM(_BertHeadModel):
    """Masked LM: logits (B, T, V) over the whole sequence; loss = cross-entropy over the positions
    whose label is not -100 (the masked tokens), averaged over those positions."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)
    _tied_aliases = {DECODER_WEIGHT: WORD_EMBEDDINGS, DECODER_BIAS: PREDICTIONS_BIAS}
    attribution_targets = {"token": "logits"}

    def loss_terms(self, batch):
        """A cross-entropy over the vocabulary at the positions whose label is not -100."""
        if batch.get("labels") is None:
            return []
        shape = (batch_rows(batch), batch_length(batch))
        return [LossTerm("masked_lm", "logits", cross_entropy, _class_labels("labels", batch["labels"], shape))]

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
        # the loss: loss_terms above, computed on these outputs by the model's call
        output = MaskedLMOutput(logits=prediction_scores, hidden_states=outputs.hidden_states,
                                attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "shape": prediction_scores.shape}

    def _backward(self, cache, logits=None, hidden_states=None, attentions=None):
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, T, V)
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
    attribution_targets = {"token": "logits"}

    regroup_refusal = ("its loss is not a mean of per-example terms that cutting the padding "
                       "leaves unchanged")

    def loss_terms(self, batch):
        """Next-token cross-entropy: logits at t predict labels at t + 1, so the target is the labels
        shifted left by one with -100 appended (the last position never counts); a mean over the
        positions whose next token is labelled."""
        if batch.get("labels") is None:
            return []
        B, T = batch_rows(batch), batch_length(batch)
        labels = _class_labels("labels", batch["labels"], (B, T))
        # tokens < t predict token t: position t is scored against labels[t + 1]
        shift_labels = np.concatenate([labels[:, 1:], np.full((B, 1), IGNORE_INDEX, dtype=np.int64)], axis=1)  # (B, T)
        return [LossTerm("causal_lm", "logits", cross_entropy, shift_labels)]

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
        # the loss: loss_terms above (the shifted labels), computed on these outputs by the model's call
        output = CausalLMOutputWithCrossAttentions(logits=prediction_scores, hidden_states=outputs.hidden_states,
                                                   attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "shape": prediction_scores.shape}

    _backward = BertForMaskedLM._backward


class BertForNextSentencePrediction(_BertHeadModel):
    """NSP: pooled [CLS] -> cls.seq_relationship -> logits (B, 2); loss = cross-entropy on labels (B,)."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)

    def loss_terms(self, batch):
        """A cross-entropy over {IsNext, NotNext}, a mean over the pairs whose label is not -100."""
        if batch.get("labels") is None:
            return []
        return [LossTerm("next_sentence", "logits", cross_entropy,
                         _class_labels("labels", batch["labels"], (batch_rows(batch),)))]

    _reads_pooled_only = True

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
        # the loss: loss_terms above, computed on these outputs by the model's call
        output = NextSentencePredictorOutput(logits=seq_relationship_scores, hidden_states=outputs.hidden_states,
                                             attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "shape": seq_relationship_scores.shape}

    def _backward(self, cache, logits=None, hidden_states=None, attentions=None):
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, 2)
        dpooled, grads = self.cls.backward(dlogits, cache["cls"])                                   # (B, H)
        return self._bert_backward(cache["bert"], grads, hidden_states, attentions, pooler_output=dpooled)
