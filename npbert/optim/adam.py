"""Adam and AdamW, torch.optim's updates step for step (Kingma & Ba 2015; Loshchilov & Hutter 2019).

For a parameter p with gradient g, at step t = 1, 2, ...:

    Adam  (L2):        g <- g + wd * p                     the decay goes through the moments
    AdamW (decoupled): p <- p * (1 - lr * wd)              the decay bypasses them
    m <- m + (1 - beta1) * (g - m)                         = beta1 * m + (1 - beta1) * g   (torch's lerp)
    v <- beta2 * v + (1 - beta2) * g * g
    p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

This file is the fast path's step (npbert's default): every array is updated in place in the
parameter's dtype, the temporaries live in one preallocated scratch buffer (two for Adam with
weight decay), so a step allocates nothing, and a large parameter is updated in cache-sized
pieces on npbert's threads (elementwise, so the result is the same).  The reference path's step
is `reference.adam_step`, the rule above line by line; the optimizer reads npbert.get_path() at
each step() (optimizer.py).
"""
import math

import numpy as np

from npbert import unsupported

from .optimizer import Optimizer
from .pieces import update_in_pieces
from .reference import adam_step


_REFUSED = {"amsgrad": "npbert's Adam keeps no running maximum of v; leave amsgrad=False",
            "maximize": "minimise the negated loss instead (loss = -objective)"}


class Adam(Optimizer):
    """torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False, decoupled_weight_decay=False):
        unsupported.refuse_keywords(f"{type(self).__name__}()", dict(amsgrad=amsgrad, maximize=maximize),
                                    _REFUSED)
        if decoupled_weight_decay:          # torch: Adam(decoupled_weight_decay=True) is AdamW
            self._decoupled = True
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

    def _init_state(self, p, state):
        """The state both paths keep (so a checkpoint of one resumes on the other)."""
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p)                  # m
            state["exp_avg_sq"] = np.zeros_like(p)               # v
        state["step"] += 1

    def _update_reference(self, name, p, g, group, state):
        self._init_state(p, state)
        beta1, beta2 = group["betas"]
        adam_step(p, g, state["exp_avg"], state["exp_avg_sq"], state["step"], group["lr"], beta1, beta2,
                  group["eps"], group["weight_decay"], self._decoupled)

    def _update(self, name, p, g, group, state):
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        self._init_state(p, state)
        t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        c = dict(lr=lr, eps=eps, wd=wd, beta1=beta1, beta2=beta2, decoupled=self._decoupled,
                 step_size=lr / (1 - beta1 ** t), bias_correction2_sqrt=math.sqrt(1 - beta2 ** t))
        tmp = self._scratch_like(p)
        g2 = self._scratch_like(p, 1) if wd != 0 and not self._decoupled else None
        return update_in_pieces(lambda p, g, m, v, tmp, g2: _adam_kernel(p, g, m, v, tmp, g2, c),
                                [p, g, m, v, tmp, g2], grad=1)


def _adam_kernel(p, g, m, v, tmp, g2, c):
    """One Adam(W) update of p (and m, v) in place, elementwise, so it may run on pieces of
    the arrays in parallel threads (NumPy releases the GIL): the result is the same."""
    if c["wd"] != 0:
        if c["decoupled"]:
            p *= 1 - c["lr"] * c["wd"]                        # AdamW: p <- p (1 - lr wd)
        else:
            np.multiply(p, c["wd"], out=g2)
            g2 += g                                           # Adam: g <- g + wd p
            g = g2
    np.subtract(g, m, out=tmp)
    tmp *= 1 - c["beta1"]
    m += tmp                                                  # m <- m + (1 - beta1)(g - m)
    np.multiply(g, g, out=tmp)
    tmp *= 1 - c["beta2"]
    v *= c["beta2"]
    v += tmp                                                  # v <- beta2 v + (1 - beta2) g^2
    np.sqrt(v, out=tmp)
    tmp /= c["bias_correction2_sqrt"]
    tmp += c["eps"]                                           # denom = sqrt(v) / sqrt(1 - beta2^t) + eps
    np.divide(m, tmp, out=tmp)
    tmp *= c["step_size"]
    p -= tmp                                                  # p <- p - lr / (1 - beta1^t) * m / denom


class AdamW(Adam):
    """torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, amsgrad=False, *,
                 maximize=False, correct_bias=True, no_deprecation_warning=False):
        # transformers 4's own AdamW took correct_bias (and no_deprecation_warning, which silenced
        # the FutureWarning npbert does not give): True is torch's bias-corrected update, this one
        if correct_bias is not True:
            raise TypeError(unsupported.message(
                "AdamW()", "correct_bias", "npbert.AdamW is torch.optim.AdamW, always bias-corrected; transformers "
                "4's AdamW(correct_bias=False) is close to npbert.optim.BertAdam (docs/optimizers.md)"))
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize)
