"""npbert: a NumPy-only reference implementation of BERT.

Forward and hand-written backward equal to transformers, a WordPiece tokenizer equal to its
Python BertTokenizer, checkpoints in and out with no framework.  Names follow transformers.
"""
from npbert.config import BertConfig
from npbert.paths import get_path, set_path, using_path
from npbert.modeling import (AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM,
                             AutoModelForMultipleChoice, AutoModelForNextSentencePrediction, AutoModelForPreTraining,
                             AutoModelForQuestionAnswering, AutoModelForSequenceClassification,
                             AutoModelForTokenClassification, AutoTokenizer, BertForMaskedLM, BertForMultipleChoice,
                             BertForNextSentencePrediction, BertForPreTraining, BertForQuestionAnswering,
                             BertForSequenceClassification, BertForTokenClassification, BertLMHeadModel, BertModel,
                             BertPreTrainedModel, no_grad)
from npbert.tokenization import BertTokenizer
from npbert.pipelines import pipeline
# transformers' top-level optimization names (transformers 4.x also exported its own AdamW; npbert's is
# torch.optim.AdamW, which transformers 5 tells its users to use: docs/optimizers.md)
from npbert.optim import (AdamW, SchedulerType, get_constant_schedule, get_constant_schedule_with_warmup,
                          get_cosine_schedule_with_warmup, get_cosine_with_hard_restarts_schedule_with_warmup,
                          get_inverse_sqrt_schedule, get_linear_schedule_with_warmup,
                          get_polynomial_decay_schedule_with_warmup, get_scheduler)

from npbert import optim, training, data  # noqa: E402  (npbert.optim.AdamW, npbert.training.Trainer, ...)
from npbert import losses, outputs  # noqa: E402  (a head of your own: docs/custom_heads.md)
from npbert import nn, functional  # noqa: E402  (npbert.nn.Linear as torch.nn.Linear, after `import npbert` alone)
from npbert.tokenization import BatchEncoding  # noqa: E402
from npbert.training import (DataCollatorForLanguageModeling, DataCollatorForTokenClassification,  # noqa: E402
                             DataCollatorForWholeWordMask, DataCollatorWithPadding, EvalPrediction, Trainer,
                             TrainingArguments, default_data_collator)

# transformers' base classes, for type hints and isinstance checks in tutorials: npbert has one
# model family, one tokenizer and one config, so each base is the BERT class (docs/compatibility.md)
PreTrainedModel = BertPreTrainedModel
PreTrainedTokenizerBase = PreTrainedTokenizer = PreTrainedTokenizerFast = BertTokenizerFast = BertTokenizer
PretrainedConfig = PreTrainedConfig = BertConfig

__version__ = "0.1.0"

__all__ = [
    "get_path", "set_path", "using_path", "pipeline", "BertConfig", "BertTokenizer", "no_grad", "BertModel", "BertPreTrainedModel", "BertForPreTraining",
    "BertForMaskedLM", "BertForNextSentencePrediction", "BertLMHeadModel", "BertForSequenceClassification",
    "BertForTokenClassification", "BertForMultipleChoice", "BertForQuestionAnswering",
    "AutoConfig", "AutoTokenizer", "AutoModel", "AutoModelForPreTraining", "AutoModelForMaskedLM",
    "AutoModelForCausalLM", "AutoModelForNextSentencePrediction", "AutoModelForSequenceClassification",
    "AutoModelForTokenClassification", "AutoModelForMultipleChoice", "AutoModelForQuestionAnswering",
    "AdamW", "SchedulerType", "get_scheduler", "get_constant_schedule", "get_constant_schedule_with_warmup",
    "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
    "get_cosine_with_hard_restarts_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
    "get_inverse_sqrt_schedule",
    "Trainer", "TrainingArguments", "EvalPrediction", "DataCollatorWithPadding", "DataCollatorForTokenClassification",
    "DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask", "default_data_collator", "BatchEncoding",
    "PreTrainedModel", "PreTrainedTokenizerBase", "PreTrainedTokenizer", "PreTrainedTokenizerFast",
    "BertTokenizerFast", "PretrainedConfig", "PreTrainedConfig",
]
