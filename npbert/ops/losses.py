"""The three losses BERT's heads use, as forward/backward pairs with torch's semantics.

    N = counted rows (or elements), C = classes

    cross_entropy   logits (..., C), labels (...) ints   -> mean over rows whose label != ignore_index
    mse             input (...), target (...)            -> mean((input - target)^2)
    bce_with_logits logits (...), targets (...) in [0, 1] -> mean(-y log s(x) - (1 - y) log(1 - s(x)))

Every loss is a 0-d value in the dtype of its input, `reduction="mean"` as torch's default.
`*_backward(dloss, cache)` returns the gradient with respect to the first input (the logits),
shaped like it: `dloss` is the upstream gradient of the scalar loss (1.0 to differentiate the
loss itself).

When every label is `ignore_index`, the mean has nothing to average: torch returns NaN
(0 / 0) and a gradient of zeros; so do we.  Derivations: docs/heads.md.
"""
from collections import namedtuple

import numpy as np

# What each forward keeps for its backward; `count` is N, the number of items its mean is over.
CrossEntropyCache = namedtuple("CrossEntropyCache", ["probs", "y_safe", "counted", "count", "shape"])
MSECache = namedtuple("MSECache", ["diff", "count"])
BCECache = namedtuple("BCECache", ["sig", "y", "count"])


def _check_float(name, x):
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got {x.dtype}")
    return x


# ---- cross-entropy with an ignore index --------------------------------------------------
def cross_entropy_count(labels, ignore_index=-100):
    """N: the number of labels the mean is over (those not equal to ignore_index)."""
    return int(np.count_nonzero(np.asarray(labels) != ignore_index))


def cross_entropy_forward(logits, labels, ignore_index=-100):
    """torch.nn.functional.cross_entropy(logits, labels, ignore_index=ignore_index), mean.

    Args:
        logits: (..., C) float32/float64 scores before softmax.
        labels: (...) integers in [0, C), or `ignore_index` for a row that does not count.
        ignore_index: the label value of rows left out of the loss and of the mean.

    Returns:
        (loss, cache): loss a 0-d value in logits' dtype, the mean of -log softmax(logits)[label]
        over the counted rows; NaN if no row counts (as torch).
    """
    logits = _check_float("logits", logits)
    labels = np.asarray(labels)
    if labels.dtype == bool or not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"cross-entropy labels must be integers (class indices), got dtype {labels.dtype}")
    if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
        raise ValueError(f"cross-entropy labels have shape {labels.shape}, the logits {logits.shape} "
                         f"need labels of shape {logits.shape[:-1]}")
    C = logits.shape[-1]
    x = logits.reshape(-1, C)                                   # (M, C), M = all rows
    y = labels.reshape(-1).astype(np.int64)                     # (M,)
    counted = y != ignore_index                                 # (M,) bool
    bad = counted & ((y < 0) | (y >= C))
    if bad.any():
        raise IndexError(f"cross-entropy label {int(y[bad][0])} is out of bounds: labels must lie in "
                         f"[0, {C}) or equal ignore_index={ignore_index}")
    # log-softmax by log-sum-exp: subtract the row max so that exp never overflows
    shifted = x - x.max(axis=-1, keepdims=True)                 # (M, C), max entry 0
    expd = np.exp(shifted)                                      # (M, C)
    sumexp = expd.sum(axis=-1, keepdims=True)                   # (M, 1), in [1, C]
    logp = shifted - np.log(sumexp)                             # (M, C) = log softmax(x)
    y_safe = np.where(counted, y, 0)                            # (M,) any valid index where ignored
    nll = -logp[np.arange(len(y)), y_safe]                      # (M,) -log p[label]
    n = int(np.count_nonzero(counted))                          # N, the rows that count: cross_entropy_count
    total = nll[counted].sum(dtype=logits.dtype)
    # torch's mean over zero rows is 0/0 = NaN; say it explicitly rather than warn
    loss = total / logits.dtype.type(n) if n else logits.dtype.type(np.nan)
    probs = expd / sumexp                                       # (M, C) = softmax(x)
    return np.asarray(loss, dtype=logits.dtype)[()], CrossEntropyCache(probs, y_safe, counted, n, logits.shape)


