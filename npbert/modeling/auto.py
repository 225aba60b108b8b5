"""transformers' Auto classes, for BERT checkpoints: AutoConfig, AutoTokenizer, AutoModel, AutoModelFor*.

transformers' `AutoModelForSequenceClassification.from_pretrained(dir)` reads `model_type` from
the directory's config.json and builds that model type's class.  npbert has one model type, BERT,
so each Auto class checks that the checkpoint is a BERT one and hands it to the BERT class:

    AutoConfig                           -> BertConfig
    AutoTokenizer                        -> BertTokenizer (tokenizer_class BertTokenizer[Fast] or none)
    AutoModel                            -> BertModel
    AutoModelForPreTraining              -> BertForPreTraining
    AutoModelForMaskedLM                 -> BertForMaskedLM
    AutoModelForCausalLM                 -> BertLMHeadModel (config.is_decoder=True, or a warning)
    AutoModelForNextSentencePrediction   -> BertForNextSentencePrediction
    AutoModelForSequenceClassification   -> BertForSequenceClassification
    AutoModelForTokenClassification      -> BertForTokenClassification
    AutoModelForMultipleChoice           -> BertForMultipleChoice
    AutoModelForQuestionAnswering        -> BertForQuestionAnswering

A checkpoint of another model type (model_type "gpt2", "distilbert", ...) is an error naming it.
Google's bert_config.json has no model_type: it is BERT.  `from_pretrained` takes what the BERT
class's from_pretrained takes; `from_config(config)` builds a fresh model from a BertConfig.
"""
import json
import os

from npbert.config import BertConfig, find_config_file, read_config_dict
from npbert.io.hub import hub_name_message
from npbert.tokenization import BertTokenizer

from .bert import BertModel
from .heads import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction, BertForPreTraining,
                    BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification,
                    BertLMHeadModel)

_BERT_TOKENIZERS = ("BertTokenizer", "BertTokenizerFast", "BertTokenizerLegacy")


def _not_bert(where, what, auto):
    return ValueError(f"{where}: {what}; npbert implements BERT only (model_type 'bert'), so {auto} cannot load "
                      "it (transformers can)")


def _stored_model_type(path, auto):
    """The model_type of the checkpoint at `path` ("bert" when its config has none, as Google's
    bert_config.json), or an error naming it when it is not "bert"."""
    path = os.fspath(path)
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise OSError(f"{auto}.from_pretrained: '{path}' is not a directory or a file."
                      + hub_name_message(path, "models", auto))
    config_file = find_config_file(path)
    model_type = read_config_dict(config_file).get("model_type", "bert")
    if model_type != "bert":
        raise _not_bert(config_file, f"model_type is {model_type!r}", auto)
    return model_type


class _Auto:
    """An Auto class: from_pretrained / from_config only, as transformers'."""

    _target = None

    def __init__(self, *args, **kwargs):
        raise OSError(f"{type(self).__name__} is designed to be instantiated using "
                      f"`{type(self).__name__}.from_pretrained(pretrained_model_name_or_path)` or "
                      f"`{type(self).__name__}.from_config(config)` methods.")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        _stored_model_type(pretrained_model_name_or_path, cls.__name__)
        return cls._target.from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)

    @classmethod
    def from_config(cls, config, **kwargs):
        if not isinstance(config, BertConfig):
            raise TypeError(f"{cls.__name__}.from_config takes a BertConfig, got {type(config).__name__}")
        return cls._target(config, **kwargs)


class AutoConfig(_Auto):
    """BertConfig.from_pretrained after the model_type check."""
    _target = BertConfig

    @classmethod
    def from_config(cls, config, **kwargs):
        raise AttributeError("AutoConfig has no from_config: use AutoConfig.from_pretrained(dir) or BertConfig(...)")

    @classmethod
    def for_model(cls, model_type, **kwargs):
        """transformers' AutoConfig.for_model("bert", **fields)."""
        if model_type != "bert":
            raise _not_bert("AutoConfig.for_model", f"model_type is {model_type!r}", "AutoConfig")
        return BertConfig(**kwargs)


class AutoTokenizer(_Auto):
    """BertTokenizer.from_pretrained for a BERT (WordPiece) tokenizer directory.  The tokenizer class
    is the directory's tokenizer_config.json `tokenizer_class`, else config.json's, else the model
    type's; anything but BERT's is an error naming it."""
    _target = BertTokenizer

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *inputs, **kwargs):
        path = os.fspath(pretrained_model_name_or_path)
        if os.path.isdir(path):
            named = None
            for name in ("tokenizer_config.json", "config.json"):
                file = os.path.join(path, name)
                if os.path.isfile(file):
                    try:
                        with open(file, encoding="utf-8") as f:
                            stored = json.load(f)
                    except (OSError, ValueError):
                        continue                     # BertTokenizer.from_pretrained reports a bad file itself
                    if not isinstance(stored, dict):
                        continue
                    named = stored.get("tokenizer_class") or named
                    if named is None and name == "config.json" and stored.get("model_type", "bert") != "bert":
                        raise _not_bert(file, f"model_type is {stored['model_type']!r} and no tokenizer_class is "
                                              "given", "AutoTokenizer")
                if named:
                    if named not in _BERT_TOKENIZERS:
                        raise _not_bert(file, f"tokenizer_class is {named!r}", "AutoTokenizer")
                    break
        return BertTokenizer.from_pretrained(path, *inputs, **kwargs)

    @classmethod
    def from_config(cls, config, **kwargs):
        raise AttributeError("AutoTokenizer has no from_config: use AutoTokenizer.from_pretrained(dir)")


def _auto_model(name, target):
    doc = f"transformers' {name}: {target.__name__}.from_pretrained / {target.__name__}(config) for BERT checkpoints."
    return type(name, (_Auto,), {"_target": target, "__doc__": doc})


AutoModel = _auto_model("AutoModel", BertModel)
AutoModelForPreTraining = _auto_model("AutoModelForPreTraining", BertForPreTraining)
AutoModelForMaskedLM = _auto_model("AutoModelForMaskedLM", BertForMaskedLM)
AutoModelForCausalLM = _auto_model("AutoModelForCausalLM", BertLMHeadModel)
AutoModelForNextSentencePrediction = _auto_model("AutoModelForNextSentencePrediction", BertForNextSentencePrediction)
AutoModelForSequenceClassification = _auto_model("AutoModelForSequenceClassification", BertForSequenceClassification)
AutoModelForTokenClassification = _auto_model("AutoModelForTokenClassification", BertForTokenClassification)
AutoModelForMultipleChoice = _auto_model("AutoModelForMultipleChoice", BertForMultipleChoice)
AutoModelForQuestionAnswering = _auto_model("AutoModelForQuestionAnswering", BertForQuestionAnswering)

AUTO_CLASSES = ["AutoConfig", "AutoTokenizer", "AutoModel", "AutoModelForPreTraining", "AutoModelForMaskedLM",
                "AutoModelForCausalLM", "AutoModelForNextSentencePrediction", "AutoModelForSequenceClassification",
                "AutoModelForTokenClassification", "AutoModelForMultipleChoice", "AutoModelForQuestionAnswering"]
