"""What an attribution explains: the target F(x), one number per example, and its upstream gradient.

    model                              target                          F(x) for example b
    BertForSequenceClassification,     c (a class index)               logits[b, c]
      BertForNextSentencePrediction
    BertForTokenClassification         (position, label)               logits[b, position, label]
    BertForQuestionAnswering           ("start" | "end", position)     start_logits[b, position] (or end_)
    BertForMaskedLM, BertLMHeadModel   (position, token_id)            logits[b, position, token_id]
    BertForPreTraining                 (position, token_id)            prediction_logits[b, position, token_id]
                                       c (0 or 1)                      seq_relationship_logits[b, c]
    BertModel                          U, an array (B, T, H)           sum(last_hidden_state[b] * U[b])
    any model                          {output name: U (B, ...)}       sum over the names of sum(output[b] * U[b])
    a head of your own                 c (a class index)               logits[b, c] (its declaration's default)
    any model                          (output name, i, j, ...)        output[b, i, j, ...]: the output named,
                                                                       e.g. ("seq_relationship_logits", 1),
                                                                       ("start_logits", 5), ("token_logits", 3, 2)
    any model                          OutputMax(name), OutputSum(name), OutputSoftmax(name, c): a function
                                       of one output per example, as captum's forward functions

Which rows of the table a model takes is its own declaration, `model.attribution_targets`
({kind: output name}, npbert/modeling/loss_terms.py); nothing here knows npbert's head classes.

As captum's `target`: one target for every example, or a list of B targets, one per example.
The gradient of F is the model's backward with the upstream gradient "1 at the selected entry"
(`upstream`), or U itself.  A batch of R = S B rows (S copies of the B examples, as integrated
gradients runs them: row r is example r % B) gets each row its example's target.

    B = examples, R = rows run, T = sequence length, H = hidden size, V = vocab size, K = labels
"""
import numpy as np

from npbert.ops.softmax import softmax_forward


