"""The task heads on top of BertModel, as transformers' `BertFor*` classes, with their losses.

    B = batch, T = sequence length, H = hidden size, V = vocab size,
    K = config.num_labels, C = number of choices (multiple choice)

Each class mirrors transformers' tree and names (one file per family: modules.py holds the
head modules `cls.*`, base.py what every head shares, pretraining.py the language-model and
NSP heads, classification.py the classifiers, question_answering.py the span head):

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
the sum of its two uses, added in `_sum_tied_decoder_gradient` (base.py).  Read-along: docs/heads.md.
"""
from .base import DECODER_BIAS, DECODER_WEIGHT, IGNORE_INDEX, PREDICTIONS_BIAS, WORD_EMBEDDINGS  # noqa: F401
from .classification import BertForMultipleChoice, BertForSequenceClassification, BertForTokenClassification
from .modules import (BertLMPredictionHead, BertOnlyMLMHead, BertOnlyNSPHead, BertPredictionHeadTransform,  # noqa: F401
                      BertPreTrainingHeads)
from .pretraining import BertForMaskedLM, BertForNextSentencePrediction, BertForPreTraining, BertLMHeadModel
from .question_answering import BertForQuestionAnswering

__all__ = ["BertForPreTraining", "BertForMaskedLM", "BertLMHeadModel", "BertForNextSentencePrediction",
           "BertForSequenceClassification", "BertForTokenClassification", "BertForMultipleChoice",
           "BertForQuestionAnswering"]
