"""BertAdam: pytorch-pretrained-bert 0.6.2's optimizer, the `BERTAdam` of the tutorials.

Its schedules are functions of training progress x = step / t_total (step counted from 0,
before the update), multiplying the learning rate; w = warmup (a fraction of t_total):

    warmup_linear    x / w  while x < w,  then max((x - 1) / (w - 1), 0)
    warmup_cosine    x / w  while x < w,  then 0.5 (1 + cos(2 pi cycles (x - w) / (1 - w)))   cycles = 0.5
    warmup_constant  x / w  while x < w,  then 1
    none / None      1
    t_total = -1     1 whatever the schedule

Each step, for every parameter with a gradient g (no bias correction):

    g <- g * min(1, max_grad_norm / (||g|| + 1e-6))   clipped per parameter, not globally
    m <- beta1 m + (1 - beta1) g
    v <- beta2 v + (1 - beta2) g^2
    update <- m / (sqrt(v) + e) + weight_decay * p     (decoupled, as AdamW)
    p <- p - lr * schedule(step / t_total) * update

`BertAdam._update` is the fast path's step (in place, in scratch buffers); `reference.bert_adam_step`
the reference path's, the rule above line by line.
"""
import math

import numpy as np

from .adam_weight_decay import uncorrected_adam_update
from .optimizer import Optimizer, all_finite
from .reference import bert_adam_step


class _LRSchedule:
    """A multiplier of the learning rate as a function of progress = step / t_total."""
    def __init__(self, warmup=0.002, t_total=-1):
        if not (0.0 <= warmup < 1.0 or warmup == -1):
            raise ValueError(f"Invalid warmup: {warmup} - should be in [0.0, 1.0[ or -1")
        self.warmup, self.t_total = float(max(warmup, 0.0)), float(t_total)

    def get_lr(self, step):
        if self.t_total < 0:
            return 1.0
        return self.get_lr_(float(step) / self.t_total)

    def _warming(self, progress):
        return progress < self.warmup


class ConstantLR(_LRSchedule):
    def get_lr_(self, progress):
        return 1.0


class WarmupLinearSchedule(_LRSchedule):
    def get_lr_(self, progress):
        if self._warming(progress):
            return progress / self.warmup
        return max((progress - 1.0) / (self.warmup - 1.0), 0.0)


class WarmupConstantSchedule(_LRSchedule):
    def get_lr_(self, progress):
        if self._warming(progress):
            return progress / self.warmup
        return 1.0


class WarmupCosineSchedule(_LRSchedule):
    def __init__(self, warmup=0.002, t_total=-1, cycles=0.5):
        super().__init__(warmup, t_total)
        self.cycles = cycles

    def get_lr_(self, progress):
        if self._warming(progress):
            return progress / self.warmup
        progress = (progress - self.warmup) / (1 - self.warmup)      # progress after warmup
        return 0.5 * (1.0 + math.cos(math.pi * self.cycles * 2 * progress))


SCHEDULES = {None: ConstantLR, "none": ConstantLR, "warmup_linear": WarmupLinearSchedule,
             "warmup_cosine": WarmupCosineSchedule, "warmup_constant": WarmupConstantSchedule}


class BertAdam(Optimizer):
    """BertAdam(params, lr, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
    e=1e-6, weight_decay=0.01, max_grad_norm=1.0).  `schedule` is a name or a schedule object
    with `get_lr(step)`.  The group's "lr" is the base rate; the schedule is applied inside the
    step, so do not add a get_scheduler schedule on top."""

    def __init__(self, params, lr, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
                 e=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        if not hasattr(schedule, "get_lr"):
            if schedule not in SCHEDULES:
                raise ValueError(f"Invalid schedule parameter: {schedule!r}; one of "
                                 f"{[k for k in SCHEDULES if k is not None]}, None, or an object with get_lr(step)")
            self.schedule_name = schedule
            schedule = SCHEDULES[schedule](warmup=warmup, t_total=t_total)
        self.schedule = schedule
        super().__init__(params, dict(lr=lr, b1=b1, b2=b2, e=e, weight_decay=weight_decay,
                                      max_grad_norm=max_grad_norm))

    def _check_group(self, group, where):
        super()._check_group(group, where)
        if not 0.0 <= group["b1"] < 1.0:
            raise ValueError(f"{where}: Invalid b1 parameter: {group['b1']} - should be in [0.0, 1.0[")
        if not 0.0 <= group["b2"] < 1.0:
            raise ValueError(f"{where}: Invalid b2 parameter: {group['b2']} - should be in [0.0, 1.0[")
        if not group["e"] >= 0.0:
            raise ValueError(f"{where}: Invalid epsilon value: {group['e']} - should be >= 0.0")

    def get_lr(self):
        """The scheduled learning rate of each parameter, as BertAdam.get_lr ([0] before any step)."""
        lrs = []
        for group in self.param_groups:
            for name in group["params"]:
                if not self.state.get(name):
                    return [0]
                lrs.append(group["lr"] * self.schedule.get_lr(self.state[name]["step"]))
        return lrs

    @staticmethod
    def _init_state(p, state):
        """The state both paths keep (so a checkpoint of one resumes on the other)."""
        if not state:
            state["step"] = 0
            state["next_m"] = np.zeros_like(p)
            state["next_v"] = np.zeros_like(p)

    def _update_reference(self, name, p, g, group, state):
        self._init_state(p, state)
        lr = group["lr"] * self.schedule.get_lr(state["step"])          # the scheduled rate
        bert_adam_step(p, g, state["next_m"], state["next_v"], lr, group["b1"], group["b2"], group["e"],
                       group["weight_decay"], group["max_grad_norm"])
        state["step"] += 1

    def _update(self, name, p, g, group, state):
        self._init_state(p, state)
        finite = None
        if group["max_grad_norm"] > 0:                       # per-parameter clipping, into a copy
            norm = float(np.sqrt(np.vdot(g, g)))
            finite = math.isfinite(norm) or all_finite(g)
            coef = min(group["max_grad_norm"] / (norm + 1e-6), 1.0)
            g = np.multiply(g, coef, out=self._scratch_like(p, 1))
        # m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;  update = m / (sqrt(v) + e)
        tmp = uncorrected_adam_update(g, state["next_m"], state["next_v"], group["b1"], group["b2"], group["e"],
                                      self._scratch_like(p))
        if group["weight_decay"] > 0.0:
            tmp += group["weight_decay"] * p
        tmp *= group["lr"] * self.schedule.get_lr(state["step"])
        p -= tmp
        state["step"] += 1
        return all_finite(g) if finite is None else finite
