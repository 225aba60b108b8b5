"""The pre-training heads: BertForPreTraining (masked LM + next sentence prediction),
BertForMaskedLM, BertLMHeadModel (causal LM) and BertForNextSentencePrediction.

    B = batch, T = sequence length, H = hidden size, V = vocab size
"""
import warnings

import numpy as np

from ..bert import BertModel
from ..loss_terms import LossTerm, batch_labels, counted, term_scale
from ..outputs import (BertForPreTrainingOutput, CausalLMOutputWithCrossAttentions, MaskedLMOutput,
                       NextSentencePredictorOutput)
from ..pretrained import BertPreTrainedModel
from .base import (IGNORE_INDEX, WORD_EMBEDDINGS, DECODER_BIAS, DECODER_WEIGHT, PREDICTIONS_BIAS, _BertHeadModel,
                   _class_labels, _grad_or_zeros, _loss_upstream, _sum_tied_decoder_gradient)
from .modules import BertOnlyMLMHead, BertOnlyNSPHead, BertPreTrainingHeads


class BertForPreTraining(_BertHeadModel):
    """BERT's pre-training model: masked LM over the sequence plus next sentence prediction
    on the pooled [CLS].  loss = MLM cross-entropy (-100 ignored) + NSP cross-entropy, computed
    (as in transformers) only when both `labels` and `next_sentence_label` are given."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)
    _tied_aliases = {DECODER_WEIGHT: WORD_EMBEDDINGS, DECODER_BIAS: PREDICTIONS_BIAS}
    _loss_needs = "it needs both labels= and next_sentence_label="
    _main_output = "prediction_logits"
    attribution_targets = {"class": "seq_relationship_logits", "token": "prediction_logits"}

    def loss_terms(self, batch):
        """masked_lm: a mean over the labelled positions; next_sentence: over the labelled pairs."""
        return [LossTerm("masked_lm", 1.0, counted(batch_labels(self, batch, "labels"))),
                LossTerm("next_sentence", 1.0, counted(batch_labels(self, batch, "next_sentence_label")))]

    def regroup_kind(self, labels):
        return "BertForPreTraining: its loss has two terms, each a mean over its own items"

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
        ops = self.ops
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
        total_loss, loss_cache, loss_means = None, None, None
        if labels is not None and next_sentence_label is not None:
            B, T, V = prediction_scores.shape
            labels = _class_labels("labels", labels, (B, T))
            next_sentence_label = _class_labels("next_sentence_label", next_sentence_label,
                                                (seq_relationship_score.shape[0],))
            masked_lm_loss, mlm_cache = ops.cross_entropy_forward(prediction_scores, labels)           # (B, T, V), (B, T)
            next_sentence_loss, nsp_cache = ops.cross_entropy_forward(seq_relationship_score, next_sentence_label)
            total_loss = masked_lm_loss + next_sentence_loss
            loss_cache = (mlm_cache, nsp_cache)
            loss_means = {"masked_lm": masked_lm_loss, "next_sentence": next_sentence_loss}
        output = BertForPreTrainingOutput(loss=total_loss, prediction_logits=prediction_scores,
                                          seq_relationship_logits=seq_relationship_score,
                                          hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        cache = {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache, "loss_means": loss_means,
                 "shapes": (prediction_scores.shape, seq_relationship_score.shape),
                 "gathered": None if gathered is None else (gathered, outputs.last_hidden_state.shape)}
        return output, cache

    def _backward(self, cache, loss=None, prediction_logits=None, seq_relationship_logits=None,
                  hidden_states=None, attentions=None):
        ops = self.ops
        dtype = self.state.dtype
        dloss = _loss_upstream(self, cache, loss, (prediction_logits, seq_relationship_logits, hidden_states, attentions))
        mlm_shape, nsp_shape = cache["shapes"]
        dprediction = _grad_or_zeros("prediction_logits", prediction_logits, mlm_shape, dtype)   # (B, T, V)
        dseq_relationship = _grad_or_zeros("seq_relationship_logits", seq_relationship_logits, nsp_shape, dtype)
        if dloss is not None:
            mlm_cache, nsp_cache = cache["loss"]
            # total_loss = masked_lm_loss + next_sentence_loss: each gets dloss (or its own scale)
            dprediction += ops.cross_entropy_backward(term_scale(dloss, "masked_lm"), mlm_cache)
            dseq_relationship += ops.cross_entropy_backward(term_scale(dloss, "next_sentence"), nsp_cache)
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
    attribution_targets = {"token": "logits"}

    def loss_terms(self, batch):
        return [LossTerm("masked_lm", 1.0, counted(batch_labels(self, batch, "labels")))]

    def regroup_kind(self, labels):
        return "token"

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
        ops = self.ops
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        prediction_scores, cls_cache = self.cls.forward(outputs.last_hidden_state)                 # (B, T, V)
        masked_lm_loss, loss_cache = None, None
        if labels is not None:
            labels = _class_labels("labels", labels, prediction_scores.shape[:2])                  # (B, T)
            masked_lm_loss, loss_cache = ops.cross_entropy_forward(prediction_scores, labels)
        output = MaskedLMOutput(loss=masked_lm_loss, logits=prediction_scores,
                                hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache, "shape": prediction_scores.shape}

    def _backward(self, cache, loss=None, logits=None, hidden_states=None, attentions=None):
        ops = self.ops
        dloss = _loss_upstream(self, cache, loss, (logits, hidden_states, attentions))
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, T, V)
        if dloss is not None:
            dlogits += ops.cross_entropy_backward(dloss, cache["loss"])
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

    def loss_terms(self, batch):
        """A mean over the positions whose next token is labelled (labels[:, 1:] != -100)."""
        return [LossTerm("causal_lm", 1.0, counted(batch_labels(self, batch, "labels")[:, 1:]))]

    def regroup_kind(self, labels):
        return ("BertLMHeadModel: its loss is not a mean of per-example terms that cutting the padding "
                "leaves unchanged")

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
        ops = self.ops
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        prediction_scores, cls_cache = self.cls.forward(outputs.last_hidden_state)                 # (B, T, V)
        lm_loss, loss_cache = None, None
        if labels is not None:
            B, T = prediction_scores.shape[:2]
            labels = _class_labels("labels", labels, (B, T))
            # tokens < t predict token t: position t is scored against labels[t + 1]
            shift_labels = np.concatenate([labels[:, 1:], np.full((B, 1), IGNORE_INDEX, dtype=np.int64)], axis=1)  # (B, T)
            lm_loss, loss_cache = ops.cross_entropy_forward(prediction_scores, shift_labels)
        output = CausalLMOutputWithCrossAttentions(loss=lm_loss, logits=prediction_scores,
                                                   hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache, "shape": prediction_scores.shape}

    _backward = BertForMaskedLM._backward


class BertForNextSentencePrediction(_BertHeadModel):
    """NSP: pooled [CLS] -> cls.seq_relationship -> logits (B, 2); loss = cross-entropy on labels (B,)."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("cls.",)

    def loss_terms(self, batch):
        return [LossTerm("next_sentence", 1.0, counted(batch_labels(self, batch, "labels")))]

    def regroup_kind(self, labels):
        return "class"

    _reads_pooled_only = True

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.bert = BertModel(config, add_pooling_layer=True, _parent=self, _prefix="bert.")
        self.cls = BertOnlyNSPHead(self.state, "cls.")
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        """labels: (B,) with 0 = sentence B follows A, 1 = sentence B is random (or -100)."""
        ops = self.ops
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        seq_relationship_scores, cls_cache = self.cls.forward(outputs.pooler_output)               # (B, 2)
        next_sentence_loss, loss_cache = None, None
        if labels is not None:
            labels = _class_labels("labels", labels, seq_relationship_scores.shape[:1])            # (B,)
            next_sentence_loss, loss_cache = ops.cross_entropy_forward(seq_relationship_scores, labels)
        output = NextSentencePredictorOutput(loss=next_sentence_loss, logits=seq_relationship_scores,
                                             hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "cls": cls_cache, "loss": loss_cache,
                        "shape": seq_relationship_scores.shape}

    def _backward(self, cache, loss=None, logits=None, hidden_states=None, attentions=None):
        ops = self.ops
        dloss = _loss_upstream(self, cache, loss, (logits, hidden_states, attentions))
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, 2)
        if dloss is not None:
            dlogits += ops.cross_entropy_backward(dloss, cache["loss"])
        dpooled, grads = self.cls.backward(dlogits, cache["cls"])                                   # (B, H)
        return self._bert_backward(cache["bert"], grads, hidden_states, attentions, pooler_output=dpooled)
