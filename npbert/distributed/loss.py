"""What each rank passes to backward so that the ranks' summed gradients are the gradient of
the GLOBAL mean loss (docs/data_parallel.md derives it).

Every BERT loss is a weighted sum of means, one per component c, each over its own items
(masked tokens, examples, labelled tokens, answer starts):

    L = sum_c w_c * (sum of the item losses of c over every rank and micro-batch) / N_c

A rank's micro-batch holds n_c of the N_c items with loss sum S_c = n_c * m_c (m_c the mean
the model computes on that micro-batch), so L = sum over micro-batches and ranks of

    sum_c w_c * (n_c / N_c) * m_c        = this micro-batch's share of L

and its gradient is the sum of the shares' gradients: each rank's backward must get the
upstream gradient n_c / N_c for component c.  A single scale for the whole loss (the mean
of the ranks' means: 1/W each) weighs a rank with 3 masked tokens as much as one with 30;
x1/n1 + x2/n2 != (x1 + x2)/(n1 + n2).

    component     models                                           items counted (N_c)          w_c
    masked_lm     BertForPreTraining, BertForMaskedLM              labels != -100               1
    causal_lm     BertLMHeadModel                                  labels[:, 1:] != -100        1
    next_sentence BertForPreTraining, BertForNextSentencePrediction  next_sentence_label != -100  1
    classification  BertForSequenceClassification (single label), BertForMultipleChoice,
                  BertForTokenClassification                       labels != -100               1
    regression    BertForSequenceClassification (num_labels 1)     every label value (MSE)      1
    multi_label   BertForSequenceClassification (float labels)     every label value (BCE)      1
    start, end    BertForQuestionAnswering                         positions inside the window  1/2 each

With the public backward: `model.backward(loss=a)` scales every component by a, and an
output's upstream gradient adds to it.  So a = n_0 / N_0 (the first component's scale), and
for a second component whose scale a_c differs (pre-training's NSP against its MLM, QA's end
against its start), that component's logits get the extra upstream gradient

    (a_c - a) * w_c * d m_c / d logits_c        (cross_entropy_backward: cheap, (B, 2) or (B, T))

Usage, one optimizer step (see docs/data_parallel.md for the whole loop):

    local = [count_loss_items(model, b) for b in my_batches]            # before any forward
    totals = world.sum_dict(add_counts(local))                           # one small Allreduce
    for b, n in zip(my_batches, local):
        out = model(**b)
        g = backward_global_mean(model, out, b, totals, local=n)         # sum these over b
        loss_share(model, out, b, totals, local=n)                       # all-sum: the global loss
"""
import numpy as np

from npbert.modeling import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction,
                             BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                             BertForTokenClassification, BertLMHeadModel)
from npbert.ops.losses import cross_entropy_backward, cross_entropy_forward

IGNORE_INDEX = -100


def _labels(batch, key, model):
    if batch.get(key) is None:
        raise KeyError(f"{type(model).__name__}: the batch has no {key!r}, so there is no loss to normalise "
                       f"(fields: {sorted(batch)})")
    return np.asarray(batch[key])


def _counted(labels, ignore=IGNORE_INDEX):
    return int(np.count_nonzero(labels != ignore))


def _sequence_length(batch):
    for key in ("input_ids", "inputs_embeds", "attention_mask"):
        if batch.get(key) is not None:
            return np.shape(batch[key])[1]
    raise KeyError(f"the batch has no input_ids / inputs_embeds to take the sequence length from (fields: {sorted(batch)})")


def _qa_counted(batch, key, model):
    """Positions are clamped to [0, T] by the model and T is ignored: count those < T."""
    T = _sequence_length(batch)
    pos = np.clip(np.asarray(_labels(batch, key, model)).reshape(-1).astype(np.int64), 0, T)
    return int(np.count_nonzero(pos != T)), pos, T


def _sequence_problem_type(model, labels):
    """BertForSequenceClassification._problem_type's rule, without writing the config."""
    if model.config.problem_type is not None:
        return model.config.problem_type
    if model.num_labels == 1:
        return "regression"
    if model.num_labels > 1 and labels.dtype in (np.int64, np.int32):
        return "single_label_classification"
    return "multi_label_classification"


def count_loss_items(model, batch):
    """{component: number of items} that `model`'s loss averages over in `batch` (one rank's
    micro-batch), in the order of the components of the loss (the table above)."""
    if isinstance(model, BertForPreTraining):
        return {"masked_lm": _counted(_labels(batch, "labels", model)),
                "next_sentence": _counted(_labels(batch, "next_sentence_label", model))}
    if isinstance(model, BertForMaskedLM):
        return {"masked_lm": _counted(_labels(batch, "labels", model))}
    if isinstance(model, BertLMHeadModel):
        return {"causal_lm": _counted(_labels(batch, "labels", model)[:, 1:])}
    if isinstance(model, BertForNextSentencePrediction):
        return {"next_sentence": _counted(_labels(batch, "labels", model))}
    if isinstance(model, BertForSequenceClassification):
        labels = _labels(batch, "labels", model)
        kind = _sequence_problem_type(model, labels)
        if kind == "regression":
            return {"regression": int(labels.size)}
        if kind == "single_label_classification":
            return {"classification": _counted(labels)}
        return {"multi_label": int(labels.size)}
    if isinstance(model, (BertForTokenClassification, BertForMultipleChoice)):
        return {"classification": _counted(_labels(batch, "labels", model))}
    if isinstance(model, BertForQuestionAnswering):
        return {"start": _qa_counted(batch, "start_positions", model)[0],
                "end": _qa_counted(batch, "end_positions", model)[0]}
    raise TypeError(f"npbert.distributed does not know how {type(model).__name__}'s loss is averaged; the BERT heads "
                    f"it knows: BertForPreTraining, BertForMaskedLM, BertLMHeadModel, BertForNextSentencePrediction, "
                    f"BertForSequenceClassification, BertForTokenClassification, BertForMultipleChoice, "
                    f"BertForQuestionAnswering")


