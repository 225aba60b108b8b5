"""A model's loss, stated once: the terms its head declares, and the HeadLoss each forward builds.

    loss = sum over terms c of  weight_c * mean_c,     mean_c = (sum of c's item losses) / count_c

A head says what its loss is in one method, `loss_terms(batch)`, from the forward's arguments
(the inputs and the labels), before anything is computed:

    LossTerm(name, output, op, target, weight=1.0, **op_kwargs)
        name     the term's name ("masked_lm", "start", ...)
        output   the output it differentiates ("logits", "start_logits", ...)
        op       a LossOp: cross_entropy, mse, bce_with_logits (below), or one of your own
        target   the labels, as the op takes them (after any clamping or shifting)

    head                            term            weight  output                   op, items counted
    BertForPreTraining              masked_lm       1       prediction_logits        cross_entropy, labels != -100
                                    next_sentence   1       seq_relationship_logits  cross_entropy, labels != -100
    BertForMaskedLM                 masked_lm       1       logits                   cross_entropy, labels != -100
    BertLMHeadModel                 causal_lm       1       logits                   cross_entropy, labels[:, 1:] != -100
    BertForNextSentencePrediction   next_sentence   1       logits                   cross_entropy, labels != -100
    BertForSequenceClassification   classification  1       logits                   cross_entropy, labels != -100
                                    regression      1       logits                   mse, every label value
                                    multi_label     1       logits                   bce_with_logits, every value
    BertForTokenClassification,     classification  1       logits                   cross_entropy, labels != -100
      BertForMultipleChoice
    BertForQuestionAnswering        start, end      1/2     start_logits, end_logits cross_entropy, inside the window

The model's call (BertPreTrainedModel.__call__) runs the forward, then computes each declared
term on its output: that is the HeadLoss, `model.head_loss`, and `output.loss` is its value.
Everything that needs more than the value reads the HeadLoss or the declaration, never the head:

  - `model.backward()` / `loss.backward()`: HeadLoss.backward turns the loss's upstream (1, a
    number, or {term: scale}) into upstream gradients by output name, which the head's own
    `_backward` receives like any other;
  - data-parallel training and gradient accumulation (npbert/distributed/loss.py): the counts
    before the forward are `loss_terms(batch)`'s, each `op.count(target)`, the same function the
    op's forward uses for the count its mean is over (checked equal after the forward);
  - npbert.interpret's regrouped runs (regroup_kind, below), head importance, and the head cards
    of `npbert explain --html`.

How an output meets its op: the op takes the output reshaped to the target's shape (an
element-wise op, as transformers' `logits.squeeze()` for one regression label) or to the target's
shape plus the output's last axis (an op over classes, as `logits.view(-1, K)`), and its gradient
comes back in the output's shape.
"""
import inspect
from collections import namedtuple

import numpy as np

from npbert.ops import losses

from .loss import make_loss

IGNORE_INDEX = -100     # torch's CrossEntropyLoss default: labels equal to it do not count

LossOp = namedtuple("LossOp", ["name", "forward", "backward", "count", "over_classes"])
LossOp.__doc__ = """A loss as a forward/backward pair and the count its mean is over.

    forward(input, target, **kwargs) -> (mean, cache)   cache.count: the items the mean is over
    backward(dmean, cache)           -> d mean / d input (times dmean), shaped like input
    count(target, **kwargs)          -> that count, from the target alone (before any forward)
    over_classes                     True when input is target's shape plus a class axis"""
LossOp.__new__.__defaults__ = (False,)

cross_entropy = LossOp("cross_entropy", losses.cross_entropy_forward, losses.cross_entropy_backward,
                       losses.cross_entropy_count, over_classes=True)
mse = LossOp("mse", losses.mse_forward, losses.mse_backward, losses.elementwise_count)
bce_with_logits = LossOp("bce_with_logits", losses.bce_with_logits_forward, losses.bce_with_logits_backward,
                         losses.elementwise_count)


class LossTerm:
    """One declared term of a loss: `weight * op(output, target)`, a mean over `count` items."""

    def __init__(self, name, output, op, target, weight=1.0, **op_kwargs):
        if not isinstance(name, str) or not isinstance(output, str):
            raise TypeError(f"LossTerm(name, output, op, target): name and output are strings (a term's name and "
                            f"the output it differentiates), got {name!r} and {output!r}")
        if not isinstance(op, LossOp):
            raise TypeError(f"LossTerm {name!r}: op must be a LossOp (npbert.losses.cross_entropy, mse, "
                            f"bce_with_logits, or LossOp(name, forward, backward, count)), got {type(op).__name__}")
        self.name, self.output, self.op, self.weight = name, output, op, float(weight)
        self.target = np.asarray(target)
        self.kwargs = op_kwargs

    @property
    def count(self):
        """The number of items this term's mean is over, from the target alone (the op's count)."""
        return int(self.op.count(self.target, **self.kwargs))

    def __repr__(self):
        return (f"LossTerm({self.name!r}, output={self.output!r}, op={self.op.name}, weight={self.weight:g}, "
                f"count={self.count})")


