"""BertConfig: the hyper-parameters of a BERT model, with transformers' field names.

Reads transformers' `config.json` and Google's `bert_config.json` (the same field
names, plus a few extras such as `directionality` that are kept but unused).
"""
import json
import os

import numpy as np

from npbert.io._atomic import atomic_write
from npbert.io.hub import hub_name_message, pop_hub_keywords
from npbert.settings import BOOL, PROBABILITY, PROBABILITY_OR_NONE, checked

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
    # Fields a user sets on a built model's config (model.config.gather_masked_lm = True, a dropout
    # probability), checked when set, from config.json too (npbert/settings.py); the sizes are
    # validate()'s, when a model is built.
    SETTINGS = {"hidden_dropout_prob": PROBABILITY, "attention_probs_dropout_prob": PROBABILITY,
                "classifier_dropout": PROBABILITY_OR_NONE, "gather_masked_lm": BOOL, "is_decoder": BOOL}

    def __setattr__(self, name, value):
        if name in self.SETTINGS:
            value = checked(self, name, value)
        object.__setattr__(self, name, value)

    def __init__(self, **kwargs):
        for name, default in _DEFAULTS.items():
            setattr(self, name, kwargs.pop(name, default))
        id2label = kwargs.pop("id2label", None)
        num_labels = kwargs.pop("num_labels", None)
        kwargs.pop("label2id", None)
        if id2label is not None:
            self.id2label = _label_map(id2label)
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

    def validate(self, dtype=None):
        """Raise ValueError if the fields cannot describe a BERT model, or describe one whose
        parameters (in `dtype`, float32 when not given) cannot fit in this machine's memory
        (see `check_parameter_memory`)."""
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
        check_parameter_memory(self, dtype)

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
        stored = read_config_dict(path)
        try:
            return cls.from_dict(stored, **overrides)
        except (ValueError, TypeError) as e:
            raise type(e)(f"{path}: {e}") from None

    @classmethod
    def from_pretrained(cls, path, return_unused_kwargs=False, **overrides):
        """`path`: a directory holding config.json or bert_config.json, or a JSON file.  Keywords
        override the stored fields; the ones that only concern a model hub (`cache_dir`,
        `revision`, `local_files_only`, ...: npbert/io/hub.py) and `from_tf` are accepted and do
        nothing (npbert reads local files only)."""
        pop_hub_keywords(overrides)
        overrides.pop("from_tf", None)
        if not os.path.exists(os.fspath(path)):
            raise FileNotFoundError(f"BertConfig.from_pretrained: '{os.fspath(path)}' is not a directory or a config "
                                    "file." + hub_name_message(os.fspath(path), "configs", "AutoConfig"))
        config = cls.from_json_file(find_config_file(path), **overrides)
        return (config, {}) if return_unused_kwargs else config

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"BertConfig {self.to_json_string()}"


def _label_map(id2label):
    """{int id: name} from a stored id2label, whose keys must be the ids 0..n-1 (JSON keeps them
    as strings): a gap would leave a logit with no name, found only when a prediction needs it."""
    if not isinstance(id2label, dict):
        raise ValueError(f"id2label must be an object {{id: label}}, got {type(id2label).__name__}")
    out = {}
    for k, v in id2label.items():
        try:
            out[int(k)] = v
        except (TypeError, ValueError):
            raise ValueError(f"id2label key {k!r} is not an integer: the keys are the label ids 0..n-1") from None
    if sorted(out) != list(range(len(out))):
        raise ValueError(f"id2label keys must be the label ids 0..{len(out) - 1} (one per logit), got "
                         f"{sorted(out)}; renumber them, and label2id to match")
    return out


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
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a JSON config: byte {e.start} is not UTF-8 (0x{e.object[e.start]:02x}); "
                         f"a config.json is UTF-8 text, as transformers writes it") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: a config must be a JSON object, got {type(d).__name__}")
    return d


# ---- bounded resources ---------------------------------------------------------------------
def _format_bytes(n):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1024
    return f"{n:.3g} EiB"   # pragma: no cover


