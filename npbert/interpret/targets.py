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

As captum's `target`: one target for every example, or a list of B targets, one per example.
The gradient of F is the model's backward with the upstream gradient "1 at the selected entry"
(`upstream`), or U itself.  A batch of R = S B rows (S copies of the B examples, as integrated
gradients runs them: row r is example r % B) gets each row its example's target.

    B = examples, R = rows run, T = sequence length, H = hidden size, V = vocab size, K = labels
"""
import numpy as np

from npbert.modeling import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction,
                             BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                             BertForTokenClassification, BertLMHeadModel, BertModel)


class Target:
    """F(x) = the entries `index[b]` of output `name` (an index target), or sum(output * weights[b])."""

    def __init__(self, name, index=None, weights=None, description=""):
        self.name = name                  # an output name ("logits", ...), or None with weights
        self.index = index                # B tuples indexing output[b], or None
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
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"target: {name} must be an integer, got {value!r}")
    if not 0 <= value < high:
        raise ValueError(f"target: {name} {value} is out of range: {what} (0..{high - 1})")
    return int(value)


def resolve_target(model, target, B, T):
    """The Target for `model` on inputs of B examples of T tokens; every wrong target is an error
    naming it (a class out of range, a position past the sequence, the wrong form for the head)."""
    if isinstance(model, BertForMultipleChoice):
        raise TypeError("npbert.interpret does not handle BertForMultipleChoice (inputs (B, C, T)): explain one "
                        "choice at a time with the BertModel inside it, model.bert")
    if target is None:
        raise ValueError(f"a target is needed for {type(model).__name__}: {_FORMS.get(_kind(model), _FORMS['any'])}")
    if isinstance(target, dict):
        return _weights_target(model, target, B)
    kind = _kind(model, target)
    cfg = model.config
    if kind == "model":
        return _weights_target(model, {"last_hidden_state": target}, B)
    if kind == "class":
        name = "seq_relationship_logits" if isinstance(model, BertForPreTraining) else "logits"
        K = 2 if isinstance(model, (BertForNextSentencePrediction, BertForPreTraining)) else cfg.num_labels
        targets = _per_example(target, B, _is_int)
        index = [(_check_int("class", c, K, f"{name} has {K} classes"),) for c in targets]
        return Target(name, index=index, description=f"{name}[:, {_show(targets)}]")
    if kind == "token_class":
        targets = _per_example(target, B, _is_pair)
        index = [(_check_int("position", p, T, f"the inputs have {T} tokens"),
                  _check_int("label", c, cfg.num_labels, f"logits have {cfg.num_labels} labels")) for p, c in targets]
        return Target("logits", index=index, description=f"logits[:, {_show(targets)}]")
    if kind == "span":
        targets = _per_example(target, B, _is_pair)
        which = {t[0] for t in targets}
        if not which <= {"start", "end"} or len(which) != 1:
            raise ValueError(f"target for BertForQuestionAnswering is ('start' | 'end', position), the same side for "
                             f"every example; got {target!r}")
        side = which.pop()
        index = [(_check_int("position", p, T, f"the inputs have {T} tokens"),) for _, p in targets]
        return Target(f"{side}_logits", index=index, description=f"{side}_logits[:, {_show([p for _, p in targets])}]")
    # kind == "token": (position, token id)
    name = "prediction_logits" if isinstance(model, BertForPreTraining) else "logits"
    targets = _per_example(target, B, _is_pair)
    index = [(_check_int("position", p, T, f"the inputs have {T} tokens"),
              _check_int("token id", v, cfg.vocab_size, f"the vocabulary has {cfg.vocab_size} tokens"))
             for p, v in targets]
    return Target(name, index=index, description=f"{name}[:, {_show(targets)}]")


def _is_int(t):
    return isinstance(t, (int, np.integer)) and not isinstance(t, bool)


def _is_pair(t):
    return isinstance(t, tuple) and len(t) == 2


def _kind(model, target=None):
    """Which row of the table in the module's docstring; BertForPreTraining by the target's form."""
    if isinstance(model, BertForPreTraining):
        first = target[0] if isinstance(target, list) and target else target
        return "class" if _is_int(first) else "token"
    if isinstance(model, (BertForSequenceClassification, BertForNextSentencePrediction)):
        return "class"
    if isinstance(model, BertForTokenClassification):
        return "token_class"
    if isinstance(model, BertForQuestionAnswering):
        return "span"
    if isinstance(model, (BertForMaskedLM, BertLMHeadModel)):
        return "token"
    if isinstance(model, BertModel):
        return "model"
    return "any"


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
        if target.weights is not None:
            shape = tuple(np.shape(out[name]))
            if target.weights[name].shape[1:] != shape[1:]:
                raise ValueError(f"target: the upstream gradient for {name} has shape {target.weights[name].shape}, "
                                 f"the output is ({B}, {', '.join(map(str, shape[1:]))})")