def _op_input(term, y):
    """The output `y` as the term's op takes it (see the module docstring)."""
    target = term.target.shape
    shape = target + y.shape[-1:] if term.op.over_classes else target
    if y.shape == shape:
        return y
    if y.size != int(np.prod(shape)):
        want = f"{target} plus a class axis" if term.op.over_classes else str(target)
        raise ValueError(f"loss term {term.name!r}: its output {term.output} has shape {y.shape}, which does not "
                         f"fit its target of shape {target} (the op {term.op.name} takes {want})")
    return y.reshape(shape)


class ComputedTerm:
    """A term after the forward: its mean, the count that mean is over (from the op's cache) and the
    cache its backward needs."""

    def __init__(self, term, mean, cache, count, output_shape):
        self.name, self.output, self.weight, self.op = term.name, term.output, term.weight, term.op
        self.mean, self.cache, self.count, self.output_shape = mean, cache, int(count), output_shape

    def backward(self, scale):
        """d (scale * weight * mean) / d output, in the output's shape."""
        if self.cache is None:
            raise RuntimeError(f"loss term {self.name!r}: its forward ran under npbert.no_grad(), which keeps "
                               "nothing to differentiate")
        return self.op.backward(scale * self.weight, self.cache).reshape(self.output_shape)


class HeadLoss:
    """The loss of one forward, built from the head's declared terms and its outputs.

        value          sum of weight * mean, in the outputs' dtype: output.loss
        terms          [ComputedTerm]: name, output, weight, mean, count, backward
        means, counts  {term: mean}, {term: count}
        backward(u)    {output name: upstream gradient}: u is 1, a number, or {term: scale}
    """

    def __init__(self, terms, outputs, keep=True):
        self.terms = []
        value = None
        for term in terms:
            y = outputs.get(term.output)
            if not isinstance(y, np.ndarray):
                have = [k for k, v in outputs.items() if isinstance(v, np.ndarray)]
                raise ValueError(f"loss term {term.name!r} differentiates the output {term.output!r}, which this "
                                 f"forward did not return as an array (its outputs: {have})")
            mean, cache = term.op.forward(_op_input(term, y), term.target, **term.kwargs)
            self.terms.append(ComputedTerm(term, mean, cache if keep else None, cache.count, y.shape))
            part = mean if term.weight == 1.0 else y.dtype.type(term.weight) * mean
            value = part if value is None else value + part
        if not self.terms:
            raise ValueError("a HeadLoss needs at least one term")
        self.value = value

    @property
    def means(self):
        return {t.name: t.mean for t in self.terms}

    @property
    def counts(self):
        return {t.name: t.count for t in self.terms}

    def scales(self, upstream):
        """{term: scale} for an upstream of the loss: 1, a number (every term), or {term: scale}
        naming exactly the terms."""
        names = [t.name for t in self.terms]
        if isinstance(upstream, dict):
            if set(upstream) != set(names):
                raise ValueError(f"the loss has the terms {names}, got scales for {sorted(upstream)}")
            return {k: _scalar(f"the scale of term {k!r}", v) for k, v in upstream.items()}
        u = _scalar("the gradient for loss", upstream)
        return {k: u for k in names}

    def backward(self, upstream=1.0):
        """{output name: d (sum of scale_c * weight_c * mean_c) / d output} for each output a term reads."""
        scales = self.scales(upstream)
        grads = {}
        for t in self.terms:
            d = t.backward(scales[t.name])
            grads[t.output] = d if t.output not in grads else grads[t.output] + d
        return grads

    def release(self):
        """Drop the caches (after a backward that does not retain the graph)."""
        for t in self.terms:
            t.cache = None

    def __repr__(self):
        return "HeadLoss(" + ", ".join(f"{t.name}: {t.weight:g} x {float(t.mean):.6g} over {t.count}"
                                       for t in self.terms) + ")"


def _scalar(what, value):
    d = np.asarray(value)
    if d.shape != () or not (np.issubdtype(d.dtype, np.floating) or np.issubdtype(d.dtype, np.integer)):
        raise ValueError(f"{what} must be a scalar number, got shape {d.shape} dtype {d.dtype}")
    return float(d)


# ---- helpers a head's loss_terms uses ----------------------------------------------------------
def batch_rows(batch):
    """The number of examples (rows) of a batch: the first axis of its input_ids or inputs_embeds
    (or, for a batch of labels alone, of its labels)."""
    for key in ("input_ids", "inputs_embeds", "attention_mask", "labels"):
        if batch.get(key) is not None:
            return int(np.shape(batch[key])[0])
    raise KeyError(f"the batch has no input_ids / inputs_embeds to count its examples (fields: {sorted(batch)})")


