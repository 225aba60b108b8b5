"""BertConfig: the hyper-parameters of a BERT model, with transformers' field names.

Reads transformers' `config.json` and Google's `bert_config.json` (the same field
names, plus a few extras such as `directionality` that are kept but unused).
"""
import json
import os

# transformers' BertConfig fields and their defaults, in its order.
_DEFAULTS = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "use_cache": True,
    "classifier_dropout": None,
    "is_decoder": False,
    "add_cross_attention": False,
    "bos_token_id": None,
    "eos_token_id": None,
    "tie_word_embeddings": True,
    "problem_type": None,
}

# Keywords that name a config field (besides _DEFAULTS): transformers' PretrainedConfig fields
# BERT uses.  from_pretrained refuses a keyword that is neither one of these, a field of the
# loaded config, nor a loader or model option.
CONFIG_FIELDS = (*_DEFAULTS, "num_labels", "id2label", "label2id", "output_attentions",
                 "output_hidden_states", "return_dict", "position_embedding_type", "finetuning_task",
                 "architectures")

_PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
CONFIG_NAMES = ("config.json", "bert_config.json")


class BertConfig:
    """transformers' BertConfig fields and defaults; unknown fields are kept as attributes.

    `num_labels` (default 2) and `id2label`/`label2id` follow transformers: giving
    `id2label` sets `num_labels`, giving `num_labels` alone makes `LABEL_i` names.
    """

    model_type = "bert"
    # transformers' PretrainedConfig defaults for the forward's outputs: read when the call does
    # not say; class attributes, so a config only writes them to config.json once they are set
    output_attentions = False
    output_hidden_states = False
    return_dict = True

    def __init__(self, **kwargs):
        for name, default in _DEFAULTS.items():
            setattr(self, name, kwargs.pop(name, default))
        id2label = kwargs.pop("id2label", None)
        num_labels = kwargs.pop("num_labels", None)
        kwargs.pop("label2id", None)
        if id2label is not None:
            self.id2label = {int(k): v for k, v in id2label.items()}
            if num_labels is not None and num_labels != len(self.id2label):
                raise ValueError(f"num_labels={num_labels} contradicts id2label with {len(self.id2label)} entries")
        else:
            n = 2 if num_labels is None else int(num_labels)
            self.id2label = {i: f"LABEL_{i}" for i in range(n)}
        kwargs.pop("model_type", None)
        for name, value in kwargs.items():  # extras such as `architectures`, `directionality`
            setattr(self, name, value)

    @property
    def num_labels(self):
        return len(self.id2label)

    @num_labels.setter
    def num_labels(self, n):
        self.id2label = {i: self.id2label.get(i, f"LABEL_{i}") for i in range(int(n))}

    @property
    def label2id(self):
        return {v: k for k, v in self.id2label.items()}

    def validate(self):
        """Raise ValueError if the fields cannot describe a BERT model."""
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"The hidden size ({self.hidden_size}) is not a multiple of the number of attention "
                f"heads ({self.num_attention_heads})")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1], got {p!r}")
        if self.classifier_dropout is not None and not 0.0 <= self.classifier_dropout <= 1.0:
            raise ValueError(f"BertConfig.classifier_dropout must be in [0, 1] or None, got {self.classifier_dropout!r}")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"BertConfig.pad_token_id={self.pad_token_id} is outside [0, vocab_size={self.vocab_size})")
        if self.problem_type is not None and self.problem_type not in _PROBLEM_TYPES:
            raise ValueError(f"BertConfig.problem_type must be one of {_PROBLEM_TYPES} or None, got {self.problem_type!r}")
        # Variants transformers' BERT has and npbert does not: refuse them rather than silently
        # running a different model.
        position_embedding_type = getattr(self, "position_embedding_type", "absolute")
        if position_embedding_type != "absolute":
            raise NotImplementedError(f"position_embedding_type={position_embedding_type!r} is not supported "
                                      "by npbert: only 'absolute' position embeddings are implemented")
        if self.add_cross_attention:
            raise NotImplementedError("add_cross_attention=True (BERT as a seq2seq decoder with cross-attention) "
                                      "is not supported by npbert")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"BertConfig.layer_norm_eps must be positive, got {self.layer_norm_eps!r}")

    @property
    def head_size(self):
        """D = H / N, the size of one attention head."""
        return self.hidden_size // self.num_attention_heads

    # ---- serialisation -------------------------------------------------------------
    def to_dict(self):
        d = {k: v for k, v in vars(self).items() if not k.startswith("_") and k != "id2label"}
        d["id2label"] = {str(k): v for k, v in self.id2label.items()}
        d["label2id"] = {v: k for k, v in self.id2label.items()}
        d["model_type"] = self.model_type
        return d

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        from npbert.io._atomic import atomic_write
        with atomic_write(path, "w") as f:
            f.write(self.to_json_string())

    @classmethod
    def from_dict(cls, d, **overrides):
        """`overrides` replace fields of `d`; `num_labels` alone re-sizes the stored label map
        (set after construction, as transformers' from_pretrained sets its keywords)."""
        if "num_labels" in overrides and "id2label" not in overrides:
            overrides = dict(overrides)
            num_labels = overrides.pop("num_labels")
            config = cls(**{**d, **overrides})
            config.num_labels = num_labels
            return config
        return cls(**{**d, **overrides})

    @classmethod
    def from_json_file(cls, path, **overrides):
        return cls.from_dict(read_config_dict(path), **overrides)

    @classmethod
    def from_pretrained(cls, path, **overrides):
        """`path`: a directory holding config.json or bert_config.json, or a JSON file."""
        return cls.from_json_file(find_config_file(path), **overrides)

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"BertConfig {self.to_json_string()}"


def find_config_file(path):
    """The config file for `path` (a directory, a JSON file, or a weights file beside its config)."""
    if os.path.isfile(path) and path.endswith(".json"):
        return path
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    for name in CONFIG_NAMES:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"no config.json or bert_config.json in {directory}")


def read_config_dict(path):
    """The JSON object of a config file, as a dict (errors name the file)."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            d = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a valid JSON config ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: a config must be a JSON object, got {type(d).__name__}")
    return d
