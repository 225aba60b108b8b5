"""npbert.optim against torch.optim, transformers' schedules and pytorch-pretrained-bert's BertAdam.

Every comparison runs a tiny BertForSequenceClassification in float64 (dropout 0) on both sides
with the same weights and batches, and compares every parameter after every step; the optimizer
steps on the fast path and, in the cases marked `reference`, on the reference path
(npbert/optim/reference.py).

Tolerance: REL_TOL (1e-9, normwise relative, from tests/heads/head_helpers.py).  The gradients
already differ by float64 round-off (~1e-13, summation order); Adam's m / sqrt(v) keeps relative
errors of that size, and 30 steps add up to at most ~1e-11.  A wrong formula (a missing bias
correction, decay in the wrong place, the schedule off by one step) moves parameters by ~lr =
1e-3 relative or more.
"""

import numpy as np
import pytest

import npbert
from npbert import optim
from heads.head_helpers import REL_TOL, make_models, rel, t, torch_grads
from ppb_reference import load_ppb_optimization

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NO_DECAY = ["bias", "LayerNorm.bias", "LayerNorm.weight"]     # the tutorials' list (001, 004)


def batches(n, seed=0, B=4, T=7, vocab=29):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        ids = rng.integers(1, vocab, size=(B, T))
        mask = np.ones((B, T), dtype=np.int64)
        mask[0, 5:] = 0
        yield dict(input_ids=ids, attention_mask=mask, labels=rng.integers(0, 2, size=B))


def torch_groups(theirs, base_lr, head_lr, wd):
    """The groups the tutorials build by hand (seed 004: the head at its own rate)."""
    groups = []
    for is_head in (False, True):
        for decay in (True, False):
            params = [p for n, p in theirs.named_parameters()
                      if n.startswith("bert.") != is_head and (not any(nd in n for nd in NO_DECAY)) == decay]
            if params:
                groups.append({"params": params, "weight_decay": wd if decay else 0.0,
                               "lr": head_lr if is_head else base_lr})
    return groups


def run_both(opt_name, schedule="linear", steps=30, warmup=5, clip=1.0, sched_kwargs=None, path="fast"):
    ours, theirs = make_models("BertForSequenceClassification", num_labels=2)
    base_lr, head_lr, wd = 1e-3, 2e-3, 0.01
    groups = optim.optimizer_grouped_parameters(ours, weight_decay=wd, no_decay=NO_DECAY, lr=base_lr, head_lr=head_lr)
    opt = getattr(optim, opt_name)(groups, lr=base_lr)
    sched = optim.get_scheduler(schedule, opt, num_warmup_steps=warmup, num_training_steps=steps,
                                scheduler_specific_kwargs=sched_kwargs)
    topt = getattr(torch.optim, opt_name)(torch_groups(theirs, base_lr, head_lr, wd), lr=base_lr)
    tsched = transformers.get_scheduler(schedule, topt, num_warmup_steps=warmup, num_training_steps=steps,
                                        scheduler_specific_kwargs=sched_kwargs)
    for step, batch in enumerate(batches(steps)):
        ours(**batch)
        grads = ours.backward()
        norm = optim.clip_grad_norm_(grads, clip)
        with npbert.using_path(path):                 # the optimizer's step on `path`; the model's as set
            opt.step(grads)
        sched.step()

        theirs.zero_grad()
        theirs(**{k: t(v) for k, v in batch.items()}).loss.backward()
        tnorm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), clip)
        topt.step()
        tsched.step()

        assert abs(norm - float(tnorm)) <= REL_TOL * float(tnorm), step
        assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-15, abs=0), step
        tparams = dict(theirs.named_parameters())
        for name, p in ours.named_parameters():
            assert rel(p, tparams[name].detach().numpy()) <= REL_TOL, (step, name)
    return ours


@pytest.mark.parametrize("path", ["fast", "reference"])
@pytest.mark.parametrize("opt_name", ["AdamW", "Adam"])
def test_adam_family_equals_torch_with_groups_clipping_and_schedule(opt_name, path):
    ours = run_both(opt_name, path=path, steps=30 if path == "fast" else 10)     # 10: the reference, in less time
    # The run changed the model (so the comparison above compared something).
    fresh, _ = make_models("BertForSequenceClassification", num_labels=2)
    assert rel(ours.state.params["classifier.weight"], fresh.state.params["classifier.weight"]) > 1e-3