def batch_length(batch):
    """T, the sequence length of a batch: the second axis of its input_ids or inputs_embeds (or of
    its labels, for a batch of token labels alone)."""
    for key in ("input_ids", "inputs_embeds", "attention_mask", "labels"):
        if batch.get(key) is not None and np.ndim(batch[key]) >= 2:
            return int(np.shape(batch[key])[1])
    raise KeyError(f"the batch has no input_ids / inputs_embeds to read its length from (fields: {sorted(batch)})")


def has_labels(batch, *keys):
    """True when every one of `keys` is in the batch and not None (transformers computes a loss then)."""
    return all(batch.get(k) is not None for k in keys)


class HeadDeclaration:
    """What a model says about its loss and outputs, read by the Trainer, data-parallel training
    and npbert.interpret (BertPreTrainedModel inherits it; a head overrides what differs)."""

    def loss_terms(self, batch):
        """[LossTerm]: the terms of the loss this model computes on `batch` (the forward's arguments,
        labels included); [] when it computes none (no labels given).  Default: none."""
        return []

    def _computes_a_loss(self):
        """False for a model that never computes a loss (BertModel: no loss_terms of its own)."""
        return type(self).loss_terms is not HeadDeclaration.loss_terms

    def _with_loss(self, output, batch, keep):
        """The head's loss, stated once in loss_terms(batch) (npbert/modeling/loss_terms.py), computed
        on this forward's outputs: kept as `self.head_loss`, its value as output.loss (first, as
        transformers puts it), whose loss.backward() runs this model's backward."""
        if output.get("loss") is not None:
            raise TypeError(f"{type(self).__name__}.forward returned a loss itself; npbert computes a model's loss "
                            f"from the terms its loss_terms(batch) declares, so that backward(), the Trainer and "
                            f"data-parallel runs can differentiate it: declare them there and return the outputs "
                            f"without loss= (docs/custom_heads.md)")
        terms = self.loss_terms(batch)
        if not terms:
            return output
        if "loss" not in type(output)._fields:
            raise TypeError(f"{type(self).__name__}: its output class {type(output).__name__} has no field 'loss' "
                            f"for the loss its loss_terms declare")
        self.head_loss = HeadLoss(terms, output, keep=keep)
        value = make_loss(self.head_loss.value, self, self._forward_id)
        return type(output)(**{**output, "loss": value})

    def _label_hint(self):
        """Which forward arguments are labels, for messages: the names with "label" or "_positions"."""
        names = [n for n in inspect.signature(self.forward).parameters if "label" in n or n.endswith("_positions")]
        return (f"it needs {'both ' if len(names) == 2 else ''}{' and '.join(n + '=' for n in names)}" if names
                else "it declares its loss in loss_terms(batch), docs/custom_heads.md")

    def _upstream_names(self):
        """The outputs whose upstream gradient the head's _backward takes by name."""
        params = inspect.signature(self._backward).parameters
        return [n for n, p in params.items() if n != "cache" and p.kind != p.VAR_KEYWORD]

    # {kind of target: the output it indexes} for npbert.interpret: "class" (c -> output[b, c]),
    # "token_class" ((position, label)), "token" ((position, token id)), "span" (("start" | "end",
    # position)), "model" (an upstream gradient of last_hidden_state); None: attribution does not
    # take this model's inputs (with the reason in `attribution_refusal`).  Any model also takes
    # (output name, index...) and a function of one output (npbert/interpret/targets.py).
    attribution_targets = {"class": "logits"}
    attribution_refusal = None

    # Why cutting the padding off this model's examples could change its loss, or None when it
    # cannot; read by regroup_kind.  npbert's heads say None or their reason; a head of your own
    # that pools or scores only the real tokens (attention_mask 1) may set None.
    regroup_refusal = ("its class does not say that cutting off the padding leaves its loss unchanged (set "
                       "regroup_refusal = None in the class if it does: docs/custom_heads.md)")

    def regroup_kind(self, batch):
        """How the loss counts, for npbert.interpret's regrouped runs (examples cut to their length
        and packed, npbert/interpret/regroup.py), derived from loss_terms(batch): "class" (one
        cross-entropy term over one label per example, -100 not counted), "token" (one cross-entropy
        term over one label per token), "example" (one element-wise term, every value counted), or a
        string saying why the loss cannot be regrouped with the same result."""
        if self.regroup_refusal is not None:
            return f"{type(self).__name__}: {self.regroup_refusal}"
        terms = self.loss_terms(batch)
        if len(terms) != 1:
            return (f"{type(self).__name__}: its loss has {len(terms)} terms ({', '.join(t.name for t in terms)}), "
                    "each a mean over its own items" if terms else f"{type(self).__name__} computes no loss here")
        term, = terms
        B = batch_rows(batch)
        if term.op is cross_entropy and term.target.ndim in (1, 2) and term.target.shape[0] == B:
            return "class" if term.target.ndim == 1 else "token"
        if term.op in (mse, bce_with_logits) and term.target.ndim >= 1 and term.target.shape[0] == B:
            return "example"
        return (f"{type(self).__name__}: its loss term {term.name!r} ({term.op.name}, target shape "
                f"{term.target.shape}) is not a mean npbert knows to regroup")