def cross_entropy_backward(dloss, cache):
    """d loss / d logits = (softmax(x) - onehot(label)) / N on counted rows, 0 on ignored rows.

    Each counted row of the gradient sums to zero.  With N = 0 the gradient is all zeros (torch).
    """
    probs, y_safe, counted, n, shape = cache
    dtype = probs.dtype
    dx = probs.copy()                                           # (M, C)
    dx[np.arange(len(y_safe)), y_safe] -= 1                     # softmax - onehot
    dx[~counted] = 0                                            # ignored rows do not reach the loss
    scale = dtype.type(dloss) / dtype.type(n) if n else dtype.type(0)
    dx *= scale
    return dx.reshape(shape)


# ---- mean squared error ------------------------------------------------------------------
def elementwise_count(target):
    """N for mse and bce_with_logits: every element of the target counts."""
    return int(np.size(target))


def mse_forward(input, target):
    """torch.nn.functional.mse_loss(input, target), mean over all elements.

    input: any shape, float; target: the same shape (cast to input's dtype).
    """
    input = _check_float("input", input)
    target = np.asarray(target)
    if target.dtype == bool or not np.issubdtype(target.dtype, np.number):
        raise TypeError(f"mse target must be numeric, got dtype {target.dtype}")
    if target.shape != input.shape:
        raise ValueError(f"mse target has shape {target.shape}, the input has shape {input.shape}")
    diff = input - target.astype(input.dtype)                  # (...)
    n = diff.size
    loss = (diff * diff).sum() / input.dtype.type(n) if n else input.dtype.type(np.nan)
    return np.asarray(loss, dtype=input.dtype)[()], MSECache(diff, n)


def mse_backward(dloss, cache):
    """d mean((x - y)^2) / dx = 2 (x - y) / n."""
    diff, n = cache
    dtype = diff.dtype
    return diff * (dtype.type(2) * dtype.type(dloss) / dtype.type(max(n, 1)))


# ---- binary cross-entropy on logits ------------------------------------------------------
def bce_with_logits_forward(logits, targets):
    """torch.nn.functional.binary_cross_entropy_with_logits(logits, targets), mean.

    Per element, with s = sigmoid(x):  -y log s - (1 - y) log(1 - s)
                                     = max(x, 0) - x y + log(1 + exp(-|x|))
    the second form never overflows (exp of a non-positive number) and loses nothing for large |x|.

    logits: any shape, float; targets: the same shape, float (probabilities, usually 0 or 1).
    """
    logits = _check_float("logits", logits)
    targets = np.asarray(targets)
    if not np.issubdtype(targets.dtype, np.floating):
        raise TypeError(f"bce_with_logits targets must be floating point (0.0/1.0 per label), "
                        f"got dtype {targets.dtype}")
    if targets.shape != logits.shape:
        raise ValueError(f"bce_with_logits targets have shape {targets.shape}, the logits have "
                         f"shape {logits.shape}")
    y = targets.astype(logits.dtype)
    x = logits
    per = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))     # (...)
    n = per.size
    loss = per.sum() / x.dtype.type(n) if n else x.dtype.type(np.nan)
    # sigmoid without overflow: exp of -|x| only
    e = np.exp(-np.abs(x))
    sig = np.where(x >= 0, 1 / (1 + e), e / (1 + e))                  # (...) = sigmoid(x)
    return np.asarray(loss, dtype=x.dtype)[()], BCECache(sig.astype(x.dtype, copy=False), y, n)


def bce_with_logits_backward(dloss, cache):
    """d loss / dx = (sigmoid(x) - y) / n."""
    sig, y, n = cache
    dtype = sig.dtype
    return (sig - y) * (dtype.type(dloss) / dtype.type(max(n, 1)))
