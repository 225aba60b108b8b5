"""The task head of `npbert explain --html`: which head a checkpoint has, its outputs as stages
with named dims, the labels the command line gives it, and the gradient its loss sends into BERT.

    B = batch, T = sequence length, H = hidden size, V = vocab size,
    K = the head's classes (num_labels; 2 for next sentence prediction), C = choices

Nothing here knows a head class by its loss.  What the page needs from a head it reads from the
head's declarations (npbert/modeling/loss_terms.py): `loss_terms(batch)` and the HeadLoss its call
builds from them (the terms of its loss, each `weight * mean` over `count` items, and their
gradients by output name), `attribution_targets` (which output scores classes, tokens,
token classes or spans: the output's dims), the forward's label arguments (transformers' names:
`labels`, `next_sentence_label`, `start_positions`, `end_positions`), and its `backward(...)`.
"""
import contextlib
import inspect
import json
import os
import re

import numpy as np

import npbert
from npbert.cli.common import CliError, load_tokenizer
from npbert.cli.explain_walk import BACKWARD_TOL, check, concat
from npbert.modeling.loss_terms import HeadLoss

# the label arguments of transformers' heads, in the order of their forward's signature
LABEL_ARGS = ("labels", "next_sentence_label", "start_positions", "end_positions")
# the kind of target an output is (its attribution_targets key) -> its dims after B
KIND_DIMS = {"class": ("K",), "token_class": ("T", "K"), "token": ("T", "V"), "span": ("T",)}
# heads whose inputs have a choice axis, (B, C, T): the page gives them its one sentence as one choice
CHOICE_HEADS = ("BertForMultipleChoice",)


def head_class(model_dir):
    """The npbert head class named by model_dir/config.json's "architectures", or None (no head:
    BertModel, another class, or no folder)."""
    config_file = None if model_dir is None else os.path.join(model_dir, "config.json")
    if config_file is None or not os.path.isfile(config_file):
        return None
    try:
        with open(config_file, encoding="utf-8") as f:
            names = json.load(f).get("architectures") or []
    except (OSError, ValueError):
        return None                             # the model's loader reports a bad config.json
    cls = getattr(npbert, names[0], None) if names else None
    if (not isinstance(cls, type) or not issubclass(cls, npbert.BertPreTrainedModel)
            or issubclass(cls, npbert.BertModel)):
        return None
    return cls


def head_inputs(head, ids, types):
    """The forward's inputs for the page's one sentence (or pair): (B, T), or (B, C=1, T) for a head
    whose inputs have a choice axis."""
    mask = np.ones_like(ids)
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if type(head).__name__ in CHOICE_HEADS:
        inputs = {k: v[:, None] for k, v in inputs.items()}                      # (B, 1, T)
    return inputs


def label_args(head):
    """The head's label arguments, in its forward's order (e.g. ["labels", "next_sentence_label"])."""
    params = inspect.signature(head.forward).parameters
    return [name for name in params if name in LABEL_ARGS]


def output_kinds(head):
    """{output name: kind} from the head's attribution_targets ("class", "token", ...)."""
    kinds = {}
    for kind, name in (head.attribution_targets or {}).items():
        if kind == "span":
            kinds.update(start_logits="span", end_logits="span")
        elif name is not None:
            kinds[name] = kind
    return kinds


def output_dims(head, name, shape):
    """The named dims of the head's output `name` of `shape` (B first)."""
    kind = output_kinds(head).get(name)
    if type(head).__name__ in CHOICE_HEADS and len(shape) == 2:
        dims = ("C",)
    elif kind in KIND_DIMS and len(KIND_DIMS[kind]) == len(shape) - 1:
        dims = KIND_DIMS[kind]
    else:                                       # undeclared: classes per example, or per token
        dims = ("K",) if len(shape) == 2 else ("T", "K")
    return ["B", *dims]


