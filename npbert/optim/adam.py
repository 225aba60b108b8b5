"""Adam and AdamW, torch.optim's updates step for step (Kingma & Ba 2015; Loshchilov & Hutter 2019).

For a parameter p with gradient g, at step t = 1, 2, ...:

    Adam  (L2):        g <- g + wd * p                     the decay goes through the moments
    AdamW (decoupled): p <- p * (1 - lr * wd)              the decay bypasses them
    m <- m + (1 - beta1) * (g - m)                         = beta1 * m + (1 - beta1) * g   (torch's lerp)
    v <- beta2 * v + (1 - beta2) * g * g
    p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

Every array is updated in place in the parameter's dtype.  The temporaries live in one
preallocated scratch buffer (two for Adam with weight decay), so a step allocates nothing.
"""
import math

import numpy as np

from .optimizer import Optimizer


class Adam(Optimizer):
    """torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _check_group(self, group, where):
        super()._check_group(group, where)
        beta1, beta2 = group["betas"]
        if not 0.0 <= group["eps"]:
            raise ValueError(f"{where}: Invalid epsilon value: {group['eps']}")
        if not 0.0 <= beta1 < 1.0:
            raise ValueError(f"{where}: Invalid beta parameter at index 0: {beta1}")
        if not 0.0 <= beta2 < 1.0:
            raise ValueError(f"{where}: Invalid beta parameter at index 1: {beta2}")
        if not 0.0 <= group["weight_decay"]:
            raise ValueError(f"{where}: Invalid weight_decay value: {group['weight_decay']}")

    def _update(self, name, p, g, group, state):
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p)                  # m
            state["exp_avg_sq"] = np.zeros_like(p)               # v
        state["step"] += 1
        t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        tmp = self._scratch_like(p)

        if wd != 0:
            if self._decoupled:
                p *= 1 - lr * wd                                  # AdamW: p <- p (1 - lr wd)
            else:
                g_decayed = np.multiply(p, wd, out=self._scratch_like(p, 1))
                g_decayed += g                                    # Adam: g <- g + wd p
                g = g_decayed
        np.subtract(g, m, out=tmp)
        tmp *= 1 - beta1
        m += tmp                                                  # m <- m + (1 - beta1)(g - m)
        np.multiply(g, g, out=tmp)
        tmp *= 1 - beta2
        v *= beta2
        v += tmp                                                  # v <- beta2 v + (1 - beta2) g^2

        bias_correction1 = 1 - beta1 ** t
        bias_correction2_sqrt = math.sqrt(1 - beta2 ** t)
        step_size = lr / bias_correction1
        np.sqrt(v, out=tmp)
        tmp /= bias_correction2_sqrt
        tmp += eps                                                # denom = sqrt(v) / sqrt(1 - beta2^t) + eps
        np.divide(m, tmp, out=tmp)
        tmp *= step_size
        p -= tmp                                                  # p <- p - step_size * m / denom


class AdamW(Adam):
    """torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
