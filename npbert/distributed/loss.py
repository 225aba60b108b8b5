"""What each rank passes to backward so that the ranks' summed gradients are the gradient of
the GLOBAL mean loss (docs/data_parallel.md derives it).

Every BERT loss is a weighted sum of means, one per term c, each over its own items
(masked tokens, examples, labelled tokens, answer starts):

    L = sum_c w_c * (sum of the item losses of c over every rank and micro-batch) / N_c

A rank's micro-batch holds n_c of the N_c items with loss sum S_c = n_c * m_c (m_c the mean
the model computes on that micro-batch), so L = sum over micro-batches and ranks of

    sum_c w_c * (n_c / N_c) * m_c        = this micro-batch's share of L

and its gradient is the sum of the shares' gradients: each rank's backward must get the
upstream gradient n_c / N_c for term c.  A single scale for the whole loss (the mean
of the ranks' means: 1/W each) weighs a rank with 3 masked tokens as much as one with 30;
x1/n1 + x2/n2 != (x1 + x2)/(n1 + n2).

Which terms a model's loss has, their weights and what each counts, is the model's own
declaration, `model.loss_terms(batch)` (npbert/modeling/loss_terms.py: the table of npbert's
heads): before the forward each count is its op's count of the term's target, and after it the
HeadLoss holds the count the op's mean really used; backward_global_mean checks they agree.

The model's backward takes one scale per term, `model.backward(loss_scales={c: a_c})`: the
gradient of sum_c a_c w_c m_c, each term scaled in the head that computes it.

Usage, one optimizer step (see docs/data_parallel.md for the whole loop):

    local = [count_loss_items(model, b) for b in my_batches]            # before any forward
    totals = world.sum_dict(add_counts(local))                           # one small Allreduce
    for b, n in zip(my_batches, local):
        out = model(**b)
        g = backward_global_mean(model, out, b, totals, local=n)         # sum these over b
        loss_share(model, out, b, totals, local=n)                       # all-sum: the global loss
"""


def count_loss_items(model, batch):
    """{term: number of items} that `model`'s loss averages over in `batch` (one rank's
    micro-batch), in the order of the terms of the loss (model.loss_terms)."""
    if not model._computes_a_loss():
        raise TypeError(f"{type(model).__name__} computes no loss (a base model, without a head), so it has no loss "
                        "terms to count: train a model with a head (BertFor...), or a head of your own "
                        "(docs/custom_heads.md)")
    terms = model.loss_terms(batch)
    if not terms:
        raise KeyError(f"{type(model).__name__} computes no loss on this batch (fields: {sorted(batch)}): "
                       f"{model._label_hint()}")
    return {t.name: int(t.count) for t in terms}


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


def backward_global_mean(model, outputs, batch, num_items_in_batch, local=None, retain_graph=False):
    """model.backward() of this micro-batch's share of the global mean loss; returns the grads.

    Args:
        model, outputs, batch: the model, what model(**batch) returned, and that batch.
        num_items_in_batch: {term: N_c}, the counts over every rank and micro-batch of the
            optimizer step (world.sum_dict of add_counts of count_loss_items).
        local: count_loss_items(model, batch), if already computed.

    Summing the returned gradients over the micro-batches and ranks gives the gradient of the
    global mean loss (the global batch's, as one process computes it)."""
    local = count_loss_items(model, batch) if local is None else local
    _check_counts(model, local)
    return model.backward(retain_graph=retain_graph, loss_scales=_scales(local, num_items_in_batch))


def _check_counts(model, local):
    """The counts planned before the forward are those the forward's means are over."""
    if model.head_loss is None:
        raise RuntimeError(f"{type(model).__name__}: the last forward computed no loss to differentiate")
    if model.head_loss.counts != local:
        raise RuntimeError(f"{type(model).__name__}: its loss_terms counted {local} items before the forward, but "
                           f"the forward's means are over {model.head_loss.counts}: the batch given to the forward "
                           f"is not the one counted")


def loss_share(model, outputs, batch, num_items_in_batch, local=None):
    """This micro-batch's share of the global mean loss, sum_c w_c * n_c * m_c / N_c (a float):
    summed over the micro-batches and ranks (world.all_sum) it is the loss of the global batch.
    A term with no item here adds 0 (its mean m_c is NaN, its sum 0)."""
    local = count_loss_items(model, batch) if local is None else local
    scales = _scales(local, num_items_in_batch)
    terms = model.head_loss.terms               # the forward's mean of each term (loss = sum_c w_c m_c)
    if len(terms) == 1:
        (c, n), = local.items()
        return scales[c] * float(outputs["loss"]) if n else 0.0
    return sum(t.weight * scales[t.name] * float(t.mean) for t in terms if local[t.name])
