"""Run the examples of many padded batches regrouped by length, with almost no padding, and say how
much each example weighs in the mean loss of the batch it came from (heads.py uses it for
head_importance's regrouped path, beside the plain per-batch loop).

A collator pads each batch to its own longest example; when lengths vary inside a batch, part of
every forward and backward runs on padding.  With right padding (attention_mask a prefix of ones)
an example's real tokens never look at its padding (the masked keys get probability exactly 0), so
the example can be cut to its real length and run beside other examples of about the same length:

    1. every example of every batch, cut to its length n (its attention_mask's ones);
    2. sorted by n (stable), in runs of `run_size` examples, each padded to its own longest n;
    3. each run's loss is a mean over its loss elements, C_run of them, while the batch's was a mean
       over C_batch: example b's share of the batch's loss is its share of the run's loss times
           w_b = C_run / C_batch        (d L_batch / d x = sum over its examples of w_b d L_run,b / d x)

C counts what the loss averages over, read exactly from the labels a batch carries:
    sequence classification, single label (int labels (B,)): labels != -100 (cross-entropy skips them)
    sequence classification, regression / multi-label (float (B,) or (B, K)): 1 per example (its K
        elements: the same K for every example, so the ratio of examples is the ratio of elements)
    next-sentence prediction (labels (B,)): labels != -100
    token classification, masked LM (labels (B, T)): the example's labels != -100 (padding must be -100)

Anything else gives a reason instead of a plan and the caller runs the batches as given:
question answering (its start/end softmax runs over the padded positions too, so the padding is
part of the loss), pre-training (two losses, two means), multiple choice, a mask that is not a
prefix or is empty, labels on padded tokens, a key this file does not know how to cut, a position_ids
that is not (B, T), dtypes that differ between batches, a batch or a run whose loss counts nothing.

    B = examples of a batch, T = its padded length, R = examples of a run, S = its padded length
"""
import numpy as np


RUN_TOKENS = 1024      # tokens per regrouped run (docs/performance.md, "Work nobody reads", says why)
TOKEN_KEYS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "inputs_embeds")   # (B, T, ...)


class Plan:
    """examples: (batch, row, length) of every example, in run order; runs: (start, stop) slices of
    examples; count: (examples,) the loss elements of each; weight: (examples,) w_b = C_run / C_batch;
    keys: the batches' keys; label_kind."""

    def __init__(self, examples, runs, count, weight, keys, label_kind, arrays):
        self.examples, self.runs, self.count, self.weight, self.keys = examples, runs, count, weight, keys
        self.label_kind, self._arrays = label_kind, arrays

    def inputs(self, k):
        """The model's inputs for run k: every key cut to the example's length and padded to the
        run's longest (0; -100 for token labels; attention_mask 1 on the real tokens)."""
        start, stop = self.runs[k]
        rows = self.examples[start:stop]
        S = max(n for _, _, n in rows)
        out = {}
        for key in self.keys:
            pieces = [self._arrays[i][key][r] for i, r, _ in rows]
            if key in TOKEN_KEYS or (key == "labels" and self.label_kind == "token"):
                fill = -100 if key == "labels" else 0
                first = pieces[0]
                padded = np.full((len(rows), S) + first.shape[1:], fill, dtype=first.dtype)       # (R, S, ...)
                for j, (p, (_, _, n)) in enumerate(zip(pieces, rows)):
                    padded[j, :n] = p[:n]
                out[key] = padded
            else:
                out[key] = np.stack(pieces)                                                  # (R, ...)
        lengths = np.array([n for _, _, n in rows])
        mask_dtype = out["attention_mask"].dtype if "attention_mask" in out else np.int64
        out["attention_mask"] = (np.arange(S)[None, :] < lengths[:, None]).astype(mask_dtype)  # (R, S)
        return out

    def batch_of(self, k):
        """(R,) the batch each example of run k came from."""
        start, stop = self.runs[k]
        return np.array([i for i, _, _ in self.examples[start:stop]])


def label_kind(model, batch):
    """How the model's loss counts (see the module docstring), or a reason it cannot be regrouped:
    model.regroup_kind, read from the terms its loss_terms declare (npbert/modeling/loss_terms.py)."""
    return model.regroup_kind(batch)


