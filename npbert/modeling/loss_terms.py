"""A model's loss as its head declares it: a weighted sum of means, each over its own items.

    loss = sum over terms c of  weight_c * mean_c,     mean_c = (sum of c's item losses) / count_c

    head                            term            weight   items counted (count_c)
    BertForPreTraining              masked_lm       1        labels != -100
                                    next_sentence   1        next_sentence_label != -100
    BertForMaskedLM                 masked_lm       1        labels != -100
    BertLMHeadModel                 causal_lm       1        labels[:, 1:] != -100
    BertForNextSentencePrediction   next_sentence   1        labels != -100
    BertForSequenceClassification   classification  1        labels != -100         (single label)
                                    regression      1        every label value      (MSE)
                                    multi_label     1        every label value      (BCE)
    BertForTokenClassification,     classification  1        labels != -100
      BertForMultipleChoice
    BertForQuestionAnswering        start, end      1/2 each positions inside the window
    any other model (your own head) loss            1        the examples of the batch

Each head says this once, in its `loss_terms(batch)` (counted from the labels, before any
forward), and computes each mean in its forward.  What needs more than the loss itself reads
the declaration instead of knowing the head:

  - data-parallel training (npbert/distributed/loss.py) weighs each rank's term c by
    n_c / N_c, its share of the term's items over every rank, and passes those scales to
    `model.backward(loss_scales={c: a_c})`: the gradient of sum_c a_c w_c mean_c;
  - the Trainer takes its steps through the same code, on one process or several.

A head whose loss is one mean over the examples of its batch (as transformers' heads'
`loss_fct(logits, labels)` with the default reduction) needs to declare nothing: the default
below says exactly that.
"""
from collections import namedtuple

import numpy as np

IGNORE_INDEX = -100     # torch's CrossEntropyLoss default: labels equal to it do not count

LossTerm = namedtuple("LossTerm", ["name", "weight", "count"])
LossTerm.__doc__ = """One term of a loss, `weight * mean`, its mean over `count` items of the batch."""


def batch_rows(batch):
    """The number of examples (rows) of a batch: the first axis of its input_ids or inputs_embeds."""
    for key in ("input_ids", "inputs_embeds", "attention_mask"):
        if batch.get(key) is not None:
            return int(np.shape(batch[key])[0])
    raise KeyError(f"the batch has no input_ids / inputs_embeds to count its examples (fields: {sorted(batch)})")


def batch_labels(model, batch, key):
    """batch[key] as an array; a missing key is an error naming the model and the fields there are."""
    if batch.get(key) is None:
        raise KeyError(f"{type(model).__name__}: the batch has no {key!r}, so there is no loss to count "
                       f"(fields: {sorted(batch)})")
    return np.asarray(batch[key])


def counted(labels, ignore=IGNORE_INDEX):
    """The number of labels that count (not `ignore`)."""
    return int(np.count_nonzero(np.asarray(labels) != ignore))


def term_scale(dloss, name):
    """The upstream gradient of term `name`'s weighted mean: `dloss` itself (a number, one scale
    for the whole loss) or dloss[name] (a dict of per-term scales, model.backward(loss_scales=))."""
    return dloss[name] if isinstance(dloss, dict) else dloss


class HeadDeclaration:
    """What a model says about its loss and outputs, read by the Trainer, data-parallel training
    and npbert.interpret (BertPreTrainedModel inherits it; a head overrides what differs).
    The defaults describe a head like transformers' own: one loss, a mean over the examples of
    the batch, and a main output `logits` (B, K) whose classes an attribution explains."""

    def _term_scales(self, loss_scales):
        """loss_scales -> what the head's _backward takes as `loss`: one number when every term has
        the same scale (a head of one term always), else {term: scale} over exactly its terms."""
        scales = {k: float(v) for k, v in dict(loss_scales).items()}
        means = getattr(self, "_loss_means", None)
        if means is None:
            if len(scales) != 1:
                raise ValueError(f"backward(loss_scales=...): {type(self).__name__}'s loss has one term, got scales "
                                 f"for {sorted(scales)}")
            return next(iter(scales.values()))
        if set(scales) != set(means):
            raise ValueError(f"backward(loss_scales=...): {type(self).__name__}'s loss has the terms {list(means)}, "
                             f"got scales for {sorted(scales)}")
        values = set(scales.values())
        return values.pop() if len(values) == 1 else scales

    def loss_term_means(self):
        """{term: its mean} of the last forward when the model's loss has several terms (pre-training:
        masked_lm and next_sentence; question answering: start and end), else None: the loss is
        then its one term's mean (npbert/modeling/loss_terms.py)."""
        means = getattr(self, "_loss_means", None)
        return None if means is None else {k: float(v) for k, v in means.items()}

    def loss_terms(self, batch):
        """[LossTerm(name, weight, count)]: the terms of the loss this model computes on `batch`,
        each a mean over `count` items of it (counted from the labels, before any forward).
        Default: one term, "loss", a mean over the batch's examples."""
        return [LossTerm("loss", 1.0, batch_rows(batch))]

    # {kind of target: the output it indexes} for npbert.interpret: "class" (c -> output[b, c]),
    # "token_class" ((position, label)), "token" ((position, token id)), "span" (("start" | "end",
    # position)), "model" (an upstream gradient of last_hidden_state); None: attribution does not
    # take this model's inputs (with the reason in `attribution_refusal`).
    attribution_targets = {"class": "logits"}
    attribution_refusal = None

    def regroup_kind(self, labels):
        """How the loss counts, for npbert.interpret's regrouped runs (examples cut to their length
        and packed, npbert/interpret/regroup.py): "class" (a mean over the examples whose label is
        not -100), "example" (a mean over every example), "token" (a mean over the labelled
        tokens), or a string saying why the loss cannot be regrouped with the same result (then
        each batch runs as given).  Default: not regrouped, as npbert cannot know that a head of
        your own gives the same loss without the padding."""
        return f"{type(self).__name__} does not declare regroup_kind (docs/custom_heads.md)"
