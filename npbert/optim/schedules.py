"""Learning-rate schedules with transformers' names and formulas, run as torch's LambdaLR.

A schedule is a multiplier f(step) of each group's initial learning rate:
`lr = initial_lr * f(step)`.  It is applied once when the scheduler is built (step 0)
and again by every `scheduler.step()` (after `optimizer.step()`), as torch's LambdaLR.
With w = num_warmup_steps, T = num_training_steps, s = step:

    warmup (all but constant)  f = s / max(1, w)                              while s < w
    constant                   f = 1
    constant_with_warmup       f = 1
    linear                     f = max(0, (T - s) / max(1, T - w))
    cosine                     f = max(0, 0.5 (1 + cos(pi * 2 cycles * p)))      p = (s - w) / max(1, T - w), cycles = 0.5
    cosine_with_restarts       f = 0 if p >= 1 else max(0, 0.5 (1 + cos(pi * ((cycles * p) mod 1))))   cycles = 1
    polynomial                 f = ((lr0 - lr_end) (1 - (s - w) / (T - w))^power + lr_end) / lr0, lr_end / lr0 after T
    inverse_sqrt               f = 1 / sqrt((s + timescale - w) / timescale)     timescale = w or 10000
    cosine_with_min_lr         f = max(0, c (1 - r) + r), c the cosine factor, r = min_lr / lr0 or min_lr_rate
    cosine_warmup_with_min_lr  as cosine_with_min_lr with the step counted from 1 (transformers' variant)
    warmup_stable_decay        warmup (linear | cosine | 1-sqrt), then 1 for num_stable_steps, then a
                               decay (linear | cosine | 1-sqrt) over num_decay_steps, floored at min_lr_ratio
"""
import enum
import math
from functools import partial

SCHEDULER_NAMES = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                   "inverse_sqrt", "cosine_with_min_lr", "cosine_warmup_with_min_lr", "warmup_stable_decay")


def _warmup(step, num_warmup_steps):
    return float(step) / float(max(1, num_warmup_steps))


def _constant_lambda(step):
    return 1.0


def _constant_with_warmup_lambda(step, *, num_warmup_steps):
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return 1.0


def _linear_lambda(step, *, num_warmup_steps, num_training_steps):
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))


def _cosine_lambda(step, *, num_warmup_steps, num_training_steps, num_cycles, min_lr_rate=0.0):
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
    factor = 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress))
    factor = factor * (1 - min_lr_rate) + min_lr_rate
    return max(0, factor)


def _cosine_with_hard_restarts_lambda(step, *, num_warmup_steps, num_training_steps, num_cycles):
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((float(num_cycles) * progress) % 1.0))))


def _polynomial_lambda(step, *, num_warmup_steps, num_training_steps, lr_end, power, lr_init):
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    if step > num_training_steps or num_training_steps == num_warmup_steps:
        # (transformers divides by zero at step T when warmup == T; the decay has ended: lr_end)
        return lr_end / lr_init
    lr_range = lr_init - lr_end
    decay_steps = num_training_steps - num_warmup_steps
    pct_remaining = 1 - (step - num_warmup_steps) / decay_steps
    return (lr_range * pct_remaining ** power + lr_end) / lr_init


def _inverse_sqrt_lambda(step, *, num_warmup_steps, timescale):
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    shift = timescale - num_warmup_steps
    return 1.0 / math.sqrt((step + shift) / timescale)


def _cosine_warmup_with_min_lr_lambda(step, *, num_warmup_steps, num_training_steps, num_cycles, min_lr_rate,
                                      warmup_lr_rate=None):
    step, w, total = float(step), float(num_warmup_steps), float(num_training_steps)
    if step < w:
        if warmup_lr_rate is None:
            return (step + 1.0) / max(1.0, w)
        return warmup_lr_rate + (1.0 - warmup_lr_rate) * step / max(1, w - 1)
    progress = (step - w + 1.0) / max(1.0, total - w)
    factor = 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress))
    return max(0, factor * (1 - min_lr_rate) + min_lr_rate)


def _wsd_lambda(step, *, num_warmup_steps, num_stable_steps, num_decay_steps, warmup_type, decay_type,
                min_lr_ratio, num_cycles):
    if step < num_warmup_steps:
        progress = _warmup(step, num_warmup_steps)
        factor = {"linear": lambda x: x, "cosine": lambda x: 0.5 * (1.0 - math.cos(math.pi * x)),
                  "1-sqrt": lambda x: 1.0 - math.sqrt(1.0 - x)}[warmup_type](progress)
        return max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio)
    if step < num_warmup_steps + num_stable_steps:
        return 1.0
    if step < num_warmup_steps + num_stable_steps + num_decay_steps:
        progress = float(step - num_warmup_steps - num_stable_steps) / float(max(1, num_decay_steps))
        factor = {"linear": lambda x: 1.0 - x,
                  "cosine": lambda x: 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * x)),
                  "1-sqrt": lambda x: 1.0 - math.sqrt(x)}[decay_type](progress)
        return max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio)
    return min_lr_ratio


