"""clip_grad_norm_: torch.nn.utils.clip_grad_norm_, in place, on the model's parameters' `.grad`
(`clip_grad_norm_(model.parameters(), 1.0)`) or on the gradient dict model.backward() returns.

    total = (sum over every gradient of ||g||_p^p)^(1/p)      (max |g| for p = inf)
    g <- g * min(1, max_norm / (total + 1e-6))                  every gradient, the same factor

Parameters whose `.grad` is None are skipped, as torch skips them.  Returns the total norm before
clipping (a float), as torch returns it (as a tensor).
"""
import math

import numpy as np


def _gradients(params):
    """The gradient arrays to clip: the dict's values, or the `.grad` of each parameter given."""
    if isinstance(params, dict):
        return [g for g in params.values() if g is not None]
    if isinstance(params, np.ndarray):
        params = [params]
    arrays = []
    for i, p in enumerate(params):
        if not hasattr(p, "requires_grad_"):
            raise TypeError(f"clip_grad_norm_: item {i} is a {type(p).__name__}, not a model parameter: give "
                            "model.parameters() (their .grad is clipped) or the dict model.backward() returns")
        if p.grad is not None:
            arrays.append(p.grad)
    return arrays


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    norm_type = float(norm_type)
    arrays = _gradients(parameters)
    if not arrays:
        return 0.0
    if norm_type == math.inf:
        total = max(float(np.max(np.abs(g))) if g.size else 0.0 for g in arrays)
    elif norm_type == 2.0:
        total = math.sqrt(sum(float(np.vdot(g, g)) for g in arrays))
    else:
        total = sum(float(np.sum(np.abs(g) ** norm_type)) for g in arrays) ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients is non-finite, so it cannot be clipped")
    coef = float(max_norm) / (total + 1e-6)
    if coef < 1.0:
        for g in arrays:
            g *= g.dtype.type(coef)
    return total