def head_outputs(head, output):
    """[(name, array)] of the head's outputs whose name ends in "logits", in the output's order."""
    return [(name, output[name]) for name in output.keys() if name.endswith("logits") and output[name] is not None]


def output_source(cls, name):
    """(line, text) of the line of cls.forward that computes output `name`: the output object is
    built with `name=variable`; the line is the first that assigns that variable."""
    lines, start = inspect.getsourcelines(cls.forward)
    var = name
    for line in lines:
        m = re.search(rf"\b{name}=(\w+)", line)
        if m:
            var = m.group(1)
            break
    assign = re.compile(rf"^\s*(?:\w+\s*,\s*)*{var}\s*(?:,\s*\w+\s*)*=(?!=)")
    for k, line in enumerate(lines):
        if assign.match(line):
            return start + k, line.split("  #")[0].split(" # ")[0].strip()          # the code, not its comment
    return start, lines[0].strip()


# ---- labels from the command line -------------------------------------------------------------

def _label_id(config, text, K, flag):
    """A class index from an index or a name of config.id2label."""
    names = {str(v): int(k) for k, v in (config.id2label or {}).items()} if len(config.id2label or {}) == K else {}
    if text in names:
        return names[text]
    try:
        value = int(text)
    except ValueError:
        raise CliError(f"{flag} {text!r}: not a class index (0..{K - 1})"
                       + (f" nor a label of this model ({', '.join(names)})" if names else ""), status=2) from None
    if value != -100 and not 0 <= value < K:
        raise CliError(f"{flag} {text}: out of range, the head has {K} classes (0..{K - 1})", status=2)
    return value


def _floats(text, n, flag, what):
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise CliError(f"{flag} {text!r}: give {what}", status=2) from None
    if len(values) != n:
        raise CliError(f"{flag} {text!r}: give {what} ({n} numbers, got {len(values)})", status=2)
    return values


def _parse(head, arg, kind, text, flag, logits, tokens, model_dir):
    """One label argument's array from its command-line text (logits: the output it scores)."""
    c = head.config
    T = len(tokens)
    K = None if logits is None else logits.shape[-1]
    if arg in ("start_positions", "end_positions"):
        try:
            p = int(text)
        except ValueError:
            raise CliError(f"{flag}: position {text!r} is not an integer", status=2) from None
        if not 0 <= p < T:
            raise CliError(f"{flag}: position {p} is out of range, the input has {T} tokens (0..{T - 1})", status=2)
        return np.array([p], dtype=np.int64)                                         # (B,)
    if kind == "token":                          # masked LM: one vocabulary token per [MASK] of the text
        tok = load_tokenizer(model_dir, "--model")
        masks = [t for t, token in enumerate(tokens) if token == tok.mask_token]
        words = text.split(",")
        if not masks:
            raise CliError(f"{flag} {text!r}: the text has no {tok.mask_token}: put {tok.mask_token} where the model "
                           "should predict a token, and give that token here", status=2)
        if len(words) != len(masks):
            raise CliError(f"{flag} {text!r}: the text has {len(masks)} {tok.mask_token} token(s): give one token "
                           f"for each, separated by commas", status=2)
        labels = np.full((1, T), -100, dtype=np.int64)                               # (B, T): -100 not asked
        for t, word in zip(masks, words):
            if word in tok.vocab:
                labels[0, t] = tok.vocab[word]
            elif word.isdigit() and int(word) < c.vocab_size:
                labels[0, t] = int(word)
            else:
                raise CliError(f"{flag}: {word!r} is not in the model's vocabulary (it splits into "
                               f"{tok.tokenize(word)}): give one of its tokens, or a token id", status=2)
        return labels
    if kind == "token_class":                    # one class per token, -100 for none
        values = text.split(",")
        if len(values) != T:
            raise CliError(f"{flag} {text!r}: give one label per token, {T} of them separated by commas (-100 for a "
                           f"token without one): {' '.join(tokens)}", status=2)
        return np.array([[_label_id(c, v.strip(), K, flag) for v in values]], dtype=np.int64)   # (B, T)
    # one label per example: a class; a number for regression; K numbers for multi-label
    if c.problem_type == "regression" or (c.problem_type is None and K == 1 and arg == "labels"):
        values = _floats(text, K, flag, "the regression target" + ("s" if K > 1 else ""))
        return np.array(values if K > 1 else values[0], dtype=np.float64)[None]     # (B,) or (B, K)
    if c.problem_type == "multi_label_classification":
        return np.array([_floats(text, K, flag, "one 0/1 value per class, separated by commas")])   # (B, K)
    value = _label_id(c, text.strip(), K, flag)
    if value == -100:
        raise CliError(f"{flag} -100 leaves the loss without any item: give a class", status=2)
    return np.array([value], dtype=np.int64)                                         # (B,)