class LambdaLR:
    """torch.optim.lr_scheduler.LambdaLR: group i's lr = initial_lr_i * lr_lambda(last_epoch).

    state_dict() holds the step count and the rates (plain numbers); the lambdas are rebuilt
    by constructing the same schedule, as with torch."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group in groups:
                group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in groups]
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * len(groups)
        if len(self.lr_lambdas) != len(groups):
            raise ValueError(f"Expected {len(groups)} lr_lambdas, but got {len(self.lr_lambdas)}")
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]

    def step(self):
        self.last_epoch += 1
        self._last_lr = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def get_last_lr(self):
        return list(self._last_lr)

    def state_dict(self):
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs), "_last_lr": list(self._last_lr)}

    def load_state_dict(self, state_dict):
        missing = {"last_epoch", "base_lrs", "_last_lr"} - set(state_dict)
        if missing:
            raise KeyError(f"LambdaLR.load_state_dict: missing {sorted(missing)}")
        if len(state_dict["base_lrs"]) != len(self.base_lrs):
            raise ValueError(f"LambdaLR.load_state_dict: {len(state_dict['base_lrs'])} groups saved, "
                             f"the optimizer has {len(self.base_lrs)}")
        self.last_epoch = int(state_dict["last_epoch"])
        self.base_lrs = [float(x) for x in state_dict["base_lrs"]]
        self._last_lr = [float(x) for x in state_dict["_last_lr"]]
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr


def get_constant_schedule(optimizer, last_epoch=-1):
    return LambdaLR(optimizer, _constant_lambda, last_epoch)


def get_constant_schedule_with_warmup(optimizer, num_warmup_steps, last_epoch=-1):
    return LambdaLR(optimizer, partial(_constant_with_warmup_lambda, num_warmup_steps=num_warmup_steps), last_epoch)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    return LambdaLR(optimizer, partial(_linear_lambda, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps), last_epoch)


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5, last_epoch=-1):
    return LambdaLR(optimizer, partial(_cosine_lambda, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps, num_cycles=num_cycles), last_epoch)


def get_cosine_with_hard_restarts_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps,
                                                       num_cycles=1, last_epoch=-1):
    return LambdaLR(optimizer, partial(_cosine_with_hard_restarts_lambda, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps, num_cycles=num_cycles), last_epoch)


def get_polynomial_decay_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, lr_end=1e-7,
                                              power=1.0, last_epoch=-1):
    lr_init = optimizer.defaults["lr"]
    if not lr_init > lr_end:
        raise ValueError(f"lr_end ({lr_end}) must be smaller than initial lr ({lr_init})")
    return LambdaLR(optimizer, partial(_polynomial_lambda, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps, lr_end=lr_end, power=power,
                                       lr_init=lr_init), last_epoch)


def get_inverse_sqrt_schedule(optimizer, num_warmup_steps, timescale=None, last_epoch=-1):
    if timescale is None:
        timescale = num_warmup_steps or 10_000
    return LambdaLR(optimizer, partial(_inverse_sqrt_lambda, num_warmup_steps=num_warmup_steps,
                                       timescale=timescale), last_epoch)


def _min_lr_rate(optimizer, min_lr, min_lr_rate):
    if min_lr is not None and min_lr_rate is not None:
        raise ValueError("Only one of min_lr or min_lr_rate should be set")
    if min_lr is not None:
        return min_lr / optimizer.defaults["lr"]
    if min_lr_rate is None:
        raise ValueError("One of min_lr or min_lr_rate should be set through scheduler_specific_kwargs")
    return min_lr_rate


def get_cosine_with_min_lr_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5,
                                                last_epoch=-1, min_lr=None, min_lr_rate=None):
    rate = _min_lr_rate(optimizer, min_lr, min_lr_rate)
    return LambdaLR(optimizer, partial(_cosine_lambda, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps, num_cycles=num_cycles,
                                       min_lr_rate=rate), last_epoch)


def get_cosine_with_min_lr_schedule_with_warmup_lr_rate(optimizer, num_warmup_steps, num_training_steps,
                                                        num_cycles=0.5, last_epoch=-1, min_lr=None,
                                                        min_lr_rate=None, warmup_lr_rate=None):
    rate = _min_lr_rate(optimizer, min_lr, min_lr_rate)
    return LambdaLR(optimizer, partial(_cosine_warmup_with_min_lr_lambda, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps, num_cycles=num_cycles,
                                       min_lr_rate=rate, warmup_lr_rate=warmup_lr_rate), last_epoch)


def get_wsd_schedule(optimizer, num_warmup_steps, num_decay_steps, num_training_steps=None, num_stable_steps=None,
                     warmup_type="linear", decay_type="cosine", min_lr_ratio=0, num_cycles=0.5, last_epoch=-1):
    if num_training_steps is None and num_stable_steps is None:
        raise ValueError("Either num_training_steps or num_stable_steps must be specified.")
    for kind, value in (("warmup", warmup_type), ("decay", decay_type)):
        if value not in ("linear", "cosine", "1-sqrt"):
            raise ValueError(f"Unknown {kind} type: {value}, expected 'linear', 'cosine' or '1-sqrt'")
    if num_stable_steps is None:
        num_stable_steps = num_training_steps - num_warmup_steps - num_decay_steps
    return LambdaLR(optimizer, partial(_wsd_lambda, num_warmup_steps=num_warmup_steps,
                                       num_stable_steps=num_stable_steps, num_decay_steps=num_decay_steps,
                                       warmup_type=warmup_type, decay_type=decay_type, min_lr_ratio=min_lr_ratio,
                                       num_cycles=num_cycles), last_epoch)


_FUNCTIONS = {
    "linear": get_linear_schedule_with_warmup, "cosine": get_cosine_schedule_with_warmup,
    "cosine_with_restarts": get_cosine_with_hard_restarts_schedule_with_warmup,
    "polynomial": get_polynomial_decay_schedule_with_warmup, "constant": get_constant_schedule,
    "constant_with_warmup": get_constant_schedule_with_warmup, "inverse_sqrt": get_inverse_sqrt_schedule,
    "cosine_with_min_lr": get_cosine_with_min_lr_schedule_with_warmup,
    "cosine_warmup_with_min_lr": get_cosine_with_min_lr_schedule_with_warmup_lr_rate,
    "warmup_stable_decay": get_wsd_schedule,
}


class SchedulerType(str, enum.Enum):
    """transformers' SchedulerType (transformers.trainer_utils / transformers.optimization): the
    names get_scheduler and TrainingArguments(lr_scheduler_type=...) take.  REDUCE_ON_PLATEAU and
    GREEDY follow the loss, not the step; npbert's get_scheduler names them as not provided."""

    LINEAR = "linear"
    COSINE = "cosine"
    COSINE_WITH_RESTARTS = "cosine_with_restarts"
    POLYNOMIAL = "polynomial"
    CONSTANT = "constant"
    CONSTANT_WITH_WARMUP = "constant_with_warmup"
    INVERSE_SQRT = "inverse_sqrt"
    REDUCE_ON_PLATEAU = "reduce_lr_on_plateau"
    COSINE_WITH_MIN_LR = "cosine_with_min_lr"
    COSINE_WARMUP_WITH_MIN_LR = "cosine_warmup_with_min_lr"
    WARMUP_STABLE_DECAY = "warmup_stable_decay"
    GREEDY = "greedy"

    @classmethod
    def _missing_(cls, value):
        raise ValueError(f"{value!r} is not a valid {cls.__name__}, please select one of {[m.value for m in cls]}")