class Target:
    """F(x) = the entries `index[b]` of output `name` (an index target), or sum(output * weights[b])."""

    def __init__(self, name, index=None, weights=None, description="", last_axis=None):
        self.name = name                  # an output name ("logits", ...), or None with weights
        self.index = index                # B tuples indexing output[b], or None
        self.last_axis = last_axis        # "class" or "label": the index's last entry, checked against
                                          # the output's last axis after the first forward
        self.weights = weights            # {output name: (B, ...) upstream}, or None
        self.description = description    # for messages and pictures: "logits[:, 1]"

    def values(self, out, B):
        """F of each of the R rows of the output `out`, (R,)."""
        if self.index is not None:
            a = np.asarray(out[self.name])
            return np.array([a[(r,) + self.index[r % B]] for r in range(a.shape[0])], dtype=a.dtype)
        total = 0
        for name, w in self.weights.items():
            a = np.asarray(out[name])
            rows = a.shape[0]
            total = total + (a * np.tile(w, (rows // B,) + (1,) * (w.ndim - 1))).reshape(rows, -1).sum(axis=1)
        return total

    def upstream(self, out, B):
        """{output name: its upstream gradient (R, ...)}: the backward then differentiates the sum of F."""
        if self.index is not None:
            a = np.asarray(out[self.name])
            d = np.zeros_like(a)
            for r in range(a.shape[0]):
                d[(r,) + self.index[r % B]] = 1
            return {self.name: d}
        ups = {}
        for name, w in self.weights.items():
            rows = np.shape(out[name])[0]
            ups[name] = np.tile(w, (rows // B,) + (1,) * (w.ndim - 1)).astype(np.asarray(out[name]).dtype, copy=False)
        return ups


class OutputFunction:
    """A target that is a function of one output, per example, as captum's tutorials write their
    forward functions (`start_logits.max(1).values`):

        OutputMax(name)             F_b = max of output[b] over its entries   (the entry moves along
                                    an integration path; its gradient is 1 at the entry that is the
                                    max at each point, as torch's max backward)
        OutputSum(name)             F_b = sum of output[b]
        OutputSoftmax(name, c)      F_b = softmax(output[b])[c], output (B, K): a probability

    Build one and pass it as `target=`, e.g. integrated_gradients(model, inputs,
    target=OutputMax("start_logits"))."""

    index = weights = None
    last_axis = None

    def __init__(self, name, description):
        if not isinstance(name, str):
            raise TypeError(f"the output's name must be a string such as 'logits', got {name!r}")
        self.name, self.description = name, description

    def _rows(self, out):
        a = np.asarray(out[self.name])
        return a, a.reshape(a.shape[0], -1)                               # (R, ...), (R, E)


class OutputMax(OutputFunction):
    def __init__(self, name):
        super().__init__(name, f"max({name}[b])")

    def values(self, out, B):
        return self._rows(out)[1].max(axis=1)                             # (R,)

    def upstream(self, out, B):
        a, flat = self._rows(out)
        d = np.zeros_like(flat)                                           # (R, E)
        d[np.arange(flat.shape[0]), flat.argmax(axis=1)] = 1              # the first max, as torch.max
        return {self.name: d.reshape(a.shape)}


class OutputSum(OutputFunction):
    def __init__(self, name):
        super().__init__(name, f"sum({name}[b])")

    def values(self, out, B):
        return self._rows(out)[1].sum(axis=1)

    def upstream(self, out, B):
        return {self.name: np.ones_like(np.asarray(out[self.name]))}


class OutputSoftmax(OutputFunction):
    def __init__(self, name, index):
        super().__init__(name, f"softmax({name}[b])[{index}]")
        self.c = _check_int("class", index, None, "")

    def _probs(self, out):
        a = np.asarray(out[self.name])
        if a.ndim != 2 or not self.c < a.shape[1]:
            raise ValueError(f"target: {self.description} needs {self.name} of shape (B, K) with K > {self.c}, "
                             f"got {a.shape}")
        return softmax_forward(a)[0]                                      # (R, K)

    def values(self, out, B):
        return self._probs(out)[:, self.c]

    def upstream(self, out, B):
        p = self._probs(out)                                              # dp_c / dz_k = p_c ([k = c] - p_k)
        d = -p[:, self.c:self.c + 1] * p
        d[:, self.c] += p[:, self.c]
        return {self.name: d}


def _per_example(target, B, is_one):
    """captum's rule: one target for all, or a list of B (one per example)."""
    if isinstance(target, list):
        if len(target) != B:
            raise ValueError(f"target is a list of {len(target)}, the inputs have {B} examples: give one target "
                             "for all, or one per example")
        return target
    if not is_one(target):
        raise TypeError(f"target {target!r} has the wrong form")
    return [target] * B


def _check_int(name, value, high, what):
    """value as an int in [0, high) (high None: only >= 0 here; the output's size is checked after
    the first forward, check_output_shapes)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"target: {name} must be an integer, got {value!r}")
    if high is None:
        if value < 0:
            raise ValueError(f"target: {name} {value} is out of range: it must be >= 0")
        return int(value)
    if not 0 <= value < high:
        raise ValueError(f"target: {name} {value} is out of range: {what} (0..{high - 1})")
    return int(value)


def resolve_target(model, target, B, T):
    """The Target for `model` on inputs of B examples of T tokens; every wrong target is an error
    naming it (a position past the sequence, a token id past the vocabulary, the wrong form for
    the model; a class past the output's classes is found after the first forward,
    check_output_shapes)."""
    forms = model.attribution_targets
    if forms is None:
        raise TypeError(model.attribution_refusal or f"npbert.interpret does not handle {type(model).__name__}")
    if isinstance(target, OutputFunction):          # a function of an output (its name checked after a forward)
        return target
    if target is None:
        raise ValueError(f"a target is needed for {type(model).__name__}: " + "; or ".join(
            _FORMS[k] for k in forms))
    if isinstance(target, dict):
        return _weights_target(model, target, B)
    if _is_output_index(target, forms):
        return _output_target(target, B)
    kind = _kind(forms, target)
    if kind == "model":
        return _weights_target(model, {forms["model"]: target}, B)
    if kind == "class":
        name = forms["class"]
        targets = _per_example(target, B, _is_int)
        index = [(_check_int("class", c, None, ""),) for c in targets]
        return Target(name, index=index, description=f"{name}[:, {_show(targets)}]", last_axis="class")
    if kind == "token_class":
        name = forms["token_class"]
        targets = _per_example(target, B, _is_pair)
        index = [(_check_int("position", p, T, f"the inputs have {T} tokens"), _check_int("label", c, None, ""))
                 for p, c in targets]
        return Target(name, index=index, description=f"{name}[:, {_show(targets)}]", last_axis="label")
    if kind == "span":
        targets = _per_example(target, B, _is_pair)
        which = {t[0] for t in targets}
        if not which <= {"start", "end"} or len(which) != 1:
            raise ValueError(f"target for {type(model).__name__} is ('start' | 'end', position), the same side for "
                             f"every example; got {target!r}")
        side = which.pop()
        index = [(_check_int("position", p, T, f"the inputs have {T} tokens"),) for _, p in targets]
        return Target(f"{side}_logits", index=index, description=f"{side}_logits[:, {_show([p for _, p in targets])}]")
    # kind == "token": (position, token id)
    name = forms["token"]
    V = model.config.vocab_size
    targets = _per_example(target, B, _is_pair)
    index = [(_check_int("position", p, T, f"the inputs have {T} tokens"),
              _check_int("token id", v, V, f"the vocabulary has {V} tokens")) for p, v in targets]
    return Target(name, index=index, description=f"{name}[:, {_show(targets)}]")


def _is_output_index(target, forms):
    """True for (output name, index, ...) or a list of B of them with one name: the output named
    (any model; for the span head, ("start" | "end", position) stays its sides)."""
    first = target[0] if isinstance(target, list) and target else target
    if not (isinstance(first, tuple) and len(first) >= 1 and isinstance(first[0], str)):
        return False
    # the span head's own form is (side, position): a string there is an output name only when it is one
    return not ("span" in (forms or {}) and not first[0].endswith("_logits"))


def _output_target(target, B):
    """F = output[b][index]: (name, i, j, ...) for every example, or a list of B of them."""
    targets = _per_example(target, B, lambda t: isinstance(t, tuple) and t and isinstance(t[0], str))
    names = {t[0] for t in targets}
    if len(names) != 1:
        raise ValueError(f"target: a list of (output name, index...) names one output for every example, got {sorted(names)}")
    name = names.pop()
    index = []
    for t in targets:
        if not all(_is_int(i) for i in t[1:]):
            raise TypeError(f"target {t!r}: after the output name come integer indices into output[b], e.g. "
                            f"('logits', 1) or ('token_logits', position, label)")
        index.append(tuple(_check_int("index", i, None, "") for i in t[1:]))
    shown = _show([t[1:] for t in targets])
    return Target(name, index=index, description=f"{name}[:, {shown}]", last_axis="every")


def _is_int(t):
    return isinstance(t, (int, np.integer)) and not isinstance(t, bool)


def _is_pair(t):
    return isinstance(t, tuple) and len(t) == 2


def _kind(forms, target):
    """Which of the model's target kinds `target` is written in: the only one it has, or (a model
    with both, pre-training) "class" for an integer and "token" for a pair."""
    if len(forms) == 1:
        return next(iter(forms))
    first = target[0] if isinstance(target, list) and target else target
    if "class" in forms and _is_int(first):
        return "class"
    for kind in forms:
        if kind != "class":
            return kind
    return "class"


_FORMS = {"class": "a class index c (F = logits[:, c]) or a list of one per example",
          "token_class": "(position, label) (F = logits[:, position, label])",
          "span": "('start' | 'end', position) (F = start_logits[:, position])",
          "token": "(position, token_id) (F = logits[:, position, token_id])",
          "model": "an upstream gradient U (B, T, H) of last_hidden_state (F = sum(last_hidden_state * U)), "
                   "or {output name: U}",
          "any": "{output name: upstream gradient (B, ...)}"}


def _weights_target(model, weights, B):
    if not weights:
        raise ValueError("target: an empty dict of upstream gradients")
    out = {}
    for name, w in weights.items():
        if not isinstance(name, str):
            raise TypeError(f"target: the keys of a dict target are output names, got {name!r}")
        w = np.asarray(w)
        if not np.issubdtype(w.dtype, np.floating):
            raise TypeError(f"target: the upstream gradient for {name} must be floating point, got {w.dtype}")
        if w.ndim == 0 or w.shape[0] != B:
            raise ValueError(f"target: the upstream gradient for {name} has shape {w.shape}; its first axis must be "
                             f"the {B} examples")
        out[name] = w.astype(model.state.dtype, copy=False)
    return Target(None, weights=out, description=" + ".join(f"sum({n} * U)" for n in out))


def _show(targets):
    first = targets[0]
    return repr(first) if all(t == first for t in targets) else "per example"


def check_output_shapes(target, out, B):
    """After a first forward: the named outputs exist and a weight target's shapes fit them."""
    names = [target.name] if target.weights is None else list(target.weights)
    for name in names:
        if name not in out or out[name] is None:
            have = [k for k, v in out.items() if v is not None and k != "loss"]
            raise ValueError(f"target: the model has no output {name!r} (its outputs: {have})")
        if target.index is not None:                 # the index fits the output's shape (B, ...)
            shape = tuple(np.shape(out[name]))[1:]
            for index in target.index:
                if len(index) != len(shape):
                    raise ValueError(f"target: {target.description} indexes {len(index)} axes of {name}, which has "
                                     f"shape (B, {', '.join(map(str, shape))})")
                if target.last_axis == "every":           # (output name, index...): every axis in range
                    for axis, (i, n) in enumerate(zip(index, shape)):
                        if not i < n:
                            raise ValueError(f"target: {target.description}: index {i} is out of range for axis "
                                             f"{axis + 1} of {name}, which has shape (B, {', '.join(map(str, shape))})")
                    continue
                K = shape[-1] if shape else 0
                if target.last_axis is not None and not index[-1] < K:
                    what = f"{name} has {K} classes" if target.last_axis == "class" else f"{name} have {K} labels"
                    raise ValueError(f"target: {target.last_axis} {index[-1]} is out of range: {what} (0..{K - 1})")
        if target.weights is not None:
            shape = tuple(np.shape(out[name]))
            if target.weights[name].shape[1:] != shape[1:]:
                raise ValueError(f"target: the upstream gradient for {name} has shape {target.weights[name].shape}, "
                                 f"the output is ({B}, {', '.join(map(str, shape[1:]))})")
