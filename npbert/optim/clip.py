"""clip_grad_norm_: torch.nn.utils.clip_grad_norm_, in place, on the model's parameters' `.grad`
(`clip_grad_norm_(model.parameters(), 1.0)`) or on the gradient dict model.backward() returns.

    total = (sum over every gradient of ||g||_p^p)^(1/p)      (max |g| for p = inf)
    g <- g * min(1, max_norm / (total + 1e-6))                  every gradient, the same factor

Parameters whose `.grad` is None are skipped, as torch skips them.  Returns the total norm before
clipping (a float), as torch returns it (as a tensor).

A nan or inf in a gradient makes the total nan or inf.  As torch: with error_if_nonfinite=True
that is a RuntimeError and no gradient is changed; with the default False the gradients are
scaled by the factor anyway (a nan total makes every gradient nan; an inf total makes the finite
entries 0).  npbert adds what torch leaves silent: the error, or else a RuntimeWarning, names the
first parameter whose gradient holds nan or inf.
"""
import math
import warnings

import numpy as np


def _gradients(params):
    """(name, gradient array) pairs to clip: the dict's items, or the `.grad` of each parameter given."""
    if isinstance(params, dict):
        return [(name, g) for name, g in params.items() if g is not None]
    if isinstance(params, np.ndarray):
        params = [params]
    pairs = []
    for i, p in enumerate(params):
        if not hasattr(p, "requires_grad_"):
            raise TypeError(f"clip_grad_norm_: item {i} is a {type(p).__name__}, not a model parameter: give "
                            "model.parameters() (their .grad is clipped) or the dict model.backward() returns")
        if p.grad is not None:
            pairs.append((p._name if p._name is not None else f"parameter {i}", p.grad))
    return pairs


def _first_nonfinite(pairs):
    """The name of the first gradient holding nan or inf (None if every one is finite)."""
    return next((name for name, g in pairs if not np.isfinite(g).all()), None)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """`foreach` is accepted for torch's signature and has no effect."""
    norm_type = float(norm_type)
    pairs = _gradients(parameters)
    if not pairs:
        return 0.0
    arrays = [g for _, g in pairs]
    if norm_type == math.inf:
        # np.max over the per-gradient maxima, so that a nan anywhere makes the total nan
        total = float(np.max([np.max(np.abs(g)) if g.size else 0.0 for g in arrays]))
    elif norm_type == 2.0:
        total = math.sqrt(sum(float(np.vdot(g, g)) for g in arrays))
    else:
        total = sum(float(np.sum(np.abs(g) ** norm_type)) for g in arrays) ** (1.0 / norm_type)
    if not math.isfinite(total):
        first = _first_nonfinite(pairs)
        where = (f"the gradient of {first!r} holds nan or inf" if first is not None else
                 "every gradient is finite, but the norm overflowed")
        if error_if_nonfinite:
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite "
                               f"({total}), so it cannot be clipped: {where}. No gradient was changed. To scale "
                               "the gradients by the non-finite norm anyway, as torch, set error_if_nonfinite=False")
        warnings.warn(f"clip_grad_norm_: the total norm of the gradients is {total} ({where}); as torch, the "
                      f"gradients were scaled by max_norm / (total + 1e-6) = {float(max_norm) / (total + 1e-6)}, so "
                      "they are not usable: skip this step (or pass error_if_nonfinite=True to raise here)",
                      RuntimeWarning, stacklevel=2)
    coef = float(max_norm) / (total + 1e-6)
    if coef < 1.0 or math.isnan(coef):             # torch's clamp(coef, max=1) keeps a nan
        with np.errstate(invalid="ignore"):       # 0 * inf: a non-finite total, warned about above
            for g in arrays:
                g *= g.dtype.type(coef)
    return total
