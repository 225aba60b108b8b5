"""Label sets of a training file, decided by a written rule, never guessed.

    labels = label_set([(line, value), ...], path, problem_type=None)
    labels.problem_type       "single_label_classification", "regression" or "multi_label_classification"
    labels.names              the class names in id order (None for regression)
    labels.encode(value, path, line)   -> class id, float target, or multi-hot list

The rule, for the labels of the training file (a CSV cell is a string, a JSON value a
string, number, boolean or list):

- Every label is a list -> multi-label; the lists' elements are labels as below.
- Each label is a *number* (a JSON number, or a string `float()` reads: "1", "+2.0",
  "1.5E-4", " 3 "), a *name* (any other non-empty string) or a *boolean* (JSON true/false).
  One file holds one kind: numbers mixed with names ("1" and "positive", or SNLI's "-" among
  "0"/"1"/"2") or booleans with anything else are an error naming a line of each.
- Empty labels (an empty cell, whitespace, JSON null) and non-finite numbers (nan, inf, a
  value beyond float32's range such as 1e39) are errors naming the file and line.
- A number's class is its value: 1, "1", 1.0, "1.0" and "+1" are the one class "1"; a
  non-integer is named by Python's shortest repr ("0.5").  Names are stripped of surrounding
  whitespace.  Classes are sorted by value (numbers) or alphabetically (names), as
  transformers' run_glue.py sorts its label list.
- Regression only when asked (`--problem_type regression`) or when every label is a finite
  number and at least one is not an integer (0.5, 1.25, 1.5E-4, 2.0 are regression targets,
  not four classes).  Otherwise single-label classification, which needs at least two
  classes in the training file.
"""
import math

import numpy as np

PROBLEM_TYPES = ("single_label_classification", "regression", "multi_label_classification")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _where(path, line):
    return f"{path}:{line}" if line is not None else f"{path}"


def parse_label(value, path, line):
    """(kind, parsed) of one scalar label: ("number", float), ("name", str) or ("bool", bool);
    an empty, non-finite or unusable label is a ValueError naming file and line."""
    where = _where(path, line)
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, (int, float)):
        number = float(value) if not isinstance(value, int) or abs(value) < 2 ** 1023 else math.inf
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError(f"{where}: the label is empty")
        try:
            number = float(text)
        except ValueError:
            return "name", text
    elif value is None:
        raise ValueError(f"{where}: the label is empty (null)")
    else:
        raise ValueError(f"{where}: the label {value!r} is a {type(value).__name__}; a label is a name, a number "
                         "or (multi-label) a list of them")
    if not math.isfinite(number) or abs(number) > _FLOAT32_MAX:
        raise ValueError(f"{where}: the label {value!r} is not a finite float32 number (a class or target must be; "
                         "if it is a class name, make it a word)")
    return "number", number


def number_name(x):
    """The class name of a number: "1" for 1, 1.0, "+1"; "0.5" for 0.5."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 2 ** 53 else repr(float(x))


class LabelSet:
    def __init__(self, problem_type, names, kind, source="the training file"):
        self.problem_type, self.names, self.kind, self.source = problem_type, names, kind, source
        self.label2id = {n: i for i, n in enumerate(names)} if names is not None else None

    def _name(self, value, path, line):
        kind, parsed = parse_label(value, path, line)
        if kind != self.kind:
            whose = "the training file's" if self.source == "the training file" else f"{self.source}:"
            raise ValueError(f"{_where(path, line)}: the label {value!r} is a {kind}; {whose} labels are {self.kind}s")
        return number_name(parsed) if kind == "number" else str(parsed)

    def encode(self, value, path, line):
        """The model's target for `value`: a class id, a float (regression), a multi-hot list."""
        where = _where(path, line)
        if self.problem_type == "regression":
            kind, parsed = parse_label(value, path, line)
            if kind != "number":
                raise ValueError(f"{where}: the label {value!r} is not a number (regression)")
            return parsed
        if self.problem_type == "multi_label_classification":
            if not isinstance(value, list):
                raise ValueError(f"{where}: multi-label rows need a list of labels, got {value!r}")
            vec = np.zeros(len(self.names), dtype=np.float64)
            for x in value:
                name = self._name(x, path, line)
                if name not in self.label2id:
                    raise ValueError(f"{where}: label {x!r} does not occur in {self.source}")
                vec[self.label2id[name]] = 1.0
            return vec.tolist()
        if isinstance(value, list):
            raise ValueError(f"{where}: a list of labels {value!r}, but the training file has one label a row")
        name = self._name(value, path, line)
        if name not in self.label2id:
            shown = self.names[:10]
            raise ValueError(f"{where}: label {value!r} does not occur in {self.source} (labels: {shown}"
                             f"{' ...' if len(self.names) > 10 else ''})")
        return self.label2id[name]


