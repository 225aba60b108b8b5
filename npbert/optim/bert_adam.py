"""BertAdam: pytorch-pretrained-bert 0.6.2's optimizer, the `BERTAdam` of the tutorials.

Its schedules are functions of training progress x = step / t_total (step counted from 0,
before the update), multiplying the learning rate; w = warmup (a fraction of t_total):

    warmup_linear    x / w  while x < w,  then max((x - 1) / (w - 1), 0)
    warmup_cosine    x / w  while x < w,  then 0.5 (1 + cos(2 pi cycles (x - w) / (1 - w)))   cycles = 0.5
    warmup_constant  x / w  while x < w,  then 1
    none / None      1
    WarmupCosineWithHardRestartsSchedule(warmup, t_total, cycles=1)     (objects only, as there)
                     x / w  while x < w,  then 0.5 (1 + cos(pi ((cycles p) mod 1)))    p = (x - w) / (1 - w)
    WarmupCosineWithWarmupRestartsSchedule(warmup, t_total, cycles=1)
                     each of `cycles` parts of training: the above with q = (x cycles) mod 1 and
                     warmup w cycles, decaying once (q / w' while q < w', then
                     0.5 (1 + cos(pi (q - w') / (1 - w'))), w' = w cycles)
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
import logging
import math

import numpy as np

from .adam_weight_decay import uncorrected_adam_update
from .optimizer import Optimizer, all_finite
from .reference import bert_adam_step

logger = logging.getLogger(__name__)


class _LRSchedule:
    """A multiplier of the learning rate as a function of progress = step / t_total.

    warn_t_total: the schedules that decay to 0 at t_total say so (a logged warning, as
    pytorch-pretrained-bert) when a step goes beyond t_total."""
    warn_t_total = False

    def __init__(self, warmup=0.002, t_total=-1, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments {sorted(kwargs)}")
        if t_total < 0 and type(self) is not ConstantLR:
            logger.warning(f"t_total value of {t_total} results in schedule not being applied")
        if not (0.0 <= warmup < 1.0 or warmup == -1):
            raise ValueError(f"Invalid warmup: {warmup} - should be in [0.0, 1.0[ or -1")
        self.warmup, self.t_total = float(max(warmup, 0.0)), float(t_total)
        self.warned_for_t_total_at_progress = -1

    def get_lr(self, step, nowarn=False):
        if self.t_total < 0:
            return 1.0
        progress = float(step) / self.t_total
        lr = self.get_lr_(progress)
        if not nowarn and self.warn_t_total and progress > 1.0 and progress > self.warned_for_t_total_at_progress:
            logger.warning(f"Training beyond specified 't_total'. Learning rate multiplier set to {lr}. "
                           f"Please set 't_total' of {type(self).__name__} correctly.")
            self.warned_for_t_total_at_progress = progress
        return lr

    def _warming(self, progress):
        return progress < self.warmup

    def describe(self):
        """The schedule as plain values (what BertAdam.state_dict() stores in place of the object)."""
        return {"class": type(self).__name__, "warmup": self.warmup, "t_total": self.t_total,
                **({"cycles": self.cycles} if hasattr(self, "cycles") else {})}

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v}" for k, v in self.describe().items()
                                                    if k != "class") + ")"


class ConstantLR(_LRSchedule):
    def get_lr_(self, progress):
        return 1.0


class WarmupLinearSchedule(_LRSchedule):
    warn_t_total = True

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
    warn_t_total = True

    def __init__(self, warmup=0.002, t_total=-1, cycles=0.5, **kwargs):
        super().__init__(warmup, t_total, **kwargs)
        self.cycles = cycles

    def get_lr_(self, progress):
        if self._warming(progress):
            return progress / self.warmup
        progress = (progress - self.warmup) / (1 - self.warmup)      # progress after warmup
        return 0.5 * (1.0 + math.cos(math.pi * self.cycles * 2 * progress))


class WarmupCosineWithHardRestartsSchedule(WarmupCosineSchedule):
    """Warmup once, then `cycles` cosine decays from 1 to 0, each restarting at 1 (hard restarts):

        x / w                                        x < w
        0.5 (1 + cos(pi ((cycles p) mod 1)))         p = (x - w) / (1 - w)
    """
    def __init__(self, warmup=0.002, t_total=-1, cycles=1.0, **kwargs):
        super().__init__(warmup, t_total, cycles, **kwargs)
        if not cycles >= 1.0:
            raise ValueError(f"{type(self).__name__}: cycles must be >= 1, got {cycles}")

    def get_lr_(self, progress):
        if self._warming(progress):
            return progress / self.warmup
        progress = (progress - self.warmup) / (1 - self.warmup)      # progress after warmup
        return 0.5 * (1.0 + math.cos(math.pi * ((self.cycles * progress) % 1)))


class WarmupCosineWithWarmupRestartsSchedule(WarmupCosineWithHardRestartsSchedule):
    """Training cut into `cycles` equal parts, each a warmup over the fraction `warmup` of the
    part, then a cosine decay from 1 to 0 (warmup restarts).  With q = (x cycles) mod 1 and
    w' = warmup cycles (the warmup as a fraction of one part; `self.warmup` holds w'):

        q / w'                                       q < w'
        0.5 (1 + cos(pi (q - w') / (1 - w')))
    """
    def __init__(self, warmup=0.002, t_total=-1, cycles=1.0, **kwargs):
        if not warmup * cycles < 1.0:
            raise ValueError(f"{type(self).__name__}: warmup * cycles must be < 1, got {warmup} * {cycles}")
        super().__init__(warmup * cycles if warmup >= 0 else warmup, t_total, cycles, **kwargs)
        self.warmup_per_cycle = warmup               # the argument (self.warmup is a fraction of one part)

    def get_lr_(self, progress):
        progress = progress * self.cycles % 1.0                      # q: progress within the part
        if self._warming(progress):
            return progress / self.warmup
        progress = (progress - self.warmup) / (1 - self.warmup)      # progress after the part's warmup
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    def describe(self):
        return {**super().describe(), "warmup": self.warmup_per_cycle}       # the constructor's argument


SCHEDULES = {None: ConstantLR, "none": ConstantLR, "warmup_linear": WarmupLinearSchedule,
             "warmup_cosine": WarmupCosineSchedule, "warmup_constant": WarmupConstantSchedule}

# Every schedule class by name: what load_state_dict rebuilds a saved schedule from (no code runs).
SCHEDULE_CLASSES = {c.__name__: c for c in (ConstantLR, WarmupLinearSchedule, WarmupConstantSchedule,
                                            WarmupCosineSchedule, WarmupCosineWithHardRestartsSchedule,
                                            WarmupCosineWithWarmupRestartsSchedule)}


class BertAdam(Optimizer):
    """BertAdam(params, lr, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
    e=1e-6, weight_decay=0.01, max_grad_norm=1.0).  `schedule` is a name or a schedule object
    with `get_lr(step)` (e.g. WarmupCosineWithHardRestartsSchedule(warmup, t_total, cycles));
    as in pytorch-pretrained-bert it is an option of every parameter group,
    `param_groups[i]["schedule"]`, so a group may have its own.  The group's "lr" is the base
    rate; the schedule is applied inside the step, so do not add a get_scheduler schedule on top.
    state_dict() stores each schedule as plain values (describe()), load_state_dict() rebuilds it."""

    def __init__(self, params, lr, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
                 e=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        if not hasattr(schedule, "get_lr"):
            if schedule not in SCHEDULES:
                raise ValueError(f"Invalid schedule parameter: {schedule!r}; one of "
                                 f"{[k for k in SCHEDULES if k is not None]}, None, or an object with get_lr(step)")
            self.schedule_name = schedule
            schedule = SCHEDULES[schedule](warmup=warmup, t_total=t_total)
        elif warmup != -1 or t_total != -1:
            logger.warning("warmup and t_total on the optimizer are ineffective when _LRSchedule object is provided "
                           "as schedule. Please specify custom warmup and t_total in _LRSchedule object.")
        super().__init__(params, dict(lr=lr, schedule=schedule, b1=b1, b2=b2, e=e, weight_decay=weight_decay,
                                      max_grad_norm=max_grad_norm))

    schedules_itself = True          # p <- p - lr * schedule(step / t_total) * update, in step()
    clips_itself = True              # g <- g * min(1, max_grad_norm / (||g|| + 1e-6)) per parameter, in step()

    # transformers' lr_scheduler_type -> the BertAdam schedule of the same shape
    TRANSFORMERS_SCHEDULES = {"linear": "warmup_linear", "cosine": "warmup_cosine",
                              "constant_with_warmup": "warmup_constant", "constant": "none"}

    @classmethod
    def for_training(cls, params, lr, betas, eps, max_grad_norm, num_warmup_steps, num_training_steps,
                     lr_scheduler_type):
        """BertAdam as the tutorials use it: its own schedule over the run (the one of the shape of
        `lr_scheduler_type`, warmup = num_warmup_steps / num_training_steps) and its per-parameter
        clipping to max_grad_norm."""
        schedule = cls.TRANSFORMERS_SCHEDULES.get(lr_scheduler_type)
        if num_training_steps is None:
            raise ValueError("optim='bert_adam' schedules itself over the run: call "
                             "create_optimizer_and_scheduler(num_training_steps)")
        if schedule is None:
            raise ValueError(f"optim='bert_adam' has the schedules {', '.join(cls.TRANSFORMERS_SCHEDULES)}, "
                             f"not {lr_scheduler_type!r}")
        warmup = num_warmup_steps / num_training_steps
        return cls(params, lr=lr, warmup=min(warmup, 0.999), t_total=num_training_steps, schedule=schedule,
                   b1=betas[0], b2=betas[1], e=eps, max_grad_norm=max_grad_norm)

    @property
    def schedule(self):
        """The first group's schedule (every group's, unless a group was given its own)."""
        return self.param_groups[0]["schedule"]

    def state_dict(self):
        """As Optimizer.state_dict(), each group's schedule object replaced by its plain values."""
        out = super().state_dict()
        for group in out["param_groups"]:
            schedule = group["schedule"]
            if not hasattr(schedule, "describe"):
                raise TypeError(f"BertAdam.state_dict(): the schedule {type(schedule).__name__} cannot be saved as "
                                f"plain values (no describe()); use one of {sorted(SCHEDULE_CLASSES)}")
            group["schedule"] = schedule.describe()
        return out

    def load_state_dict(self, state_dict):
        """Restore what state_dict() returned, each schedule rebuilt from its class name and values."""
        groups = []
        for i, group in enumerate(state_dict.get("param_groups", []) if isinstance(state_dict, dict) else []):
            saved = group.get("schedule")
            if isinstance(saved, dict):
                values = dict(saved)
                name = values.pop("class", None)
                if name not in SCHEDULE_CLASSES:
                    raise ValueError(f"BertAdam.load_state_dict: group {i} has the schedule {name!r}; "
                                     f"npbert rebuilds {sorted(SCHEDULE_CLASSES)}")
                group = {**group, "schedule": SCHEDULE_CLASSES[name](**values)}
            groups.append(group)
        if isinstance(state_dict, dict) and "param_groups" in state_dict:
            state_dict = {**state_dict, "param_groups": groups}
        super().load_state_dict(state_dict)

    def _check_group(self, group, where):
        super()._check_group(group, where)
        if not 0.0 <= group["b1"] < 1.0:
            raise ValueError(f"{where}: Invalid b1 parameter: {group['b1']} - should be in [0.0, 1.0[")
        if not 0.0 <= group["b2"] < 1.0:
            raise ValueError(f"{where}: Invalid b2 parameter: {group['b2']} - should be in [0.0, 1.0[")
        if not group["e"] >= 0.0:
            raise ValueError(f"{where}: Invalid epsilon value: {group['e']} - should be >= 0.0")
        if not hasattr(group["schedule"], "get_lr"):
            raise ValueError(f"{where}: schedule must be an object with get_lr(step) (e.g. "
                             f"WarmupLinearSchedule(warmup, t_total)), got {group['schedule']!r}")

    def get_lr(self):
        """The scheduled learning rate of each parameter, as BertAdam.get_lr ([0] before any step)."""
        lrs = []
        for group in self.param_groups:
            for name in group["params"]:
                if not self.state.get(name):
                    return [0]
                lrs.append(group["lr"] * group["schedule"].get_lr(self.state[name]["step"]))
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
        tmp *= group["lr"] * group["schedule"].get_lr(state["step"])
        p -= tmp
        state["step"] += 1
        return all_finite(g) if finite is None else finite
