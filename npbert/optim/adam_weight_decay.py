"""AdamWeightDecay: google-research/bert's AdamWeightDecayOptimizer (optimization.py).

For a parameter p with gradient g (no step count, no bias correction):

    m <- beta1 * m + (1 - beta1) * g
    v <- beta2 * v + (1 - beta2) * g * g
    update <- m / (sqrt(v) + eps)
    update <- update + wd * p            unless the name matches an exclude pattern (re.search)
    p <- p - lr * update

Google's run_pretraining / run_classifier use it with weight_decay=0.01, eps=1e-6,
exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"], a linear warmup then a
polynomial (power 1) decay to 0, and the gradients clipped to global norm 1.0 first.

`_update` below is the fast path's step (in place, in scratch buffers, a large parameter in
cache-sized pieces on npbert's threads);
`reference.adam_weight_decay_step` the reference path's, the rule above line by line.
"""
import re

import numpy as np

from .optimizer import Optimizer
from .pieces import update_in_pieces
from .reference import adam_weight_decay_step


def uncorrected_adam_update(g, m, v, beta1, beta2, eps, out):
    """The moments of Google's optimizer and BertAdam, updated in place (no bias correction),
    and the update they give, written to `out`:

        m <- beta1 m + (1 - beta1) g;  v <- beta2 v + (1 - beta2) g^2;  out = m / (sqrt(v) + eps)
    """
    m *= beta1
    np.multiply(g, 1 - beta1, out=out)
    m += out
    v *= beta2
    np.multiply(g, g, out=out)
    out *= 1 - beta2
    v += out
    np.sqrt(v, out=out)
    out += eps
    np.divide(m, out, out=out)
    return out


class AdamWeightDecay(Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-6,
                 exclude_from_weight_decay=("LayerNorm", "layer_norm", "bias")):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, betas=tuple(betas), eps=eps,
                                      exclude_from_weight_decay=list(exclude_from_weight_decay or [])))

    def _check_group(self, group, where):
        super()._check_group(group, where)
        beta1, beta2 = group["betas"]
        if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
            raise ValueError(f"{where}: Invalid betas: {group['betas']}")
        if not 0.0 <= group["eps"]:
            raise ValueError(f"{where}: Invalid epsilon value: {group['eps']}")

    @staticmethod
    def _do_use_weight_decay(name, group):
        """Google's rule: decay unless the rate is 0 or a pattern is found in the name."""
        if not group["weight_decay"]:
            return False
        return not any(re.search(pattern, name) for pattern in group["exclude_from_weight_decay"])

    @staticmethod
    def _init_state(p, state):
        """The state both paths keep (so a checkpoint of one resumes on the other)."""
        if not state:
            state["m"] = np.zeros_like(p)
            state["v"] = np.zeros_like(p)

    def _update_reference(self, name, p, g, group, state):
        self._init_state(p, state)
        beta1, beta2 = group["betas"]
        wd = group["weight_decay"] if self._do_use_weight_decay(name, group) else 0.0
        adam_weight_decay_step(p, g, state["m"], state["v"], group["lr"], beta1, beta2, group["eps"], wd)

    def _update(self, name, p, g, group, state):
        beta1, beta2 = group["betas"]
        self._init_state(p, state)
        wd = group["weight_decay"] if self._do_use_weight_decay(name, group) else 0.0
        lr, eps = group["lr"], group["eps"]

        def kernel(p, g, m, v, tmp, decay):
            uncorrected_adam_update(g, m, v, beta1, beta2, eps, tmp)   # tmp = m / (sqrt(v) + eps)
            if decay is not None:
                np.multiply(p, wd, out=decay)
                tmp += decay                                   # update += wd * p
            tmp *= lr
            p -= tmp                                           # p <- p - lr * update
        decay = self._scratch_like(p, 1) if wd else None
        return update_in_pieces(kernel, [p, g, state["m"], state["v"], self._scratch_like(p), decay], grad=1)
