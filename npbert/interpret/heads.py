"""Head importance and the pruning curve: Michel, Levy & Neubig 2019, "Are Sixteen Heads Really
Better than One?", as their code and transformers' bertology example compute it.

Every head h of every layer gets a mask value xi_h multiplying its attention probabilities
(probs = dropout(softmax(scores)) * xi; all ones leaves the model unchanged).  The importance of a
head is how much the loss moves when its xi moves:

    I_h = sum over batches |dL_batch / d xi_h|  /  (number of tokens seen)
          ("batch": dL/dxi from model.backward(return_intermediate_grads=True).head_mask, the mean
          loss of each batch, as bertology's head_mask.grad)
    I_h = sum over batches, examples and tokens f |sum_t dL/dA[b,h,f,t] A[b,h,f,t]|  /  (tokens)
          ("token": Michel et al.'s own code, |grad_ctx . ctx| per query token; the sum over (b, f)
          inside the absolute value is the "batch" figure)

then, per layer, divided by its L2 norm over the layer's heads (+1e-20), their default
(`normalize_importance_by_layer=False` is their --dont_normalize_importance_by_layer), and
optionally min-max scaled over all heads (bertology's global normalisation, off by default here
as in Michel et al.'s code).  The attention entropy of every head (bertology's second table) comes
along: -sum_t A log A per query token, summed over the real (unpadded) tokens, over the tokens.

Two loops compute these sums.  `_per_batch` is the reference, read it first: each batch as the
user gave it, the formulas above as written.  `_regrouped` (the default, when it is exact) gets the
same numbers with almost no padding: the examples of all batches cut to their real length, sorted
by length and run in runs of about regroup.RUN_TOKENS tokens (regroup.py).  The model is in eval
mode (no dropout), so example b's share of a run's d L_run / d xi_h is

    g_bh = sum over (f, t) of dA[b,h,f,t] A[b,h,f,t] / xi_h      (summed over b: the model's head_mask grad)

and its share of its own batch's gradient is w_b g_bh, w_b = C_run / C_batch the ratio of the loss
elements the two means divide by; "batch" sums w_b g_bh per batch before the absolute value,
"token" takes |w_b x| = w_b |x| per query token.  Where that cannot be proven to give the same
numbers (question answering, pre-training, left padding, labels on padding, a head_mask with
zeros...; regroup.py lists them) the per-batch loop runs; `HeadImportance.path` says which ran
and why.  tests/interpret/test_head_regroup.py holds the two equal (float64, 1e-10).

The pruning curve masks heads in order of increasing importance (xi = 0) and evaluates the loss
(and the accuracy of a classifier) with each count masked.

    L = layers, N = heads, B = batch, F = T = tokens
"""
import time

import numpy as np

from npbert.modeling import no_grad

from .layer_runs import inspecting
from .regroup import Plan, plan_runs


class HeadImportance:
    """importance (L, N) normalised as asked; raw (L, N) before normalisation (tokens divided);
    entropy (L, N) mean attention entropy per token; tokens: how many real tokens were seen."""

    def __init__(self, importance, raw, entropy, tokens, granularity, path="per batch"):
        self.importance, self.raw, self.entropy, self.tokens = importance, raw, entropy, tokens
        self.granularity, self.path = granularity, path

    def order(self):
        """Heads from least to most important, as (layer, head) pairs."""
        flat = np.argsort(self.importance, axis=None, kind="stable")
        return [tuple(int(i) for i in np.unravel_index(k, self.importance.shape)) for k in flat]

    def __repr__(self):
        return f"HeadImportance(importance={self.importance.shape}, tokens={self.tokens}, {self.granularity!r})"


def _check_batches(batches, what):
    if not hasattr(batches, "__len__"):
        batches = list(batches)
    if len(batches) == 0:
        raise ValueError(f"{what}: no batches")
    return batches


def _report(progress, done, total, t0, text):
    if progress is not None:
        elapsed = time.perf_counter() - t0
        progress(done, total, elapsed, text)