def add_counts(counts):
    """The sum of several count_loss_items() dicts (one rank's micro-batches), key by key."""
    total = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + int(v)
    return total


def _scales(local, totals):
    """a_c = n_c / N_c (0 when no rank has an item of c: the mean is then NaN and its gradient 0)."""
    missing = [c for c in local if c not in totals]
    if missing:
        raise KeyError(f"num_items_in_batch has no count for {missing} (it has {sorted(totals)})")
    return {c: (local[c] / totals[c] if totals[c] else 0.0) for c in local}


def _second_component(model, outputs, batch):
    """(component, output name, weight w_c, d m_c / d logits_c) for the heads whose loss has a
    second component with its own count, else None."""
    if isinstance(model, BertForPreTraining):
        logits = outputs["seq_relationship_logits"]                                  # (B, 2)
        labels = np.asarray(batch["next_sentence_label"]).reshape(-1).astype(np.int64)
        _, cache = cross_entropy_forward(logits, labels)
        return "next_sentence", "seq_relationship_logits", 1.0, cross_entropy_backward(1.0, cache)
    if isinstance(model, BertForQuestionAnswering):
        _, pos, T = _qa_counted(batch, "end_positions", model)
        _, cache = cross_entropy_forward(outputs["end_logits"], pos, ignore_index=T)  # (B, T)
        return "end", "end_logits", 0.5, cross_entropy_backward(1.0, cache)
    return None


def backward_global_mean(model, outputs, batch, num_items_in_batch, local=None, retain_graph=False):
    """model.backward() of this micro-batch's share of the global mean loss; returns the grads.

    Args:
        model, outputs, batch: the model, what model(**batch) returned, and that batch.
        num_items_in_batch: {component: N_c}, the counts over every rank and micro-batch of the
            optimizer step (world.sum_dict of add_counts of count_loss_items).
        local: count_loss_items(model, batch), if already computed.

    Summing the returned gradients over the micro-batches and ranks gives the gradient of the
    global mean loss (the global batch's, as one process computes it)."""
    local = count_loss_items(model, batch) if local is None else local
    scales = _scales(local, num_items_in_batch)
    first = next(iter(local))
    upstream = {"loss": scales[first]}
    second = _second_component(model, outputs, batch)
    if second is not None:
        component, name, weight, dlogits = second
        if scales[component] != scales[first]:
            # backward(loss=a) gives this component a * w_c * dm_c; it needs a_c * w_c * dm_c
            upstream[name] = (scales[component] - scales[first]) * weight * dlogits
    return model.backward(retain_graph=retain_graph, **upstream)


def loss_share(model, outputs, batch, num_items_in_batch, local=None):
    """This micro-batch's share of the global mean loss, sum_c w_c * n_c * m_c / N_c (a float):
    summed over the micro-batches and ranks (world.all_sum) it is the loss of the global batch.
    A component with no item here adds 0 (its mean m_c is NaN, its sum 0)."""
    local = count_loss_items(model, batch) if local is None else local
    scales = _scales(local, num_items_in_batch)
    loss = float(outputs["loss"])
    if len(local) == 1:
        (c, n), = local.items()
        return scales[c] * loss if n else 0.0
    # two components: the loss the model returned is w_0 m_0 + w_1 m_1; m_1 is recomputed from its logits
    if isinstance(model, BertForPreTraining):
        labels = np.asarray(batch["next_sentence_label"]).reshape(-1).astype(np.int64)
        nsp = float(cross_entropy_forward(outputs["seq_relationship_logits"], labels)[0])
        means = {"masked_lm": loss - nsp, "next_sentence": nsp}
        weights = {"masked_lm": 1.0, "next_sentence": 1.0}
    else:                                                          # BertForQuestionAnswering
        _, start_pos, T = _qa_counted(batch, "start_positions", model)
        _, end_pos, _ = _qa_counted(batch, "end_positions", model)
        means = {"start": float(cross_entropy_forward(outputs["start_logits"], start_pos, ignore_index=T)[0]),
                 "end": float(cross_entropy_forward(outputs["end_logits"], end_pos, ignore_index=T)[0])}
        weights = {"start": 0.5, "end": 0.5}
    return sum(weights[c] * scales[c] * means[c] for c in local if local[c])
