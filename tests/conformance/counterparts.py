"""npbert's side of each surface: the object a key's label stands for, built small, and
whether a name or keyword is there.

    Objects(tmp_dir)[label]        npbert's instance (a model, a tokenizer, a Trainer, ...), class
                                   or function for a key's label ("Trainer", "Module", "AdamW", ...)
    present(objects, key)          True: the name exists (for a keyword: the callable takes it by
                                   name); False: it does not; None: the callable takes **kwargs, so
                                   its signature cannot tell
    trigger(objects, key)          call what `key` names with a value npbert must refuse, and
                                   return the exception (None when nothing was raised)
"""
import inspect
import os
import re

KEY = re.compile(r"^(?P<label>\w+)(?:\.(?P<name>\w+))?(?:\((?P<kw>\w+)\))?$")
PIPELINE_KEY = re.compile(r"^pipeline\('(?P<task>[\w-]+)'\)\((?P<kw>\w+)\)$")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s", "a", "dog"]
TINY = dict(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=12, max_position_embeddings=16)


class Refusal:
    """An object that stands for a value npbert must refuse (not None, not a default)."""

    def __repr__(self):
        return "<refused value>"

    def __bool__(self):
        return True


class Objects(dict):
    """label -> npbert's object, built on first use in `tmp_dir`."""

    def __init__(self, tmp_dir):
        super().__init__()
        self.tmp_dir = str(tmp_dir)

    def __missing__(self, label):
        self[label] = value = self._build(label)
        return value

    def model(self):
        """A new tiny model, kept alive here (a parameter of a freed model is refused by optimizers)."""
        import npbert
        self.setdefault("_models", []).append(npbert.BertForSequenceClassification(npbert.BertConfig(**TINY), seed=0))
        return self["_models"][-1]

    def _build(self, label):
        import npbert
        import npbert.optim
        import npbert.training
        if label in ("PreTrainedTokenizerBase", "BertTokenizer"):
            path = os.path.join(self.tmp_dir, "vocab.txt")
            with open(path, "w") as f:
                f.write("\n".join(VOCAB) + "\n")
            return npbert.BertTokenizer(path)
        if label == "BatchEncoding":
            return self["BertTokenizer"]("the cat sat", "on the mat")
        if label in ("PreTrainedModel", "BertPreTrainedModel", "Module"):
            return self.model()
        if label == "Trainer":
            args = npbert.training.TrainingArguments(os.path.join(self.tmp_dir, "out"))
            return npbert.training.Trainer(self.model(), args)
        if label in ("Optimizer", "AdamW"):
            return npbert.optim.AdamW(self.model().parameters())
        if label == "Adam":
            return npbert.optim.Adam(self.model().parameters())
        if label.startswith("DataCollator"):
            return getattr(npbert.training, label)(self["BertTokenizer"])
        for where in (npbert.training, npbert.optim, npbert):
            if hasattr(where, label):
                return getattr(where, label)
        return None


def constructor(objects, label):
    """The callable that builds `label`'s object, taking keywords."""
    import npbert
    import npbert.optim
    import npbert.training
    obj = objects[label]
    if label in ("PreTrainedTokenizerBase", "BertTokenizer"):
        return lambda **kw: npbert.BertTokenizer(os.path.join(objects.tmp_dir, "vocab.txt"), **kw)
    if label == "Trainer":
        return lambda **kw: npbert.training.Trainer(objects.model(), objects["Trainer"].args, **kw)
    if label in ("AdamW", "Adam"):
        cls = getattr(npbert.optim, label)
        return lambda **kw: cls(objects.model().parameters(), **kw)
    if label.startswith("DataCollator"):
        return lambda **kw: type(obj)(objects["BertTokenizer"], **kw)
    if label == "TrainingArguments":
        return lambda **kw: obj(os.path.join(objects.tmp_dir, "out"), **kw)
    return obj


def _takes(fn, kw):
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if kw in params:
        return True
    return None if any(p.kind is p.VAR_KEYWORD for p in params.values()) else False


def present(objects, key):
    m = PIPELINE_KEY.match(key)
    if m:
        from npbert.pipelines import SUPPORTED_TASKS
        cls = SUPPORTED_TASKS[m["task"]]
        return m["kw"] in cls.call_keywords.fget(cls.__new__(cls))
    m = KEY.match(key)
    label, name, kw = m["label"], m["name"], m["kw"]
    obj = objects[label]
    if obj is None:
        return False
    if label == "TrainingArguments" and kw is not None:
        from npbert.training.offline_args import ALIASES, RENAMED
        return kw in obj.__dataclass_fields__ or kw in RENAMED or kw in ALIASES
    if name is None:
        if kw is None:
            return True
        cls = obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)
        return _takes(cls.__init__ if inspect.isclass(cls) else cls, kw)
    if name != "__call__" and not hasattr(obj, name):
        return False
    target = getattr(obj, name)
    if kw is None:
        return True
    return _takes(target, kw) if callable(target) else False


def trigger(objects, key):
    """Call what `key` names with a refused value; the exception raised, or None."""
    m = PIPELINE_KEY.match(key)
    try:
        if m:
            raise AssertionError(f"{key}: refusals of a pipeline's keywords are checked in test_pipelines")
        m = KEY.match(key)
        label, name, kw = m["label"], m["name"], m["kw"]
        kwargs = {kw: Refusal()} if kw else {}
        if name is None:
            constructor(objects, label)(**kwargs)
        else:
            target = getattr(objects[label], name)
            args = (os.path.join(objects.tmp_dir, "saved"),) if name == "save_pretrained" else ()
            target(*args, **kwargs) if callable(target) else None
    except Exception as e:              # noqa: BLE001 (the point: what was raised)
        return e
    return None