def head_importance(model, batches, normalize_importance_by_layer=True, normalize_global_importance=False,
                    granularity="batch", head_mask=None, progress=None, regroup=True):
    """Michel et al.'s head importance over `batches`: dicts the model takes, each with its labels
    (the model computes the loss of the batch), e.g. from a DataCollatorWithPadding.

    granularity: "batch" (bertology, the default) or "token" (Michel et al.'s code); see the
    module's docstring.  head_mask: (L, N) values of xi to compute the importance at (ones by
    default).  regroup: run the examples regrouped by length (the same numbers, less padding; see
    the module's docstring) when that is exact, else (or with regroup=False) batch by batch.
    progress: called as progress(done, total, seconds, text) after every forward and backward,
    done and total counting the user's batches (a batch is done when all its examples have run);
    the text gives the loss and the examples done.
    Returns a HeadImportance; its `path` says which loop ran and, for the per-batch one, why."""
    if granularity not in ("batch", "token"):
        raise ValueError(f"granularity must be 'batch' or 'token', got {granularity!r}")
    batches = _check_batches(batches, "head_importance")
    L, N = model.config.num_hidden_layers, model.config.num_attention_heads
    if head_mask is not None:
        head_mask = np.asarray(head_mask, dtype=model.state.dtype)
        if head_mask.shape != (L, N):
            raise ValueError(f"head_mask must be (layers, heads) = ({L}, {N}), got {head_mask.shape}")
        if granularity == "token" and (head_mask == 0).any():
            raise ValueError("granularity='token' reads each head's unmasked probabilities off the ones used: "
                             "give a head_mask without zeros")
    if not regroup:
        plan = "regroup=False"
    elif head_mask is not None and (head_mask == 0).any():
        plan = "a head_mask with zeros (a head's share dA A / xi is undefined at xi = 0)"
    else:
        plan = plan_runs(model, batches)
    with inspecting(model):
        if isinstance(plan, str):
            importance, entropy, tokens = _per_batch(model, batches, granularity, head_mask, progress)
            path = f"per batch: {plan}"
        else:
            importance, entropy, tokens = _regrouped(model, batches, plan, granularity, head_mask, progress)
            path = "regrouped"
    importance /= tokens
    entropy /= tokens
    raw = importance.copy()
    if normalize_importance_by_layer:
        importance /= np.sqrt((importance ** 2).sum(axis=-1, keepdims=True)) + 1e-20
    if normalize_global_importance:
        importance = (importance - importance.min()) / (importance.max() - importance.min())
    return HeadImportance(importance, raw, entropy, tokens, granularity, path)


def _per_batch(model, batches, granularity, head_mask, progress):
    """The reference: each batch as given.  Sums (importance, entropy) (L, N) and the real tokens."""
    L, N = model.config.num_hidden_layers, model.config.num_attention_heads
    importance, entropy, tokens = np.zeros((L, N)), np.zeros((L, N)), 0
    n, seen, t0 = sum(_examples(b) for b in batches), 0, time.perf_counter()
    for step, batch in enumerate(batches):
        out = model(**batch, head_mask=head_mask, output_attentions=True)
        if out.get("loss") is None:
            raise ValueError(f"head_importance: batch {step} gave no loss: each batch needs its labels")
        _, igrads = model.backward(return_intermediate_grads=True)
        real = _real_tokens(batch, out.attentions[0])                           # (B, F) 1/0
        for layer, (A, dA) in enumerate(zip(out.attentions, igrads.attentions)):
            if granularity == "batch":
                importance[layer] += np.abs(igrads.head_mask[layer])
            else:                                     # A is xi * the head's probabilities: divide xi out
                xi = 1.0 if head_mask is None else head_mask[layer][None, :, None]
                per_token = np.einsum("bnft,bnft->bnf", dA, A) / xi                           # (B, N, F)
                importance[layer] += np.abs(per_token).sum(axis=(0, 2))
            entropy[layer] += (_entropy(A) * real[:, None, :]).sum(axis=(0, 2))
        tokens += int(real.sum())
        seen += len(real)
        _report(progress, step + 1, len(batches), t0, f"loss {float(out.loss):.4f}, {seen}/{n} examples")
    return importance, entropy, tokens


def _regrouped(model, batches, plan, granularity, head_mask, progress):
    """The same sums from runs of examples of about one length (regroup.py): each example's share of
    d L_run / d xi_h is sum over (f, t) of dA A / xi_h (A = xi softmax, no dropout in eval), scaled by
    w_b to its batch's mean loss and summed per batch before the absolute value ("batch"), or taken
    per query token ("token", |w_b x| = w_b |x|)."""
    L, N = model.config.num_hidden_layers, model.config.num_attention_heads
    importance, entropy, tokens = np.zeros((L, N)), np.zeros((L, N)), 0
    grads = np.zeros((len(batches), L, N))                  # d L_batch / d xi, summed over its examples
    left = np.bincount([i for i, _, _ in plan.examples], minlength=len(batches))     # examples not run yet
    t0 = time.perf_counter()
    for k, (start, stop) in enumerate(plan.runs):
        inputs = plan.inputs(k)
        out = model(**inputs, head_mask=head_mask, output_attentions=True)
        _, igrads = model.backward(return_intermediate_grads=True)
        w, owner = plan.weight[start:stop], plan.batch_of(k)                          # (R,), (R,)
        real = _real_tokens(inputs, out.attentions[0])                               # (R, F) 1/0
        for layer, (A, dA) in enumerate(zip(out.attentions, igrads.attentions)):
            xi = np.ones(N) if head_mask is None else head_mask[layer]                          # (N,)
            if granularity == "batch":
                share = np.einsum("bnft,bnft->bn", dA, A) / xi[None, :]                        # (R, N)
                np.add.at(grads[:, layer], owner, w[:, None] * share)
            else:
                per_token = np.einsum("bnft,bnft->bnf", dA, A) / xi[None, :, None]             # (R, N, F)
                importance[layer] += (w[:, None] * np.abs(per_token).sum(axis=2)).sum(axis=0)
            entropy[layer] += (_entropy(A) * real[:, None, :]).sum(axis=(0, 2))
        tokens += int(real.sum())
        np.subtract.at(left, owner, 1)
        _report(progress, int((left == 0).sum()), len(batches), t0,
                f"loss {float(out.loss):.4f}, {stop}/{len(plan.examples)} examples")
    if granularity == "batch":
        importance += np.abs(grads).sum(axis=0)
    return importance, entropy, tokens


