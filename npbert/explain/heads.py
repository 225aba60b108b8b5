"""A task head on the page: which head a checkpoint has, its outputs as stages with named dims, and
the backward of its loss, all read from the head's declarations (npbert/modeling/loss_terms.py):
`loss_terms(batch)` and the HeadLoss its call builds from them, `attribution_targets` (which output
scores classes, tokens, token classes or spans: the output's dims), the forward's label arguments
(transformers' names), and its public `backward(...)`.  Nothing here knows a head class by its loss.

    B = batch, T = sequence length, H = hidden size, V = vocab size,
    K = the head's classes (num_labels; 2 for next sentence prediction), C = choices
"""
import inspect
import json
import os
import re

import numpy as np

from npbert.modeling import BertModel, BertPreTrainedModel
from npbert.modeling import heads as head_classes
from npbert.modeling.loss_terms import HeadLoss

from .checks import compare, concat, output_gradient_check
from .errors import ExplainError

# the label arguments of transformers' heads, in the order of their forward's signature
LABEL_ARGS = ("labels", "next_sentence_label", "start_positions", "end_positions")
# the kind of target an output is (its attribution_targets key) -> its dims after B
KIND_DIMS = {"class": ("K",), "token_class": ("T", "K"), "token": ("T", "V"), "span": ("T",)}
# heads whose inputs have a choice axis, (B, C, T): the page gives them its one sentence as one choice
CHOICE_HEADS = ("BertForMultipleChoice",)
# the same float64 operations summed in another order differ by ~1e-15 relative; 1e-9 leaves a wide
# margin while a wrong stage (a missing residual, a transposed head) is off by O(1)
BACKWARD_TOL = 1e-9


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
    cls = getattr(head_classes, names[0], None) if names else None
    if not isinstance(cls, type) or not issubclass(cls, BertPreTrainedModel) or issubclass(cls, BertModel):
        return None
    return cls


def head_inputs(head, ids, types):
    """The forward's inputs for the page's one sentence (or pair): (B, T), or (B, C=1, T) for a head
    whose inputs have a choice axis."""
    inputs = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": types}
    if type(head).__name__ in CHOICE_HEADS:
        inputs = {k: v[:, None] for k, v in inputs.items()}                      # (B, 1, T)
    return inputs


def label_args(head):
    """The head's label arguments, in its forward's order (e.g. ["labels", "next_sentence_label"])."""
    return [name for name in inspect.signature(head.forward).parameters if name in LABEL_ARGS]


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


def head_outputs(output):
    """[(name, array)] of a head's outputs whose name ends in "logits", in the output's order."""
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


def tied_names(head):
    """The head's parameters that are also used under another name (the MLM decoder's weight is the
    word embeddings): their gradient holds every use, not BERT's alone."""
    sd = head.state_dict()
    names = [n for n, _ in head.named_parameters()]
    aliases = [a for a in sd if a not in set(names)]
    return {n for n in names for a in aliases if np.may_share_memory(sd[n], sd[a])}


def bert_upstream(igrads):
    """(d loss / d pooler_output (B, H) or None, d loss / d last_hidden_state (B, T, H) all uses counted)
    from the IntermediateGrads `igrads` of the head's public head.backward(return_intermediate_grads=True)."""
    dlast = np.asarray(igrads.hidden_states[-1], dtype=np.float64)                       # (B, T, H)
    dpooled = None if igrads.pooler_output is None else np.asarray(igrads.pooler_output, dtype=np.float64)
    return dpooled, dlast


def loss_gradients(head):
    """{output name: d loss / d output} in float64: the backward of the head's loss as its last forward
    built it (model.head_loss, npbert/modeling/loss_terms.py), nothing restated here."""
    return {k: np.asarray(v, dtype=np.float64) for k, v in head.head_loss.backward(1.0).items()}


def loss_backward(head, batch, hout, checks):
    """The backward of the head's loss, from its last forward (given `batch`'s labels), through its
    public backward.  Returns a dict: terms, means, dout ({output: d loss / d output}), grads (the
    head's), dembeds, dpooled, dlast (what reaches BERT, see bert_upstream), loss, loss_checks,
    and output_check (the check of the head's backward of dout), with the checks added to `checks`."""
    hname = type(head).__name__
    terms = head.head_loss.terms                                      # the loss of the forward with labels
    empty = [t.name for t in terms if t.count == 0]
    if empty:
        raise ExplainError(f"labels: no label counts in the loss term {empty[0]!r}: give at least one")
    dout = loss_gradients(head)
    declared = head.loss_terms(batch)
    loss_checks = [output_gradient_check(
        checks, lambda outputs: float(HeadLoss(declared, outputs, keep=False).value), hout, dout,
        f"d loss / d {', '.join(dout)} from {hname}'s loss terms = npbert.gradcheck's finite differences of the "
        "loss recomputed from the same terms (float64, a few entries each)")]
    grads, igrads = head.backward(retain_graph=True, return_intermediate_grads=True)
    dembeds = head.inputs_embeds_grad
    dpooled, dlast = bert_upstream(igrads)
    through_outputs = head.backward(**dout)
    names = list(grads)
    output_check = compare(
        checks, f"{hname}.backward(**d loss / d outputs)", concat(through_outputs, names), concat(grads, names),
        BACKWARD_TOL, f"d loss / d {', '.join(dout)} from the loss terms, through {hname}.backward(...), gives every "
        f"parameter's gradient of {hname}.backward() of its loss")
    means = {t.name: float(t.mean) for t in terms}
    loss = float(hout.loss)
    loss_checks.append(compare(checks, "loss_terms", sum(t.weight * means[t.name] for t in terms), loss, BACKWARD_TOL,
                               f"sum of weight * mean over {hname}.loss_terms = {hname}'s loss"))
    return dict(terms=terms, means=means, dout=dout, grads=grads, igrads=igrads, dembeds=dembeds, dpooled=dpooled,
                dlast=dlast, loss=loss, loss_checks=loss_checks, output_check=output_check)
