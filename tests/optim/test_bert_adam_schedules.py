"""BertAdam's schedules as pytorch-pretrained-bert 0.6.2 has them: an option of every parameter
group (`param_groups[0]["schedule"]`), the two restart schedules, saved as plain values.

Compared with the package's own optimization.py (tests/ppb_reference.py; skipped without it):
the schedules' multipliers at every step (the same float operations in the same order, so
equal to the last bit), and whole BertAdam runs of a tiny BERT in float64 (REL_TOL of
tests/heads/head_helpers.py, as test_optim_vs_torch.py).
"""
import json
import logging

import numpy as np
import pytest

from npbert import optim
from npbert.optim import bert_adam
from heads.head_helpers import REL_TOL, make_models, rel, t
from optim.test_optim_vs_torch import batches
from ppb_reference import load_ppb_optimization

RESTARTS = ["WarmupCosineWithHardRestartsSchedule", "WarmupCosineWithWarmupRestartsSchedule"]


def params():
    return [("w", np.array([0.1, -0.2, -0.1])), ("b", np.array([0.3]))]


@pytest.mark.parametrize("schedule,cls", [(None, "ConstantLR"), ("none", "ConstantLR"),
                                          ("warmup_linear", "WarmupLinearSchedule"),
                                          ("warmup_cosine", "WarmupCosineSchedule"),
                                          ("warmup_constant", "WarmupConstantSchedule")])
def test_the_schedule_is_in_every_param_group(schedule, cls):
    opt = optim.BertAdam([{"params": params()[:1]}, {"params": params()[1:], "weight_decay": 0.0}],
                         lr=0.001, warmup=0.1, t_total=1000, schedule=schedule)
    assert type(opt.param_groups[0]["schedule"]).__name__ == cls
    assert opt.param_groups[1]["schedule"] is opt.param_groups[0]["schedule"] is opt.schedule
    assert opt.param_groups[0]["schedule"].t_total == 1000.0


def test_a_schedule_object_and_a_group_s_own():
    hard = bert_adam.WarmupCosineWithHardRestartsSchedule(warmup=0.1, t_total=20, cycles=3)
    linear = bert_adam.WarmupLinearSchedule(warmup=0.5, t_total=20)
    opt = optim.BertAdam([{"params": params()[:1]}, {"params": params()[1:], "schedule": linear}], lr=0.1,
                         schedule=hard)
    assert opt.param_groups[0]["schedule"] is hard and opt.param_groups[1]["schedule"] is linear
    opt.step({"w": np.ones(3), "b": np.ones(1)})
    opt.step({"w": np.ones(3), "b": np.ones(1)})
    assert opt.get_lr() == [0.1 * hard.get_lr(2), 0.1 * linear.get_lr(2)]     # (the step count after two steps)
    with pytest.raises(ValueError, match="get_lr"):
        optim.BertAdam([{"params": params(), "schedule": "warmup_linear"}], lr=0.1)


@pytest.mark.parametrize("name", RESTARTS)
@pytest.mark.parametrize("warmup,t_total,cycles", [(0.05, 1000, 5), (0.1, 37, 1.0), (0.02, 250, 3.5), (-1, 100, 2),
                                                   (0.0, 64, 4)])
def test_restart_schedules_equal_pytorch_pretrained_bert(name, warmup, t_total, cycles):
    ppb = load_ppb_optimization()
    ours = getattr(bert_adam, name)(warmup=warmup, t_total=t_total, cycles=cycles)
    theirs = getattr(ppb, name)(warmup=warmup, t_total=t_total, cycles=cycles)
    steps = range(0, int(t_total * 1.3))                       # beyond t_total too
    mine = [ours.get_lr(s, nowarn=True) for s in steps]
    assert mine == [theirs.get_lr(s, nowarn=True) for s in steps]   # the same float ops: equal
    assert min(mine) < 0.01 and max(mine) > 0.99                 # (the values do sweep 0..1)


def test_warmup_restarts_restart_at_each_part():
    """Each of the 5 parts of 1000 steps warms up over 5 % of the whole, 50 steps (ppb's own check)."""
    s = bert_adam.WarmupCosineWithWarmupRestartsSchedule(warmup=0.05, t_total=1000.0, cycles=5)
    y = np.array([s.get_lr(x) for x in range(1000)])
    assert np.allclose(y[[0, 200, 400, 600, 800]], 0) and np.allclose(y[[50, 250, 450, 650, 850]], 1)
    hard = bert_adam.WarmupCosineWithHardRestartsSchedule(warmup=0.1, t_total=1000, cycles=3)
    z = np.array([hard.get_lr(x) for x in range(1000)])
    assert z[100] == 1.0 and z[399] < 0.01 and z[400] == pytest.approx(1.0)        # restarts hard at 1/3
    assert np.allclose(z[:100], np.arange(100) / 100)