def _examples(batch):
    """How many examples a batch holds (its input_ids' or inputs_embeds' first axis)."""
    main = batch.get("input_ids", batch.get("inputs_embeds"))
    return 0 if main is None else len(main)


def _real_tokens(batch, attention):
    """(B, F): 1 for a real token, 0 for padding (attention_mask, or all ones)."""
    mask = batch.get("attention_mask")
    B, _, F, _ = attention.shape
    return np.ones((B, F)) if mask is None else np.asarray(mask, dtype=np.float64).reshape(B, F)


def _entropy(A):
    """-sum_t A log A over the keys, 0 log 0 = 0: (B, N, F, T) -> (B, N, F)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(A > 0, A * np.log(np.where(A > 0, A, 1)), 0.0)
    return -plogp.sum(axis=-1)


class PruningCurve:
    """masked: how many heads were masked at each point; loss and accuracy (None unless the model
    is a classifier with class labels) there; order: the heads in the order they were masked."""

    def __init__(self, masked, loss, accuracy, order):
        self.masked, self.loss, self.accuracy, self.order = masked, loss, accuracy, order

    def __repr__(self):
        return f"PruningCurve(points={len(self.masked)}, masked={self.masked[0]}..{self.masked[-1]})"


def pruning_curve(model, batches, importance, points=11, progress=None):
    """Mask the heads in order of increasing `importance` (a HeadImportance, or an (L, N) array) and
    evaluate on `batches` (as head_importance takes them) with 0, ..., L N heads masked, at
    `points` evenly spaced counts.  Returns a PruningCurve."""
    batches = _check_batches(batches, "pruning_curve")
    scores = importance.importance if isinstance(importance, HeadImportance) else np.asarray(importance)
    L, N = model.config.num_hidden_layers, model.config.num_attention_heads
    if scores.shape != (L, N):
        raise ValueError(f"importance must be (layers, heads) = ({L}, {N}), got {scores.shape}")
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    order = np.argsort(scores, axis=None, kind="stable")                         # least important first
    counts = sorted({int(round(c)) for c in np.linspace(0, L * N, points)})
    losses, accuracies = [], []
    t0 = time.perf_counter()
    for done, k in enumerate(counts):
        mask = np.ones(L * N)
        mask[order[:k]] = 0.0
        loss, accuracy = evaluate(model, batches, mask.reshape(L, N))
        losses.append(loss)
        accuracies.append(accuracy)
        _report(progress, done + 1, len(counts), t0, f"{k} heads masked: loss {loss:.4f}"
                + ("" if accuracy is None else f", accuracy {accuracy:.4f}"))
    heads = [tuple(int(i) for i in np.unravel_index(k, (L, N))) for k in order]
    return PruningCurve(counts, losses, None if accuracies[0] is None else accuracies, heads)


def evaluate(model, batches, head_mask=None, regroup=True):
    """(the loss of all the batches taken as one, accuracy or None) of `model` on `batches` with
    `head_mask`.  The loss is the model's own, term by term (model.head_loss): each term's mean over
    all its items of every batch, sum_c w_c (sum of the batches' item losses of c) / (their count),
    so a batch counts by its items, not its rows.  The accuracy is computed for logits (B, K) and
    integer class labels (B,).  regroup: when every example is one element of its batch's mean
    loss (classification without -100 labels, regression), run the examples regrouped by length
    (regroup.py): each run is then a batch like any other; otherwise batch by batch."""
    batches = _check_batches(batches, "evaluate")
    plan = plan_runs(model, batches) if regroup else None
    if isinstance(plan, Plan) and (plan.count == 1).all():
        batches = [plan.inputs(k) for k in range(len(plan.runs))]
    sums, counts, weights, n, correct, classified = {}, {}, {}, 0, 0, True
    with inspecting(model), no_grad():
        for batch in batches:
            out = model(**batch, head_mask=head_mask)
            if model.head_loss is None:
                raise ValueError("evaluate: a batch gave no loss: each batch needs its labels")
            for t in model.head_loss.terms:               # the mean over count items: their sum is mean x count
                if t.count:
                    sums[t.name] = sums.get(t.name, 0.0) + float(t.mean) * t.count
                counts[t.name] = counts.get(t.name, 0) + t.count
                weights[t.name] = t.weight
            labels = np.asarray(batch.get("labels"))
            n += len(labels)
            logits = out.get("logits")
            if classified and logits is not None and logits.ndim == 2 and np.issubdtype(labels.dtype, np.integer):
                correct += int((logits.argmax(axis=-1) == labels).sum())
            else:
                classified = False
    loss = sum(weights[c] * (sums.get(c, 0.0) / counts[c] if counts[c] else float("nan")) for c in counts)
    return loss, (correct / n if classified else None)