def parse_labels(head, args, output, tokens, model_dir):
    """{label argument: array} from --label (and --next_sentence_label), for the head's forward."""
    names = label_args(head)
    kinds = output_kinds(head)
    outputs = dict(head_outputs(head, output))
    main = (next((n for n, k in kinds.items() if k == "token"), None) or next(iter(outputs)))
    if type(head).__name__ in CHOICE_HEADS:
        raise CliError(f"--label: {type(head).__name__} scores choices, and the page gives it one (the text): the "
                       "cross-entropy over one choice is 0 whatever the weights. Leave --label out", status=2)
    if "start_positions" in names:
        parts = args.label.split(",")
        if len(parts) != 2:
            raise CliError(f"--label {args.label!r}: {type(head).__name__} takes the answer span as START,END "
                           f"(token positions, 0..{len(tokens) - 1})", status=2)
        return {"start_positions": _parse(head, "start_positions", "span", parts[0], "--label START", None, tokens,
                                          model_dir),
                "end_positions": _parse(head, "end_positions", "span", parts[1], "--label END", None, tokens,
                                        model_dir)}
    if "next_sentence_label" in names and args.next_sentence_label is None:
        raise CliError(f"{type(head).__name__}'s loss needs --next_sentence_label too (0: --text_pair follows "
                       "--text, 1: it is a random sentence)", status=2)
    labels = {}
    for name in names:
        if name == "next_sentence_label":
            nsp = next((n for n, k in kinds.items() if k == "class"), "seq_relationship_logits")
            labels[name] = _parse(head, name, "class", str(args.next_sentence_label), "--next_sentence_label",
                                  outputs[nsp], tokens, model_dir)
        else:
            labels[name] = _parse(head, name, kinds.get(main), args.label, "--label", outputs[main], tokens, model_dir)
    if args.next_sentence_label is not None and "next_sentence_label" not in names:
        raise CliError(f"--next_sentence_label: {type(head).__name__} has no next-sentence loss; give --label only",
                       status=2)
    return labels


# ---- the loss's gradient ----------------------------------------------------------------------

def loss_gradients(head):
    """{output name: d loss / d output} in float64: the backward of the head's loss as its last forward
    built it (model.head_loss, npbert/modeling/loss_terms.py), nothing restated here."""
    return {k: np.asarray(v, dtype=np.float64) for k, v in head.head_loss.backward(1.0).items()}


def loss_gradient_error(terms, output, dout, entries=3, step=1e-5):
    """max over a few entries of each output the loss reads of |d loss / d entry - its central
    difference| / (1 + |d loss / d entry|): the loss recomputed in float64 from the same declared
    terms on the output moved by +-step there.  The entries: the largest |gradient| and two more
    drawn by a fixed seed."""
    outputs = {k: np.array(v, dtype=np.float64) for k, v in output.items() if isinstance(v, np.ndarray)}
    rng = np.random.default_rng(0)
    worst = 0.0
    for name, d in dout.items():
        picks = [int(np.argmax(np.abs(d)))] + [int(i) for i in rng.integers(0, d.size, entries - 1)]
        for i in picks:
            moved = []
            for sign in (1.0, -1.0):
                y = outputs[name].copy()
                y.reshape(-1)[i] += sign * step
                moved.append(float(HeadLoss(terms, {**outputs, name: y}, keep=False).value))
            fd = (moved[0] - moved[1]) / (2 * step)
            g = float(d.reshape(-1)[i])
            worst = max(worst, abs(g - fd) / (1 + abs(g)))
    return worst


