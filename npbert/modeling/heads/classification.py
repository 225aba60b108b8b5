"""The classification heads: BertForSequenceClassification, BertForTokenClassification and
BertForMultipleChoice, each dropout + `classifier` on BERT's output, with its loss.

    B = batch, T = sequence length, H = hidden size, K = config.num_labels, C = choices
"""
import numpy as np

from ..bert import BertModel
from ..loss_terms import LossTerm, batch_length, batch_rows, bce_with_logits, cross_entropy, mse
from ..leaf_modules import Dropout, Linear
from ..outputs import MultipleChoiceModelOutput, SequenceClassifierOutput, TokenClassifierOutput
from ..pretrained import BertPreTrainedModel
from .base import _BertHeadModel, _class_labels, _grad_or_zeros


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

    _reads_pooled_only = True

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=True, _parent=self, _prefix="bert.")
        self.dropout = Dropout(self.state, "dropout.", _classifier_dropout(config))
        self.classifier = Linear(self.state, "classifier.", config.hidden_size, config.num_labels)
        self.post_init()

    def _inferred_problem_type(self, labels):
        """transformers' inference of the problem type from the labels, when the config has none."""
        if self.config.problem_type is not None:
            return self.config.problem_type
        if self.num_labels == 1:
            return "regression"
        if self.num_labels > 1 and labels.dtype in (np.int64, np.int32):
            return "single_label_classification"
        return "multi_label_classification"

    def _problem_type(self, labels):
        """transformers' inference, kept in the config as transformers keeps it."""
        self.config.problem_type = self._inferred_problem_type(labels)
        return self.config.problem_type

    def loss_terms(self, batch):
        """transformers' loss by problem type: single label, a cross-entropy over the examples whose
        label is not -100; regression, an MSE over every label value (`logits.squeeze()` against
        `labels.squeeze()` for one label); multi-label, a BCE-with-logits over every label value."""
        labels = batch.get("labels")
        if labels is None:
            return []
        labels = np.asarray(labels)
        problem_type = self._inferred_problem_type(labels)
        B, K = batch_rows(batch), self.num_labels
        if problem_type == "regression":
            if labels.dtype == bool or not np.issubdtype(labels.dtype, np.number):
                raise TypeError(f"regression labels must be numbers, got dtype {labels.dtype}")
            if K == 1:   # transformers: MSELoss(logits.squeeze(), labels.squeeze())
                if labels.squeeze().shape != (B,) and not (B == 1 and labels.size == 1):
                    raise ValueError(f"regression labels have shape {labels.shape}, expected ({B},) for num_labels=1")
                labels = labels.reshape(B)
            elif labels.shape != (B, K):
                raise ValueError(f"regression labels have shape {labels.shape}, expected ({B}, {K})")
            return [LossTerm("regression", "logits", mse, labels)]
        if problem_type == "single_label_classification":
            if labels.dtype == bool or not np.issubdtype(labels.dtype, np.integer):
                raise TypeError(f"single-label classification needs integer class labels, got dtype {labels.dtype}")
            return [LossTerm("classification", "logits", cross_entropy, _class_labels("labels", labels, (B,)))]
        if not np.issubdtype(labels.dtype, np.floating):
            raise TypeError(f"multi-label classification needs float labels (B, num_labels) of 0.0/1.0, got dtype "
                            f"{labels.dtype}; for single-label classification pass int64 class indices")
        if labels.shape != (B, K):
            raise ValueError(f"multi-label classification labels have shape {labels.shape}, expected ({B}, {K})")
        return [LossTerm("multi_label", "logits", bce_with_logits, labels)]

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        pooled_output, drop_cache = self.dropout.forward(outputs.pooler_output)                  # (B, H)
        logits, clf_cache = self.classifier.forward(pooled_output)                               # (B, K)
        if labels is not None:
            self._problem_type(np.asarray(labels))       # inferred once and kept in the config, as transformers
        # the loss: loss_terms above, computed on these outputs by the model's call
        output = SequenceClassifierOutput(logits=logits, hidden_states=outputs.hidden_states,
                                          attentions=outputs.attentions)
        return output, {"bert": bert_cache, "dropout": drop_cache, "classifier": clf_cache, "shape": logits.shape}

    def _backward(self, cache, logits=None, hidden_states=None, attentions=None):
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, K)
        dpooled, g = self.classifier.backward(dlogits, cache["classifier"])                # (B, H)
        dpooled, _ = self.dropout.backward(dpooled, cache["dropout"])
        return self._bert_backward(cache["bert"], g, hidden_states, attentions,
                                   pooler_output=dpooled)


