"""What every pipeline shares: a checkpoint directory (or a model and its tokenizer) in, one
example or a list of them through the model, transformers' result format out.

    T = tokens of one sequence, H = hidden size, K = number of labels, V = vocabulary size

A pipeline runs each example alone (batch 1, no padding), as transformers' pipelines do by
default, so its numbers are those of the example itself.  With `batch_size=B` (at construction
or per call, as transformers) B model sequences (examples, or QA / NER windows) run as one
padded (B, T_max) batch; each sequence's outputs are cut back to its own T before the task's
post-processing, so the results are those of one at a time up to float round-off.  Loading keeps transformers'
warnings ("newly initialized", "not used"): a head that is random answers at random, and the
user must see that.
"""
import difflib
import inspect
import logging
import os

import numpy as np

from npbert.modeling import no_grad
from npbert.ops.softmax import softmax_forward
# The task names and aliases, and which task a checkpoint's `architectures` entry serves: one
# table for every command and pipeline (npbert/task_names.py).
from npbert.task_names import ARCHITECTURE_TASKS, TASK_ALIASES  # noqa: F401  (re-exported)
from npbert.tokenization import BertTokenizer

logger = logging.getLogger(__name__)


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


# The tokenizer keywords a pipeline passes on (text-classification's own keywords, fill-mask's
# tokenizer_kwargs, feature-extraction's tokenize_kwargs): those that change the tokens.  The
# return_* keywords would change what the pipeline reads, and are refused with the others.
TOKENIZER_KEYWORDS = ("add_special_tokens", "truncation", "max_length", "padding", "pad_to_multiple_of",
                      "padding_side", "verbose")


def refuse_unknown(where, given, known):
    """A TypeError naming the first keyword of `given` not in `known`, the closest known one and
    the whole list (instead of Python's 'unexpected keyword argument' from deep inside)."""
    unknown = [name for name in given if name not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"{where}: unknown keyword {unknown[0]!r}{hint}; it takes {', '.join(known)}")


def check_batch_size(batch_size):
    """transformers' batch_size: None is 1 (each example alone); else a positive integer."""
    if batch_size is None:
        return 1
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer (or None for 1), got {batch_size!r}")
    return int(batch_size)


def check_device(device):
    """transformers' device=: None, -1, "cpu" (or torch.device("cpu")) are where npbert runs; a
    GPU (0, "cuda", "mps", ...) is refused, npbert being NumPy on the CPU only."""
    if device is None or (isinstance(device, (int, np.integer)) and not isinstance(device, bool) and device == -1):
        return
    if str(device).split(":")[0] == "cpu":
        return
    raise ValueError(f"pipeline(device={device!r}): npbert runs on the CPU only (NumPy); "
                     f"pass device=-1 or device='cpu', or leave device out")