def plan_runs(model, batches, run_tokens=None):
    """A Plan for `batches` (dicts of arrays, as head_importance takes them), or a string saying why
    they cannot be regrouped with the same results.  run_tokens: how many tokens (padding included)
    a run may hold, at least one example (default: RUN_TOKENS, or the largest batch's B T if more)."""
    if not all(isinstance(b, dict) for b in batches):
        return "a batch that is not a dict"
    kind = label_kind(model, batches[0])
    if kind not in ("class", "example", "token"):
        return kind
    if not all("labels" in b for b in batches):
        return "a batch without labels"
    arrays = [{k: np.asarray(v) for k, v in b.items()} for b in batches]
    keys = tuple(arrays[0])
    examples, counts, totals, largest = [], [], [], 0
    for i, batch in enumerate(arrays):
        if tuple(batch) != keys:
            return f"batch {i} has keys {sorted(batch)}, batch 0 {sorted(keys)}"
        for k in keys:
            if batch[k].dtype != arrays[0][k].dtype:
                return f"batch {i}'s {k} is {batch[k].dtype}, batch 0's {arrays[0][k].dtype}"
        lengths = _lengths(batch, i)
        if isinstance(lengths, str):
            return lengths
        count = _loss_counts(batch, kind, lengths, i)
        if isinstance(count, str):
            return count
        if count.sum() == 0:
            return f"batch {i}: no label counts in its loss"
        examples += [(i, r, int(n)) for r, n in enumerate(lengths)]
        largest = max(largest, int(np.prod(batch.get("input_ids", batch.get("inputs_embeds")).shape[:2])))   # B T
        counts.append(count)
        totals.append(float(count.sum()))
    count = np.concatenate(counts).astype(np.float64)                                  # (examples,)
    order = sorted(range(len(examples)), key=lambda j: examples[j][2])                 # stable
    examples, count = [examples[j] for j in order], count[order]
    budget = run_tokens or max(RUN_TOKENS, largest)
    runs, start = [], 0
    for stop in range(1, len(examples) + 1):       # sorted: the newest example is the run's longest
        if stop == len(examples) or (stop + 1 - start) * examples[stop][2] > budget:
            runs.append((start, stop))
            start = stop
    weight = np.empty(len(examples))
    for start, stop in runs:
        c_run = count[start:stop].sum()
        if c_run == 0:
            return f"a run of examples {start}..{stop - 1} (sorted by length) whose loss counts nothing"
        weight[start:stop] = [c_run / totals[i] for i, _, _ in examples[start:stop]]
    return Plan(examples, runs, count, weight, keys, kind, arrays)


def _lengths(batch, i):
    """(B,) real lengths from a right-padding attention_mask (all T without one), or a reason."""
    known = set(TOKEN_KEYS) | {"labels"}
    unknown = sorted(set(batch) - known)
    if unknown:
        return f"batch {i} has key(s) {unknown} this regrouping does not know how to cut"
    main = batch.get("input_ids", batch.get("inputs_embeds"))
    if main is None or main.ndim < 2:
        return f"batch {i} has no input_ids (B, T) or inputs_embeds (B, T, H)"
    B, T = main.shape[:2]
    for k in TOKEN_KEYS:
        if k in batch and batch[k].shape[:2] != (B, T):
            return f"batch {i}'s {k} has shape {batch[k].shape}, not ({B}, {T}, ...)"
    if "attention_mask" not in batch:
        return np.full(B, T)
    mask = batch["attention_mask"]
    if mask.ndim != 2 or not np.isin(mask, (0, 1)).all():
        return f"batch {i}'s attention_mask is not (B, T) of 0/1"
    lengths = (mask != 0).sum(axis=1)                                                # (B,)
    if (lengths == 0).any():
        return f"batch {i} has an example with no real token"
    if not ((mask != 0) == (np.arange(T)[None, :] < lengths[:, None])).all():
        return f"batch {i}'s attention_mask is not a prefix of ones (left padding, or holes)"
    return lengths


def _loss_counts(batch, kind, lengths, i):
    """(B,) how many loss elements each example adds to its batch's mean, or a reason."""
    labels, B = batch["labels"], len(lengths)
    if kind == "token":
        T = batch.get("input_ids", batch.get("inputs_embeds")).shape[1]
        if labels.shape != (B, T):
            return f"batch {i}'s labels have shape {labels.shape}, not (B, T)"
        padded = np.arange(labels.shape[1])[None, :] >= lengths[:, None]               # (B, T)
        if (labels[padded] != -100).any():
            return f"batch {i} has labels other than -100 on padded tokens"
        return (labels != -100).sum(axis=1)
    if labels.ndim == 0 or labels.shape[0] != B or (kind == "class" and labels.size != B):
        return f"batch {i}'s labels have shape {labels.shape} for {B} examples"
    if kind == "class":
        return (labels.reshape(B) != -100).astype(np.int64)
    return np.ones(B, dtype=np.int64)