class BertForTokenClassification(_BertHeadModel):
    """Every token: dropout -> classifier -> logits (B, T, K); loss = cross-entropy over the
    positions whose label is not -100."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("classifier.",)
    attribution_targets = {"token_class": "logits"}

    def loss_terms(self, batch):
        """A cross-entropy over the tokens whose label is not -100."""
        if batch.get("labels") is None:
            return []
        shape = (batch_rows(batch), batch_length(batch))
        return [LossTerm("classification", "logits", cross_entropy, _class_labels("labels", batch["labels"], shape))]

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False, _parent=self, _prefix="bert.")
        self.dropout = Dropout(self.state, "dropout.", _classifier_dropout(config))
        self.classifier = Linear(self.state, "classifier.", config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, labels=None):
        """labels: (B, T) in [0, K), -100 where a token has no label (padding, sub-words)."""
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        sequence_output, drop_cache = self.dropout.forward(outputs.last_hidden_state)                # (B, T, H)
        logits, clf_cache = self.classifier.forward(sequence_output)                             # (B, T, K)
        # the loss: loss_terms above, computed on these outputs by the model's call
        output = TokenClassifierOutput(logits=logits, hidden_states=outputs.hidden_states,
                                       attentions=outputs.attentions)
        return output, {"bert": bert_cache, "dropout": drop_cache, "classifier": clf_cache, "shape": logits.shape}

    def _backward(self, cache, logits=None, hidden_states=None, attentions=None):
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, T, K)
        dsequence, g = self.classifier.backward(dlogits, cache["classifier"])              # (B, T, H)
        dsequence, _ = self.dropout.backward(dsequence, cache["dropout"])
        return self._bert_backward(cache["bert"], g, hidden_states, attentions,
                                   last_hidden_state=dsequence)


class BertForMultipleChoice(_BertHeadModel):
    """C candidate sequences per example: inputs (B, C, T) are flattened to (B*C, T), each
    pooled [CLS] is scored by `classifier` (H -> 1), and the scores reshaped to logits (B, C);
    loss = cross-entropy over the choices, labels (B,) in [0, C).

    hidden_states / attentions (and their upstream gradients) are per flattened row, (B*C, ...);
    `inputs_embeds_grad` is (B, C, T, H)."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("classifier.",)
    attribution_targets = None
    attribution_refusal = ("npbert.interpret does not handle BertForMultipleChoice (inputs (B, C, T)): explain one "
                           "choice at a time with the BertModel inside it, model.bert")

    regroup_refusal = ("its loss is not a mean of per-example terms that cutting the padding "
                       "leaves unchanged")

    def loss_terms(self, batch):
        """A cross-entropy over the choices, a mean over the examples whose label is not -100."""
        if batch.get("labels") is None:
            return []
        return [LossTerm("classification", "logits", cross_entropy,
                         _class_labels("labels", batch["labels"], (batch_rows(batch),)))]

    _reads_pooled_only = True

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.bert = BertModel(config, add_pooling_layer=True, _parent=self, _prefix="bert.")
        self.dropout = Dropout(self.state, "dropout.", _classifier_dropout(config))
        self.classifier = Linear(self.state, "classifier.", config.hidden_size, 1)
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
        with self.state.call.rows_times(C):      # a row of bert is one choice: example b's rows start at b C
            outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                                                     inputs_embeds, output_hidden_states, output_attentions)
            pooled_output, drop_cache = self.dropout.forward(outputs.pooler_output)            # (B*C, H)
        logits, clf_cache = self.classifier.forward(pooled_output)                               # (B*C, 1)
        reshaped_logits = logits.reshape(B, C)                                                      # (B, C)
        # the loss: loss_terms above, computed on these outputs by the model's call
        output = MultipleChoiceModelOutput(logits=reshaped_logits, hidden_states=outputs.hidden_states,
                                           attentions=outputs.attentions)
        return output, {"bert": bert_cache, "dropout": drop_cache, "classifier": clf_cache,
                        "shape": (B, C), "embeds_shape": embeds_shape}

    def _backward(self, cache, logits=None, hidden_states=None, attentions=None):
        dlogits = _grad_or_zeros("logits", logits, cache["shape"], self.state.dtype)              # (B, C)
        dpooled, g = self.classifier.backward(dlogits.reshape(-1, 1), cache["classifier"])  # (B*C, H)
        dpooled, _ = self.dropout.backward(dpooled, cache["dropout"])
        grads, dinputs_embeds = self._bert_backward(cache["bert"], g, hidden_states,
                                                    attentions, pooler_output=dpooled)
        B, C = cache["shape"]
        if dinputs_embeds is None:                                                                  # frozen below
            return grads, None
        return grads, dinputs_embeds.reshape(B, C, *dinputs_embeds.shape[1:])                      # (B, C, T, H)