class Pipeline:
    """The common part: `__call__` takes one example or a list and gives one result or a list.

    Subclasses set `task`, `model_class` and which model outputs they read, and write
        _check_parameters(**params)     the keywords a call takes: its signature is the list
        _preprocess(example, **params)  -> (sequences, context): the model inputs of one example
                                           (one, or one per window), each {"input_ids",
                                           "token_type_ids", "attention_mask"}: (T,) int64
        _postprocess(context, outputs, **params) -> the example's result; `outputs` has one dict
                                           per sequence, its token outputs cut to that T
    `defaults` given to the constructor (e.g. pipeline("ner", aggregation_strategy="simple"))
    hold for every call; keywords of a call override them.  `batch_size` (constructor or call):
    how many sequences go through the model at once, padded to the longest of them.
    """
    task = None
    model_class = None
    token_outputs = ()              # model outputs (B, T, ...): each sequence gets rows [:T]
    sequence_outputs = ()           # model outputs (B, ...): each sequence gets its row

    def __init__(self, model, tokenizer=None, dtype=np.float32, batch_size=None, device=None, **defaults):
        check_device(device)
        self.model, self.tokenizer = load_model_and_tokenizer(self.model_class, model, tokenizer, dtype)
        self.batch_size = check_batch_size(batch_size)
        self._params(defaults)
        self.defaults = defaults

    def _check_parameters(self, **params):
        """Refuse bad values early (subclasses list their keywords)."""

    @property
    def call_keywords(self):
        """The keywords a call takes: batch_size, num_workers (transformers' DataLoader workers:
        accepted and not used), those of _check_parameters, and the tokenizer's
        TOKENIZER_KEYWORDS when _check_parameters takes **tokenizer_kwargs."""
        names = ["batch_size", "num_workers"]
        for name, p in inspect.signature(self._check_parameters).parameters.items():
            if p.kind is p.VAR_KEYWORD:
                names += TOKENIZER_KEYWORDS
            elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                names.append(name)
        return tuple(names)

    @property
    def max_length(self):
        """The longest sequence the model takes: its position table, or the tokenizer's
        model_max_length when that is shorter."""
        return int(min(self.model.config.max_position_embeddings, self.tokenizer.model_max_length))

    def _params(self, kwargs):
        params = {**self.defaults, **kwargs} if hasattr(self, "defaults") else dict(kwargs)
        refuse_unknown(f"pipeline({self.task!r})", params, self.call_keywords)
        params.pop("batch_size", None)              # (a call's batch_size is taken by __call__)
        if params.pop("num_workers", None) not in (None, 0, 1):
            logger.info(f"pipeline({self.task!r}): num_workers is not used: npbert tokenizes in the calling "
                        "process (the model's BLAS uses the cores)")
        self._check_parameters(**params)
        return params

    def __call__(self, inputs, batch_size=None, **kwargs):
        params = self._params(kwargs)
        if isinstance(inputs, (list, tuple)):
            if not inputs:
                raise ValueError(f"{self.task}: at least one input is required")
            return self._run_examples(list(inputs), batch_size, params)
        return self._run_examples([inputs], batch_size, params)[0]

    def _run_examples(self, examples, batch_size, params):
        """Each example's sequences, the model on batch_size of them at a time, each result.
        Examples are post-processed as soon as a batch's worth of sequences has run, so at most
        about 2 batch_size sequences' outputs (e.g. MLM logits (T, V)) are held at once."""
        batch_size = self.batch_size if batch_size is None else check_batch_size(batch_size)
        results, pending, n_pending = [], [], 0
        for example in examples:
            sequences, context = self._preprocess(example, **params)
            pending.append((sequences, context))
            n_pending += len(sequences)
            if n_pending >= batch_size:
                results += self._finish(pending, batch_size, params)
                pending, n_pending = [], 0
        if pending:
            results += self._finish(pending, batch_size, params)
        return results

    def _finish(self, pending, batch_size, params):
        outputs = self._forward_sequences([s for sequences, _ in pending for s in sequences], batch_size)
        results, k = [], 0
        for sequences, context in pending:
            results.append(self._postprocess(context, outputs[k:k + len(sequences)], **params))
            k += len(sequences)
        return results

    def _forward_sequences(self, sequences, batch_size):
        """[{"input_ids", "token_type_ids", "attention_mask"}: (T_i,)] -> one dict of outputs per
        sequence: token outputs (T_i, ...), sequence outputs (...).  batch_size sequences at a time,
        right-padded to the longest T of the batch (pad id, type 0, mask 0: the padded keys get
        the mask's large negative score, so the real tokens' outputs change only by round-off)."""
        pad_id = self.tokenizer.pad_token_id
        pad_id = 0 if pad_id is None else pad_id    # (masked out: any valid id gives the same outputs)
        out = []
        for b in range(0, len(sequences), batch_size):
            batch = sequences[b:b + batch_size]
            lengths = [len(s["input_ids"]) for s in batch]
            B, T = len(batch), max(lengths)
            inputs = {"input_ids": np.full((B, T), pad_id, dtype=np.int64),           # (B, T)
                      "token_type_ids": np.zeros((B, T), dtype=np.int64),              # (B, T)
                      "attention_mask": np.zeros((B, T), dtype=np.int64)}              # (B, T)
            for i, s in enumerate(batch):
                for key, array in inputs.items():
                    array[i, :lengths[i]] = s[key]
            result = self._forward(inputs)
            for i, n in enumerate(lengths):
                item = {name: result[name][i, :n] for name in self.token_outputs if name in result}
                item.update({name: result[name][i] for name in self.sequence_outputs if name in result})
                out.append(item)
        return out

    def _preprocess(self, example, **params):
        raise NotImplementedError

    def _postprocess(self, context, outputs, **params):
        raise NotImplementedError

    # ---- shared steps ----------------------------------------------------------------------
    def _encode(self, text, text_pair=None, truncation=None, max_length=None, **tokenizer_kwargs):
        """One text (or pair) -> {"input_ids", "token_type_ids", "attention_mask"}: (1, T) int64."""
        if not isinstance(text, str):
            raise ValueError(f"{self.task}: an input must be a string, got {type(text).__name__}")
        refuse_unknown(f"pipeline({self.task!r}) tokenizer keywords", tokenizer_kwargs, TOKENIZER_KEYWORDS)
        if truncation and max_length is None:
            max_length = self.max_length
        enc = self.tokenizer(text, text_pair, truncation=truncation, max_length=max_length,
                             return_token_type_ids=True, return_attention_mask=True, return_tensors="np",
                             **tokenizer_kwargs)
        self._check_length(enc["input_ids"].shape[1], text)
        return enc

    @staticmethod
    def _sequence(enc):
        """Row 0 of an encoding (1, T) -> the (T,) sequence dict _forward_sequences takes."""
        return {k: np.asarray(enc[k][0], dtype=np.int64) for k in ("input_ids", "token_type_ids", "attention_mask")}

    def _check_length(self, n, text):
        limit = self.model.config.max_position_embeddings
        if n > limit:
            raise ValueError(f"{self.task}: the input is {n} tokens long, the model takes at most {limit} "
                             f"(max_position_embeddings): pass truncation=True, or shorten {text[:40]!r}...")

    def _forward(self, enc):
        """The model on encoded examples (B, T), in eval mode, keeping no activations."""
        inputs = {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "token_type_ids", "attention_mask")
                  if k in enc}
        with no_grad():
            return self.model(**inputs)


def softmax(logits):
    """transformers' pipelines' softmax over the last axis, in the logits' dtype (float32):
    npbert.ops.softmax's, the same arithmetic."""
    return softmax_forward(np.asarray(logits))[0]


def sigmoid(logits):
    return 1.0 / (1.0 + np.exp(-logits))