def memory_limit():
    """Bytes a model may use: NPBERT_MEMORY_LIMIT (e.g. "8G", "512M", "1000000") when set, else
    this machine's physical memory (MemTotal), else None (no check)."""
    text = os.environ.get("NPBERT_MEMORY_LIMIT", "").strip()
    if text:
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
        scale = units.get(text[-1].upper(), 1)
        try:
            return int(float(text[:-1] if scale > 1 else text) * scale)
        except ValueError:
            raise ValueError(f"NPBERT_MEMORY_LIMIT={text!r}: expected a number of bytes, or one with a K/M/G/T "
                             "suffix") from None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def parameter_counts(config):
    """{part: (number of parameters, the fields that make it)} of a BertForPreTraining-sized
    model (the largest head), in exact integers: nothing is allocated."""
    V, H, L = config.vocab_size, config.hidden_size, config.num_hidden_layers
    I, P, T = config.intermediate_size, config.max_position_embeddings, config.type_vocab_size
    layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H   # Q K V O, LN, FFN in/out, LN
    return {
        "word embeddings": (V * H, f"vocab_size ({V}) x hidden_size ({H})"),
        "position embeddings": (P * H, f"max_position_embeddings ({P}) x hidden_size ({H})"),
        "token type embeddings": (T * H, f"type_vocab_size ({T}) x hidden_size ({H})"),
        "encoder layers": (L * layer, f"num_hidden_layers ({L}) x one layer of hidden_size {H} and "
                                      f"intermediate_size {I} ({layer:,} parameters)"),
        "pooler and heads": (2 * (H * H + H) + 2 * H + V + 2 * H + 2 + max(1, config.num_labels) * (H + 1),
                             f"hidden_size ({H}), vocab_size ({V})"),
    }


def check_parameter_memory(config, dtype=None, limit=None):
    """Refuse (ValueError naming the field) a config whose parameters alone would not fit in
    memory (`memory_limit()`), before anything is allocated: `max_position_embeddings: 1e9` or
    `num_hidden_layers: 1000000` is an error here, not a MemoryError (or a swapping machine) later."""
    limit = memory_limit() if limit is None else limit
    if limit is None:
        return
    itemsize = np.dtype(dtype if dtype is not None else np.float32).itemsize
    parts = parameter_counts(config)
    total = sum(n for n, _ in parts.values()) * itemsize
    if total <= limit:
        return
    part, (n, fields) = max(parts.items(), key=lambda kv: kv[1][0])
    raise ValueError(f"BertConfig asks for {_format_bytes(total)} of {np.dtype(dtype or np.float32).name} parameters, "
                     f"more than the {_format_bytes(limit)} of memory here (NPBERT_MEMORY_LIMIT or physical memory): "
                     f"the {part} alone are {fields} = {_format_bytes(n * itemsize)}; check those fields")


def check_max_seq_length(max_seq_length, config, flag="--max_seq_length", batch_size=None, dtype=None, limit=None):
    """Refuse a sequence length the model cannot take (ValueError naming `flag`): longer than
    config.max_position_embeddings, or, when `batch_size` is given, one whose training
    activations (attention scores and probabilities of every layer, kept for the backward:
    about L x B x N x T^2 x 3 values, plus L x B x T x (10 H + 2 I)) would not fit in memory."""
    T = int(max_seq_length)
    if T < 1:
        raise ValueError(f"{flag} must be at least 1, got {T}")
    if T > config.max_position_embeddings:
        raise ValueError(f"{flag} {T} is more than the model's max_position_embeddings "
                         f"({config.max_position_embeddings}): positions past {config.max_position_embeddings - 1} "
                         "have no embedding")
    if batch_size is None:
        return
    limit = memory_limit() if limit is None else limit
    if limit is None:
        return
    itemsize = np.dtype(dtype if dtype is not None else np.float32).itemsize
    L, N, H, I = config.num_hidden_layers, config.num_attention_heads, config.hidden_size, config.intermediate_size
    need = L * batch_size * (3 * N * T * T + T * (10 * H + 2 * I)) * itemsize
    if need > limit:
        raise ValueError(f"{flag} {T} with a batch of {batch_size}: one training step keeps about "
                         f"{_format_bytes(need)} of activations ({L} layers x {batch_size} x {N} heads x {T}^2 attention "
                         f"scores ...), more than the {_format_bytes(limit)} of memory here; lower {flag} or the "
                         "batch size")