@pytest.mark.parametrize("schedule,kwargs", [("cosine", None), ("polynomial", {"power": 2.0})])
def test_adamw_other_schedules_equal_torch(schedule, kwargs):
    run_both("AdamW", schedule=schedule, steps=12, warmup=3, sched_kwargs=kwargs)


SCHEDULE_CASES = [
    ("linear", None), ("cosine", None), ("cosine", {"num_cycles": 1.5}), ("cosine_with_restarts", None),
    ("cosine_with_restarts", {"num_cycles": 3}), ("polynomial", None), ("polynomial", {"lr_end": 1e-4, "power": 3.0}),
    ("constant", None), ("constant_with_warmup", None), ("inverse_sqrt", None), ("inverse_sqrt", {"timescale": 7}),
    ("cosine_with_min_lr", {"min_lr": 1e-4}), ("cosine_with_min_lr", {"min_lr_rate": 0.2}),
    ("cosine_warmup_with_min_lr", {"min_lr_rate": 0.1}),
    ("warmup_stable_decay", {"num_decay_steps": 4}),
    ("warmup_stable_decay", {"num_decay_steps": 3, "warmup_type": "cosine", "decay_type": "1-sqrt",
                             "min_lr_ratio": 0.1}),
    ("warmup_stable_decay", {"num_decay_steps": 3, "warmup_type": "1-sqrt", "decay_type": "linear"}),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,kwargs", SCHEDULE_CASES)
@pytest.mark.parametrize("warmup,total", [(0, 10), (3, 10), (10, 10), (4, 25)])
def test_every_schedule_equals_transformers(name, kwargs, warmup, total):
    p = np.zeros(3)
    opt = optim.AdamW([("w", p)], lr=1e-3)
    tp = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    topt = torch.optim.AdamW([tp], lr=1e-3)
    if name == "warmup_stable_decay" and warmup + kwargs["num_decay_steps"] > total:
        pytest.skip("transformers gives a negative stable phase here")   # not a valid configuration
    ours = optim.get_scheduler(name, opt, num_warmup_steps=warmup, num_training_steps=total,
                               scheduler_specific_kwargs=kwargs)
    theirs = transformers.get_scheduler(name, topt, num_warmup_steps=warmup, num_training_steps=total,
                                        scheduler_specific_kwargs=kwargs)
    seen = []
    for step in range(total + 5):
        # Both compute the same float expressions: equal to the last bit except the order of a
        # product or two, hence 1e-15 relative.
        assert ours.get_last_lr()[0] == pytest.approx(theirs.get_last_lr()[0], rel=1e-15, abs=1e-300), step
        assert opt.param_groups[0]["lr"] == ours.get_last_lr()[0]
        seen.append(ours.get_last_lr()[0])
        ours.step()
        try:
            theirs.step()
        except ZeroDivisionError:
            # transformers' polynomial schedule divides by zero at step T when warmup == T;
            # npbert gives the end of the decay there, lr_end.
            assert name == "polynomial" and warmup == total
            assert ours.get_last_lr()[0] == pytest.approx((kwargs or {}).get("lr_end", 1e-7), rel=1e-12)
            break
    if name != "constant" and not (name == "constant_with_warmup" and warmup == 0):
        assert len(set(seen)) > 1          # the schedule did vary


def test_scheduler_errors():
    opt = optim.AdamW([("w", np.zeros(2))], lr=1e-3)
    with pytest.raises(ValueError, match="unknown scheduler 'linaer'.*linear"):
        optim.get_scheduler("linaer", opt, 1, 10)
    with pytest.raises(ValueError, match="num_training_steps"):
        optim.get_scheduler("linear", opt, num_warmup_steps=1)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        optim.get_scheduler("cosine", opt, num_training_steps=10)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("schedule,warmup,t_total,path", [
    ("warmup_linear", 0.2, 12, "fast"), ("warmup_cosine", 0.1, 12, "fast"), ("warmup_constant", 0.3, 12, "fast"),
    ("warmup_linear", -1, -1, "fast"), ("none", 0.1, 12, "fast"),
    ("warmup_linear", 0.2, 12, "reference")])
def test_bert_adam_equals_pytorch_pretrained_bert(schedule, warmup, t_total, path):
    ppb = load_ppb_optimization()
    ours, theirs = make_models("BertForSequenceClassification", num_labels=2)
    # max_grad_norm 0.05 is below most per-parameter gradient norms here, so the per-parameter
    # clipping really acts (checked below).
    kwargs = dict(lr=1e-3, warmup=warmup, t_total=t_total, schedule=schedule, weight_decay=0.01, max_grad_norm=0.05)
    opt = optim.BertAdam(list(ours.named_parameters()), **kwargs)
    topt = ppb.BertAdam(list(theirs.parameters()), **kwargs)
    clipped = 0
    for step, batch in enumerate(batches(10, seed=1)):
        ours(**batch)
        grads = ours.backward()
        clipped += sum(np.linalg.norm(g) > 0.05 for g in grads.values())
        with npbert.using_path(path):
            opt.step(grads)
        theirs.zero_grad()
        theirs(**{k: t(v) for k, v in batch.items()}).loss.backward()
        topt.step()
        tparams = dict(theirs.named_parameters())
        for name, p in ours.named_parameters():
            assert rel(p, tparams[name].detach().numpy()) <= REL_TOL, (step, name)
        assert opt.get_lr() == pytest.approx(topt.get_lr(), rel=1e-15)
    assert clipped > 0


def adam_weight_decay_reference(params, grads_seq, lr, wd, b1, b2, eps, exclude):
    """google-research/bert optimization.py, AdamWeightDecayOptimizer.apply_gradients, as a loop:
        next_m = b1 * m + (1 - b1) * g;  next_v = b2 * v + (1 - b2) * g^2
        update = next_m / (sqrt(next_v) + eps);  if decay(name): update += wd * param
        param = param - lr * update                  (no bias correction, no step count)"""
    import re
    params = {k: v.copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    for grads in grads_seq:
        for k, g in grads.items():
            m[k] = b1 * m[k] + (1 - b1) * g
            v2[k] = b2 * v2[k] + (1 - b2) * g * g
            update = m[k] / (np.sqrt(v2[k]) + eps)
            if wd and not any(re.search(r, k) for r in exclude):
                update = update + wd * params[k]
            params[k] = params[k] - lr * update
    return params


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_adam_weight_decay_equals_google_formula(path):
    rng = np.random.default_rng(3)
    params = {"bert.encoder.layer.0.attention.self.query.weight": rng.normal(size=(4, 4)),
              "bert.encoder.layer.0.attention.self.query.bias": rng.normal(size=4),
              "bert.embeddings.LayerNorm.weight": rng.normal(size=4)}
    grads_seq = [{k: rng.normal(size=v.shape) for k, v in params.items()} for _ in range(6)]
    exclude = ["LayerNorm", "layer_norm", "bias"]
    expected = adam_weight_decay_reference(params, grads_seq, 0.01, 0.1, 0.9, 0.999, 1e-6, exclude)
    live = {k: v.copy() for k, v in params.items()}
    opt = optim.AdamWeightDecay(list(live.items()), lr=0.01, weight_decay=0.1, eps=1e-6,
                                exclude_from_weight_decay=exclude)
    for grads in grads_seq:
        with npbert.using_path(path):
            opt.step({k: g.copy() for k, g in grads.items()})
    for k in params:
        # The same float64 operations in the same order except fused in-place forms: 1e-14.
        np.testing.assert_allclose(live[k], expected[k], rtol=1e-14, atol=0)
    # The decay applied only to the weight (the others match the no-decay reference too).
    no_decay = adam_weight_decay_reference(params, grads_seq, 0.01, 0.0, 0.9, 0.999, 1e-6, exclude)
    assert not np.allclose(live["bert.encoder.layer.0.attention.self.query.weight"],
                           no_decay["bert.encoder.layer.0.attention.self.query.weight"])
    np.testing.assert_allclose(live["bert.embeddings.LayerNorm.weight"], no_decay["bert.embeddings.LayerNorm.weight"],
                               rtol=1e-14)
