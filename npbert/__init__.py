"""npbert: a NumPy-only reference implementation of BERT.

Forward and hand-written backward equal to transformers, a WordPiece tokenizer equal to its
Python BertTokenizer, checkpoints in and out with no framework.  Names follow transformers.
"""
from npbert.config import BertConfig
from npbert.paths import get_path, set_path, using_path
from npbert.modeling import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction,
                             BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                             BertForTokenClassification, BertLMHeadModel, BertModel, BertPreTrainedModel,
                             no_grad)
from npbert.tokenization import BertTokenizer
from npbert.pipelines import pipeline

from npbert import optim, training, data  # noqa: E402  (npbert.optim.AdamW, npbert.training.Trainer, ...)

__version__ = "0.1.0"

__all__ = [
    "get_path", "set_path", "using_path", "pipeline", "BertConfig", "BertTokenizer", "no_grad", "BertModel", "BertPreTrainedModel", "BertForPreTraining",
    "BertForMaskedLM", "BertForNextSentencePrediction", "BertLMHeadModel", "BertForSequenceClassification",
    "BertForTokenClassification", "BertForMultipleChoice", "BertForQuestionAnswering",
]
