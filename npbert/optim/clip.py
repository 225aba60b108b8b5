"""clip_grad_norm_: torch.nn.utils.clip_grad_norm_ on the gradient dict, in place.

    total = (sum over every gradient of ||g||_p^p)^(1/p)      (max |g| for p = inf)
    g <- g * min(1, max_norm / (total + 1e-6))                  every gradient, the same factor

Returns the total norm before clipping (a float), as torch returns it.
"""
import math

import numpy as np


def clip_grad_norm_(grads, max_norm, norm_type=2.0, error_if_nonfinite=False):
    if not isinstance(grads, dict):
        raise TypeError(f"clip_grad_norm_(grads, ...): grads must be the dict model.backward() returns, "
                        f"got {type(grads).__name__}")
    norm_type = float(norm_type)
    arrays = [g for g in grads.values() if g is not None]
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