# transformers.optimization.TYPE_TO_SCHEDULER_FUNCTION (the table seed 001 quotes)
TYPE_TO_SCHEDULER_FUNCTION = {SchedulerType(name): func for name, func in _FUNCTIONS.items()}


def get_scheduler(name, optimizer, num_warmup_steps=None, num_training_steps=None, scheduler_specific_kwargs=None):
    """transformers.get_scheduler for every schedule that depends on the step alone."""
    name = getattr(name, "value", name)
    if name not in _FUNCTIONS:
        raise ValueError(f"unknown scheduler {name!r}; npbert has {list(SCHEDULER_NAMES)} "
                         "(reduce_lr_on_plateau and greedy depend on the loss, not the step, and are not provided)")
    func = _FUNCTIONS[name]
    if name == "constant":
        return func(optimizer)
    kwargs = dict(scheduler_specific_kwargs or {})
    if num_warmup_steps is None:
        raise ValueError(f"{name} requires `num_warmup_steps`, please provide that argument.")
    if name == "constant_with_warmup":
        return func(optimizer, num_warmup_steps=num_warmup_steps)
    if name == "inverse_sqrt":
        return func(optimizer, num_warmup_steps=num_warmup_steps, **kwargs)
    if name == "warmup_stable_decay":
        return func(optimizer, num_warmup_steps=num_warmup_steps, num_training_steps=num_training_steps, **kwargs)
    if num_training_steps is None:
        raise ValueError(f"{name} requires `num_training_steps`, please provide that argument.")
    return func(optimizer, num_warmup_steps=num_warmup_steps, num_training_steps=num_training_steps, **kwargs)