def test_restart_schedules_refuse_what_ppb_asserts():
    with pytest.raises(ValueError, match="cycles must be >= 1"):
        bert_adam.WarmupCosineWithHardRestartsSchedule(warmup=0.1, t_total=10, cycles=0.5)
    with pytest.raises(ValueError, match="warmup \\* cycles must be < 1"):
        bert_adam.WarmupCosineWithWarmupRestartsSchedule(warmup=0.3, t_total=10, cycles=4)


def test_training_beyond_t_total_is_logged(caplog):
    s = bert_adam.WarmupLinearSchedule(warmup=0.1, t_total=10)
    with caplog.at_level(logging.WARNING, logger="npbert"):
        s.get_lr(5)
        assert not caplog.records
        assert s.get_lr(12) == 0.0
    assert "Training beyond specified 't_total'" in caplog.records[-1].getMessage()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,cycles", [("WarmupCosineWithHardRestartsSchedule", 2),
                                         ("WarmupCosineWithWarmupRestartsSchedule", 3)])
def test_bert_adam_with_a_restart_schedule_equals_pytorch_pretrained_bert(name, cycles):
    ppb = load_ppb_optimization()
    ours, theirs = make_models("BertForSequenceClassification", num_labels=2)
    kw = dict(lr=1e-3, weight_decay=0.01, max_grad_norm=1.0)
    named = list(ours.named_parameters())
    tnamed = dict(theirs.named_parameters())
    head = [n for n, _ in named if n.startswith("classifier")]
    # the head with its own schedule in its own group, as ppb allows
    opt = optim.BertAdam([{"params": [(n, p) for n, p in named if n not in head]},
                          {"params": [(n, p) for n, p in named if n in head],
                           "schedule": bert_adam.WarmupLinearSchedule(warmup=0.2, t_total=10)}],
                         schedule=getattr(bert_adam, name)(warmup=0.1, t_total=10, cycles=cycles), **kw)
    topt = ppb.BertAdam([{"params": [tnamed[n] for n, _ in named if n not in head]},
                         {"params": [tnamed[n] for n in head],
                          "schedule": ppb.WarmupLinearSchedule(warmup=0.2, t_total=10)}],
                        schedule=getattr(ppb, name)(warmup=0.1, t_total=10, cycles=cycles), **kw)
    for step, batch in enumerate(batches(10, seed=2)):
        ours(**batch)
        opt.step(ours.backward())
        theirs.zero_grad()
        theirs(**{k: t(v) for k, v in batch.items()}).loss.backward()
        topt.step()
        for n, p in named:
            assert rel(p, tnamed[n].detach().numpy()) <= REL_TOL, (step, n)
        assert opt.get_lr() == pytest.approx(topt.get_lr(), rel=1e-15)


@pytest.mark.parametrize("schedule", [None, "warmup_cosine",
                                      bert_adam.WarmupCosineWithWarmupRestartsSchedule(0.1, 12, cycles=3),
                                      bert_adam.WarmupCosineWithHardRestartsSchedule(0.2, 12, cycles=2)])
def test_state_dict_holds_plain_values_and_rebuilds_the_schedule(schedule):
    """Saved halfway, restored into an optimizer built with another schedule, the run continues
    exactly as without the interruption."""
    rng = np.random.default_rng(0)
    grads = [{"w": rng.standard_normal(3), "b": rng.standard_normal(1)} for _ in range(8)]
    whole = optim.BertAdam(params(), lr=0.1, warmup=0.25, t_total=12, schedule=schedule)
    for g in grads:
        whole.step(g)
    resumed = params()
    first = optim.BertAdam(resumed, lr=0.1, warmup=0.25, t_total=12, schedule=schedule)
    for g in grads[:4]:
        first.step(g)
    saved = json.loads(json.dumps({"param_groups": first.state_dict()["param_groups"]}))   # plain JSON
    second = optim.BertAdam(resumed, lr=0.1, schedule="warmup_constant", warmup=0.5, t_total=99)   # same arrays
    second.load_state_dict({"state": first.state_dict()["state"], **saved})
    assert type(second.schedule) is type(first.schedule)
    assert second.schedule.describe() == first.schedule.describe()
    for g in grads[4:]:
        second.step(g)
    for (n, a), (_, b) in zip(whole._params.items(), second._params.items()):
        np.testing.assert_array_equal(a, b)                   # the same steps: bit-equal


def test_an_unknown_saved_schedule_is_refused():
    opt = optim.BertAdam(params(), lr=0.1, warmup=0.1, t_total=10)
    state = opt.state_dict()
    state["param_groups"][0]["schedule"] = {"class": "os.system", "warmup": 0.1}
    with pytest.raises(ValueError, match="npbert rebuilds"):
        opt.load_state_dict(state)
