"""What every pipeline shares: a checkpoint directory (or a model and its tokenizer) in, one
example or a list of them through the model, transformers' result format out.

    T = tokens of one sequence, H = hidden size, K = number of labels, V = vocabulary size

A pipeline runs each example alone (batch 1, no padding), as transformers' pipelines do by
default, so its numbers are those of the example itself.  Loading keeps transformers'
warnings ("newly initialized", "not used"): a head that is random answers at random, and the
user must see that.
"""
import os

import numpy as np

# The class each task loads, and which task a checkpoint's `architectures` entry serves.
TASK_ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification"}
ARCHITECTURE_TASKS = {
    "BertForSequenceClassification": "text-classification",
    "BertForTokenClassification": "token-classification",
    "BertForQuestionAnswering": "question-answering",
    "BertForMaskedLM": "fill-mask",
    "BertForPreTraining": "fill-mask",
    "BertModel": "feature-extraction",
}


def task_of_config(config):
    """The pipeline task a checkpoint was trained for, from its config's `architectures`
    (None when the config names none that a pipeline serves)."""
    for name in getattr(config, "architectures", None) or ():
        if name in ARCHITECTURE_TASKS:
            return ARCHITECTURE_TASKS[name]
    return None


def load_model_and_tokenizer(model_class, model, tokenizer, dtype=np.float32):
    """(model, tokenizer) from a checkpoint directory, or the objects given.  `model`: a
    directory or an npbert model; `tokenizer`: None (the model's directory), a directory or
    vocab.txt, or a BertTokenizer.  Warnings of from_pretrained reach the caller unchanged."""
    from npbert.tokenization import BertTokenizer
    path = None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise OSError(f"{path}: no such checkpoint directory")
        model = model_class.from_pretrained(path, dtype=dtype)
    elif not hasattr(model, "config"):
        raise TypeError(f"model must be a checkpoint directory or an npbert model, got {type(model).__name__}")
    if tokenizer is None:
        if path is None:
            raise ValueError("pipeline(model=<an npbert model object>) needs tokenizer= as well")
        tokenizer = path
    if isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = os.fspath(tokenizer)
        if os.path.isfile(tokenizer):
            tokenizer = BertTokenizer(tokenizer)
        else:
            tokenizer = BertTokenizer.from_pretrained(tokenizer)
    model.eval()
    return model, tokenizer


class Pipeline:
    """The common part: `__call__` takes one example or a list and gives one result or a list.

    Subclasses set `task` and `model_class` and write `_run(example, **params)` (one example ->
    its result).  `defaults` given to the constructor (e.g. pipeline("ner",
    aggregation_strategy="simple")) hold for every call; keywords of a call override them.
    """
    task = None
    model_class = None

    def __init__(self, model, tokenizer=None, dtype=np.float32, **defaults):
        self.model, self.tokenizer = load_model_and_tokenizer(self.model_class, model, tokenizer, dtype)
        self._check_parameters(**defaults)
        self.defaults = defaults

    def _check_parameters(self, **params):
        """Refuse unknown or bad keywords early (subclasses list theirs)."""

    @property
    def max_length(self):
        """The longest sequence the model takes: its position table, or the tokenizer's
        model_max_length when that is shorter."""
        return int(min(self.model.config.max_position_embeddings, self.tokenizer.model_max_length))

    def _params(self, kwargs):
        params = {**self.defaults, **kwargs}
        self._check_parameters(**params)
        return params

    def __call__(self, inputs, **kwargs):
        params = self._params(kwargs)
        if isinstance(inputs, (list, tuple)):
            if not inputs:
                raise ValueError(f"{self.task}: at least one input is required")
            return [self._run(x, **params) for x in inputs]
        return self._run(inputs, **params)

    def _run(self, example, **params):
        raise NotImplementedError

    # ---- shared steps ----------------------------------------------------------------------
    def _encode(self, text, text_pair=None, truncation=None, max_length=None, **tokenizer_kwargs):
        """One text (or pair) -> {"input_ids", "token_type_ids", "attention_mask"}: (1, T) int64."""
        if not isinstance(text, str):
            raise ValueError(f"{self.task}: an input must be a string, got {type(text).__name__}")
        if truncation and max_length is None:
            max_length = self.max_length
        enc = self.tokenizer(text, text_pair, truncation=truncation, max_length=max_length,
                             return_token_type_ids=True, return_attention_mask=True, return_tensors="np",
                             **tokenizer_kwargs)
        self._check_length(enc["input_ids"].shape[1], text)
        return enc

    def _check_length(self, n, text):
        limit = self.model.config.max_position_embeddings
        if n > limit:
            raise ValueError(f"{self.task}: the input is {n} tokens long, the model takes at most {limit} "
                             f"(max_position_embeddings): pass truncation=True, or shorten {text[:40]!r}...")

    def _forward(self, enc):
        """The model on one encoded example, in eval mode, keeping no activations."""
        from npbert.modeling import no_grad
        inputs = {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "token_type_ids", "attention_mask")
                  if k in enc}
        with no_grad():
            return self.model(**inputs)


def softmax(logits):
    """transformers' pipelines' softmax over the last axis, in the logits' dtype (float32)."""
    maxes = np.max(logits, axis=-1, keepdims=True)
    shifted_exp = np.exp(logits - maxes)
    return shifted_exp / shifted_exp.sum(axis=-1, keepdims=True)


def sigmoid(logits):
    return 1.0 / (1.0 + np.exp(-logits))