def head_loss_backward(head, batch, hout, shape, label_flag, head_check, loss_checks, checks):
    """The backward of the head's loss for the page, from the last forward (given `batch`'s labels):
    (terms, means, d loss / d outputs, the head's gradients of its loss, the same through its
    outputs, what it hands to BERT as d pooler_output and d last_hidden_state, the loss).
    Adds the checks: d loss / d outputs against central differences, the head's backward of them
    against its backward(), and the loss against its terms."""
    hname = type(head).__name__
    terms = head.head_loss.terms                                      # the loss of the forward with labels
    if any(t.count == 0 for t in terms):
        raise CliError(f"--label {label_flag}: no label counts in the loss term "
                       f"{next(t.name for t in terms if t.count == 0)!r}: give at least one", status=2)
    dout = loss_gradients(head)                                      # {output: d loss / d output}
    loss_checks.append(check(
        "d loss / d outputs", loss_gradient_error(head.loss_terms(batch), hout, dout), 0.0, BACKWARD_TOL, checks,
        f"d loss / d {', '.join(dout)} from {hname}'s loss terms = central differences of the loss recomputed "
        f"from the same terms (float64, a few entries each)"))
    with bert_upstream(head) as seen:
        hgrads = head.backward(retain_graph=True)                     # d loss, the head's own backward
    u, w = seen.get("pooler_output"), seen.get("last_hidden_state")
    w = np.zeros(shape) if w is None else w
    hgrads_out = head.backward(**dout)
    loss = float(hout.loss)
    names = list(hgrads)
    head_check["backward"] = check(
        f"{hname}.backward(**d loss / d outputs)", concat(hgrads_out, names), concat(hgrads, names), BACKWARD_TOL,
        checks,
        f"d loss / d {', '.join(dout)} from the loss terms, through {hname}.backward(...), gives every parameter's "
        f"gradient of {hname}.backward() of its loss")
    means = {t.name: float(t.mean) for t in terms}
    loss_checks.append(check(
        "loss_terms", sum(t.weight * means[t.name] for t in terms), loss, BACKWARD_TOL, checks,
        f"sum of weight * mean over {hname}.loss_terms = {hname}'s loss"))
    return terms, means, dout, hgrads, hgrads_out, u, w, loss


def tied_names(head):
    """The head's parameters that are also used under another name (the MLM decoder's weight is the
    word embeddings): their gradient holds every use, not BERT's alone."""
    sd = head.state_dict()
    names = [n for n, _ in head.named_parameters()]
    aliases = [a for a in sd if a not in set(names)]
    return {n for n in names for a in aliases if np.may_share_memory(sd[n], sd[a])}


@contextlib.contextmanager
def bert_upstream(head):
    """While open: the upstream gradients the head's backward hands to its BertModel (its
    `last_hidden_state` and `pooler_output` gradients), recorded from the first backward.
    The model's own `_backward` is wrapped on this one instance and restored after."""
    bert = getattr(head, head.base_model_prefix)
    inner = bert._backward
    seen = {}

    def recording(cache, **upstream):
        if not seen:
            seen.update({k: None if v is None else np.array(v, dtype=np.float64) for k, v in upstream.items()})
        return inner(cache, **upstream)
    object.__setattr__(bert, "_backward", recording)
    try:
        yield seen
    finally:
        object.__delattr__(bert, "_backward")
