"""torch.nn.functional's losses on NumPy arrays, differentiable when they are a model's outputs:

    loss = F.cross_entropy(outputs.logits, labels)       # a NumPy float with backward()
    (loss / accumulation_steps).backward()               # the model's backward, dL/dlogits upstream

    N = examples, C = classes (torch's layout: the class axis is axis 1 of (N, C, d1, ...))

Each returns the loss as torch computes it and, when its input is an output of a model call (or a
slice or reshape of one), a loss whose `backward()` runs that call's backward with the loss's
gradient with respect to that output (npbert/modeling/loss.py).  reduction="none" returns the
per-element losses as a plain array (not differentiable: reduce with "mean" or "sum" instead).

Which `functional` holds what: this module holds torch's losses on a model's outputs, whose
`backward()` runs the model's; npbert.functional holds the ops (linear, layer_norm, softmax,
attention, the activations, the op-level losses ...) as forward/backward pairs, and softmax /
log_softmax on plain arrays.
"""
import numpy as np

from npbert.modeling.loss import _make, gradient_to_source, source_of
from npbert.ops.softmax import log_softmax

__all__ = ["cross_entropy", "mse_loss", "binary_cross_entropy_with_logits"]
_REDUCTIONS = ("mean", "sum", "none")


def _result(value, input, grad, reduction):
    """value as a loss: differentiable when `input` comes from a model call, else with no terms."""
    if reduction == "none":
        return value
    found = source_of(input)
    terms = []
    if found is not None:
        model, forward_id, name, index, output = found
        g = gradient_to_source(input, grad, output)
        if index is not None:                         # hidden_states[i] / attentions[i]: a list upstream
            i, n = index
            g = [g if k == i else None for k in range(n)]
        terms = [(model, forward_id, {name: g})]
    return _make(np.asarray(value, dtype=input.dtype)[()], terms)


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _float_input(name, x):
    a = np.asarray(x)
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{name}: the input must be floating point (logits), got dtype {a.dtype}")
    return x if isinstance(x, np.ndarray) else a


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """torch.nn.functional.cross_entropy.  input (N, C), (C,) or (N, C, d1, ...) logits; target class
    indices (N,) / () / (N, d1, ...), or class probabilities of input's shape.

        p = softmax(input over C);  l_i = -(1 - eps) w[y_i] log p[i, y_i] - (eps / C) sum_c w_c log p[i, c]
        mean: sum_i l_i / sum_i w[y_i] over the targets that are not ignore_index (probabilities: / N)
        dl_i / dz[i, k] = (1 - eps) w[y_i] (p[i, k] - [k = y_i]) + (eps / C) (sum_c w_c p[i, k] - w_k)"""
    _check_reduction(reduction)
    x = _float_input("cross_entropy", input)
    if x.ndim == 0:
        raise ValueError("cross_entropy: input must have a class axis, (C,) or (N, C, ...)")
    z = np.moveaxis(x, 1, -1) if x.ndim > 1 else x[None]            # (M..., C): the class axis last
    C = z.shape[-1]
    dtype = x.dtype.type
    w = np.ones(C, dtype=x.dtype) if weight is None else np.asarray(weight, dtype=x.dtype)
    if w.shape != (C,):
        raise ValueError(f"cross_entropy: weight has shape {w.shape}, expected ({C},)")
    eps = dtype(label_smoothing)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    logp = log_softmax(z)                                              # (M..., C)
    p = np.exp(logp)
    t = np.asarray(target)
    if np.issubdtype(t.dtype, np.floating):                           # class probabilities, input's shape
        if t.shape != x.shape:
            raise ValueError(f"cross_entropy: probability targets have shape {t.shape}, the input {x.shape}")
        q = (np.moveaxis(t, 1, -1) if x.ndim > 1 else t[None]).astype(x.dtype)
        q = q * (1 - eps) + eps / C                                     # smoothing mixes in the uniform
        per = -(q * w * logp).sum(axis=-1)                             # (M...)
        dz = p * (q * w).sum(axis=-1, keepdims=True) - q * w           # (M..., C)
        denom = dtype(per.size)
    else:
        if t.dtype == bool or not np.issubdtype(t.dtype, np.integer):
            raise TypeError(f"cross_entropy: targets are class indices (integers) or probabilities (floats), "
                            f"got dtype {t.dtype}")
        y = t.reshape(z.shape[:-1]) if t.size == int(np.prod(z.shape[:-1])) else None
        if y is None:
            raise ValueError(f"cross_entropy: target has shape {t.shape}, the input {x.shape} needs "
                             f"{tuple(z.shape[:-1]) if x.ndim > 1 else ()}")
        keep = y != ignore_index
        if np.any(keep & ((y < 0) | (y >= C))):
            bad = y[keep & ((y < 0) | (y >= C))]
            raise IndexError(f"cross_entropy: target {int(bad.ravel()[0])} is out of bounds for {C} classes")
        ys = np.where(keep, y, 0)
        wy = np.where(keep, w[ys], 0).astype(x.dtype)                   # (M...)
        logp_y = np.take_along_axis(logp, ys[..., None], axis=-1)[..., 0]
        smooth = -(logp * w).sum(axis=-1) * (eps / C)                   # (M...)
        per = np.where(keep, -(1 - eps) * wy * logp_y + smooth, 0)
        onehot = np.zeros_like(p)
        np.put_along_axis(onehot, ys[..., None], 1, axis=-1)
        dz = ((1 - eps) * wy[..., None] * (p - onehot)
              + (eps / C) * (w.sum() * p - w)) * keep[..., None]
        denom = wy.sum()
    per = per.astype(x.dtype)
    if reduction == "none":
        out = per if x.ndim > 1 else per[0]
        return _result(out, x, None, "none")
    if reduction == "sum":
        value, scale = per.sum(), dtype(1)
    else:
        value, scale = per.sum() / denom, dtype(1) / denom
    grad = (dz * scale).astype(x.dtype)
    grad = np.moveaxis(grad, -1, 1) if x.ndim > 1 else grad[0]
    return _result(value, x, grad, reduction)


