"""Optimizers, learning-rate schedules and gradient clipping, with torch's and transformers' names.

    opt = AdamW(model.parameters(), lr=2e-5)                   # or the tutorials' no_decay groups
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=100, num_training_steps=1000)
    outputs.loss.backward(); clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step(); opt.zero_grad()

or, the dict form (what the Trainer runs):

    grads = model.backward(); clip_grad_norm_(grads, 1.0); opt.step(grads); sched.step()

See docs/optimizers.md for every update rule and schedule as a formula.
"""
from .adam import Adam, AdamW
from .adam_weight_decay import AdamWeightDecay
from .bert_adam import BertAdam
from .clip import clip_grad_norm_
from .groups import optimizer_grouped_parameters
from .optimizer import Optimizer
from .schedules import (SCHEDULER_NAMES, TYPE_TO_SCHEDULER_FUNCTION, LambdaLR, SchedulerType, get_constant_schedule, get_constant_schedule_with_warmup,
                        get_cosine_schedule_with_warmup, get_cosine_with_hard_restarts_schedule_with_warmup,
                        get_cosine_with_min_lr_schedule_with_warmup,
                        get_cosine_with_min_lr_schedule_with_warmup_lr_rate, get_inverse_sqrt_schedule,
                        get_linear_schedule_with_warmup, get_polynomial_decay_schedule_with_warmup, get_scheduler,
                        get_wsd_schedule)

__all__ = ["Optimizer", "Adam", "AdamW", "AdamWeightDecay", "BertAdam", "clip_grad_norm_",
           "optimizer_grouped_parameters", "LambdaLR", "SCHEDULER_NAMES", "SchedulerType",
           "TYPE_TO_SCHEDULER_FUNCTION", "get_scheduler", "get_constant_schedule",
           "get_constant_schedule_with_warmup", "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
           "get_cosine_with_hard_restarts_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
           "get_inverse_sqrt_schedule", "get_cosine_with_min_lr_schedule_with_warmup",
           "get_cosine_with_min_lr_schedule_with_warmup_lr_rate", "get_wsd_schedule"]
