"""transformers' and torch's public surface, read from the installed packages themselves.

surface() -> {key: (surface, kind)} for every public name and keyword of the classes and
functions npbert mirrors (SOURCES).  Keys read as a reader would write them:

    Trainer.train                       a method or attribute (kind "name")
    Trainer.train(resume_from_checkpoint)   one keyword of it (kind "keyword")
    Trainer(tokenizer)                  a constructor keyword
    get_scheduler(name)                 a function's keyword

Only inspect.signature, dataclasses.fields and dir are used: nothing is called.  A method
inherited from a base listed as its own surface is listed there only (PreTrainedModel's
torch.nn.Module methods under Module).
"""
import dataclasses
import inspect


def _public(name):
    return not name.startswith("_")


def _keywords(fn):
    """The names of fn's parameters a caller may pass by keyword (self, *args, **kwargs aside)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.name not in ("self", "cls")
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _own_names(cls, bases=()):
    """cls's public names not defined by any of `bases` (listed with those bases)."""
    inherited = set().union(*(dir(b) for b in bases)) if bases else set()
    return sorted(n for n in dir(cls) if _public(n) and n not in inherited)


def _patched_in(cls, name):
    """A function another package set on cls at run time (transformers adds `smart_apply` to
    torch.nn.Module when it first initialises weights): not cls's own surface."""
    attr = inspect.getattr_static(cls, name, None)
    module = getattr(attr, "__module__", None) or ""
    return inspect.isfunction(attr) and module.split(".")[0] != cls.__module__.split(".")[0]


def _class(label, cls, bases=(), init=True, methods=True, skip=(), extra=()):
    out = {}
    if init:
        for kw in _keywords(cls.__init__):
            out[f"{label}({kw})"] = "keyword"
    if methods:
        for name in list(extra) + _own_names(cls, bases):
            if name in skip or _patched_in(cls, name):
                continue
            out[f"{label}.{name}"] = "name"
            attr = inspect.getattr_static(cls, name, None)
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if inspect.isfunction(attr):
                for kw in _keywords(attr):
                    out[f"{label}.{name}({kw})"] = "keyword"
    return out


def _function(label, fn):
    out = {label: "name"}
    for kw in _keywords(fn):
        out[f"{label}({kw})"] = "keyword"
    return out


def _dataclass(label, cls):
    return {f"{label}({f.name})": "keyword" for f in dataclasses.fields(cls) if f.init}


def surface():
    """{key: (surface label, kind)} over every source; see the module docstring."""
    import torch
    import transformers
    from transformers import pipelines as tp

    module, optimizer = torch.nn.Module, torch.optim.Optimizer
    found = {}

    def add(label, entries):
        for key, kind in entries.items():
            found.setdefault(key, (label, kind))

    # -- training
    add("Trainer", _class("Trainer", transformers.Trainer))
    add("TrainingArguments", _dataclass("TrainingArguments", transformers.TrainingArguments))
    for name in ("DataCollatorWithPadding", "DataCollatorForTokenClassification",
                 "DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask"):
        cls = getattr(transformers, name, None)
        if cls is None:                 # (transformers 5 folded whole-word masking into the MLM collator)
            continue
        add("collators", _dataclass(name, cls))
        add("collators", {f"{name}.__call__": "name"})
        add("collators", {f"{name}.{n}": "name" for n in _own_names(cls) if callable(getattr(cls, n, None))})
    add("collators", _function("default_data_collator", transformers.default_data_collator))
    # -- optimization
    add("schedules", {f"SchedulerType.{m.name}": "name" for m in transformers.SchedulerType})
    for name in ("get_scheduler", "get_constant_schedule", "get_constant_schedule_with_warmup",
                 "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
                 "get_cosine_with_hard_restarts_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
                 "get_inverse_sqrt_schedule", "get_cosine_with_min_lr_schedule_with_warmup",
                 "get_wsd_schedule"):
        if hasattr(transformers, name) or hasattr(transformers.optimization, name):
            add("schedules", _function(name, getattr(transformers.optimization, name)))
    add("torch.optim.Optimizer", _class("Optimizer", optimizer, init=False))
    add("torch.optim.Optimizer", _function("AdamW", torch.optim.AdamW))
    add("torch.optim.Optimizer", _function("Adam", torch.optim.Adam))
    # -- tokenizer
    base = transformers.PreTrainedTokenizerBase
    add("PreTrainedTokenizerBase", _class("PreTrainedTokenizerBase", base, init=False, extra=("__call__",)))
    # the special tokens and their ids (properties transformers 5 answers through __getattr__)
    for name in base.SPECIAL_TOKENS_ATTRIBUTES:
        add("PreTrainedTokenizerBase", {f"PreTrainedTokenizerBase.{name}": "name",
                                        f"PreTrainedTokenizerBase.{name}_id": "name"})
    add("BertTokenizer", _class("BertTokenizer", transformers.BertTokenizer, bases=(base,)))
    add("BatchEncoding", _class("BatchEncoding", transformers.BatchEncoding, bases=(dict,), init=False))
    # -- models
    add("PreTrainedModel", _class("PreTrainedModel", transformers.PreTrainedModel, bases=(module,), init=False))
    add("BertPreTrainedModel", _class("BertPreTrainedModel", transformers.BertPreTrainedModel,
                                      bases=(transformers.PreTrainedModel,), init=False))
    add("torch.nn.Module", _class("Module", module, init=False))
    for name in sorted(n for n in dir(transformers) if n.startswith("AutoModel") or n in ("AutoConfig", "AutoTokenizer")):
        add("Auto classes", {name: "name"})
    for name in ("AutoConfig", "AutoTokenizer", "AutoModel"):      # (every AutoModelFor* has AutoModel's methods)
        add("Auto classes", _class(name, getattr(transformers, name), init=False))
    # -- pipelines
    add("pipeline", _function("pipeline", transformers.pipeline))
    # (transformers 5.x removed its question-answering pipeline; npbert's follows 4.57's)
    for task, name in (("fill-mask", "FillMaskPipeline"), ("text-classification", "TextClassificationPipeline"),
                       ("token-classification", "TokenClassificationPipeline"),
                       ("question-answering", "QuestionAnsweringPipeline"),
                       ("feature-extraction", "FeatureExtractionPipeline")):
        cls = getattr(tp, name, None)
        if cls is None:
            continue
        add("pipelines", {f"pipeline('{task}')({kw})": "keyword" for kw in _keywords(cls._sanitize_parameters)})
    return found


if __name__ == "__main__":
    import collections
    s = surface()
    print(len(s), collections.Counter(v[0] for v in s.values()))