def mse_loss(input, target, reduction="mean"):
    """torch.nn.functional.mse_loss: l = (input - target)^2; mean or sum; d/d input = 2 (input - target) / n."""
    _check_reduction(reduction)
    x = _float_input("mse_loss", input)
    t = np.asarray(target, dtype=x.dtype)
    if t.shape != x.shape:
        raise ValueError(f"mse_loss: target has shape {t.shape}, the input {x.shape} (torch would broadcast "
                         f"them with a warning; give the same shape, e.g. logits[:, 0] or labels[:, None])")
    diff = x - t
    per = diff * diff
    if reduction == "none":
        return per
    if reduction == "sum":
        return _result(per.sum(), x, 2 * diff, reduction)
    return _result(per.mean(), x, 2 * diff / x.dtype.type(x.size), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """torch.nn.functional.binary_cross_entropy_with_logits:
        l = -w [pw y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))],   log sigmoid(x) = -softplus(-x)
        d l / d x = w [sigmoid(x) (pw y + 1 - y) - pw y]"""
    _check_reduction(reduction)
    x = _float_input("binary_cross_entropy_with_logits", input)
    y = np.asarray(target, dtype=x.dtype)
    if y.shape != x.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target has shape {y.shape}, the input {x.shape}")
    w = np.ones((), dtype=x.dtype) if weight is None else np.asarray(weight, dtype=x.dtype)
    pw = np.ones((), dtype=x.dtype) if pos_weight is None else np.asarray(pos_weight, dtype=x.dtype)
    softplus_neg = np.logaddexp(0, -x)                                 # -log sigmoid(x)
    softplus_pos = np.logaddexp(0, x)                                  # -log(1 - sigmoid(x))
    per = (w * (pw * y * softplus_neg + (1 - y) * softplus_pos)).astype(x.dtype)
    sig = np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))
    grad = np.broadcast_to(w * (sig * (pw * y + 1 - y) - pw * y), x.shape).astype(x.dtype)
    if reduction == "none":
        return per
    if reduction == "sum":
        return _result(per.sum(), x, grad, reduction)
    return _result(per.mean(), x, grad / x.dtype.type(x.size), reduction)