def label_set(labels, path, problem_type=None):
    """The LabelSet of a training file's labels `[(line, value)]` by the module's rule."""
    if problem_type is not None and problem_type not in PROBLEM_TYPES:
        raise ValueError(f"problem_type must be one of {PROBLEM_TYPES}, got {problem_type!r}")
    if not labels:
        raise ValueError(f"{path}: no labelled rows")
    lists = [isinstance(v, list) for _, v in labels]
    if problem_type == "multi_label_classification" or (problem_type is None and all(lists)):
        return _multi_label(labels, path)
    if any(lists):
        line = labels[lists.index(True)][0]
        raise ValueError(f"{_where(path, line)}: a list of labels, but other rows have one label "
                         f"(--problem_type {problem_type or 'single_label_classification'})")
    parsed = [(line, value, *parse_label(value, path, line)) for line, value in labels]
    if problem_type == "regression":
        for line, value, kind, _ in parsed:
            if kind != "number":
                raise ValueError(f"{_where(path, line)}: the label {value!r} is not a number "
                                 "(--problem_type regression)")
        return LabelSet("regression", None, "number")
    kind = _one_kind(parsed, path)
    if problem_type is None and kind == "number" and any(not x.is_integer() for *_, x in parsed):
        return LabelSet("regression", None, "number")
    if kind == "number":
        names = [number_name(x) for x in sorted({x for *_, x in parsed})]
    else:
        names = sorted({str(x) for *_, x in parsed})
    if len(names) < 2:
        raise ValueError(f"{path}: every label is {names[0]!r} ({len(parsed)} rows): a classifier needs at least two "
                         "classes in the training file" + ("; for a real-valued target use --problem_type regression"
                                                           if kind == "number" else ""))
    return LabelSet("single_label_classification", names, kind)


def label_set_of_model(problem_type, names, source="the model's label set (config.json)"):
    """The LabelSet of a fine-tuned classifier (its config's problem_type and id2label names),
    so that validation and test labels are read by the same rule as the training file's were."""
    if problem_type == "regression" or names is None:
        return LabelSet("regression", None, "number", source)
    kinds = {parse_label(n, source, None)[0] for n in names}
    return LabelSet(problem_type, list(names), kinds.pop() if len(kinds) == 1 else "name", source)


def _one_kind(parsed, path):
    first = {}
    for line, value, kind, _ in parsed:
        first.setdefault(kind, (line, value))
    if len(first) > 1:
        shown = " and ".join(f"{k}s ({_where(path, ln)}: {v!r})" for k, (ln, v) in first.items())
        raise ValueError(f"{path}: the labels mix {shown}: give every row the same kind of label")
    return next(iter(first))


def _multi_label(labels, path):
    parsed = []
    for line, value in labels:
        if not isinstance(value, list):
            raise ValueError(f"{_where(path, line)}: multi-label rows need a list of labels, got {value!r}")
        parsed += [(line, x, *parse_label(x, path, line)) for x in value]
    if not parsed:
        raise ValueError(f"{path}: every row's list of labels is empty: no label to learn")
    kind = _one_kind(parsed, path)
    if kind == "number":
        names = [number_name(x) for x in sorted({x for *_, x in parsed})]
    else:
        names = sorted({str(x) for *_, x in parsed})
    return LabelSet("multi_label_classification", names, kind)


def check_tag_set(tags, path):
    """Token classification: the training file's tag set needs at least two tags."""
    if len(tags) < 2:
        raise ValueError(f"{path}: every word is tagged {tags[0]!r}: a tagger needs at least two tags in the "
                         "training file" if tags else f"{path}: no tags")
