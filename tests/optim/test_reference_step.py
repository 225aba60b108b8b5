"""The reference optimizer step (npbert/optim/reference.py) against the fast one, and the path
switch: which step runs, frozen parameters, missing gradients, and state_dict across paths.

Both steps against torch / pytorch-pretrained-bert / Google's formula: test_optim_vs_torch.py
runs its comparisons on each path."""
import numpy as np
import pytest

import npbert
from npbert import optim
from heads.head_helpers import tiny_config

# unit round-off: half the distance from 1 to the next float
U = {np.float64: 2.0 ** -53, np.float32: 2.0 ** -24}

SHAPES = {"a": (300, 700), "b": (37,), "c": (5, 9)}     # "a" is above the threaded size: pieces on threads


def problem(dtype, seed=0, steps=4):
    rng = np.random.default_rng(seed)
    start = {k: rng.normal(size=s).astype(dtype) for k, s in SHAPES.items()}
    grads = [{k: (rng.normal(size=s) * 10.0 ** rng.integers(-3, 1)).astype(dtype) for k, s in SHAPES.items()}
             for _ in range(steps)]
    return start, grads


def step_on(path, opt, grads):
    with npbert.using_path(path):
        opt.step({k: g.copy() for k, g in grads.items()})


def same_start(make, start, state_dict=None):
    params = {k: v.copy() for k, v in start.items()}
    opt = make(list(params.items()))
    if state_dict is not None:
        opt.load_state_dict(state_dict)
    return params, opt


ADAMS = [
    pytest.param(lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.1), True, id="AdamW-decay"),
    pytest.param(lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.0), True, id="AdamW-no-decay"),
    pytest.param(lambda ps: optim.Adam(ps, lr=1e-2, weight_decay=0.1), False, id="Adam-L2"),
    pytest.param(lambda ps: optim.Adam(ps, lr=1e-2, betas=(0.8, 0.99), eps=1e-6), False, id="Adam-no-decay"),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("make,decoupled", ADAMS)
def test_adam_reference_step_equals_the_fast_step_to_round_off(make, decoupled, dtype):
    """From the same state (loaded into both optimizers before each step), one step on each path.

    The second moment v is computed by the same operations in the same order on both paths
    (beta2 v + (1 - beta2) (g g)), so it is compared bit for bit.  The first moment is the lerp
    m + (1 - beta1)(g - m) on the fast path (torch's) and beta1 m + (1 - beta1) g on the
    reference: three roundings each, each at most u times a term bounded by |m| + |g|, so
        |m_fast - m_ref| <= 6 u (|m| + |g|)                                  (u: unit round-off).
    The update lr m^ / (sqrt(v^) + eps) is formed by different operations (the fast path divides
    sqrt(v) by sqrt(1 - beta2^t); the reference takes the root of v / (1 - beta2^t)): at most 8
    roundings of relative size u per path, plus the difference in m carried through, plus the
    final subtraction's rounding on each side:
        |p_fast - p_ref| <= 2 u |p| + 16 u |update| + lr / (1 - beta1^t) * 6 u (|m| + |g|) / (sqrt(v^) + eps)
    The bound below doubles that (second-order terms; sqrt's own rounding is within the count).
    A wrong formula (a missing bias correction, eps inside the root) moves p by far more."""
    u = U[dtype]
    start, grads = problem(dtype)
    params_f, fast = same_start(make, start)
    for t, g in enumerate(grads, 1):
        saved = fast.state_dict()
        before = {k: v.copy() for k, v in params_f.items()}
        params_r, ref = same_start(make, before, saved)
        step_on("fast", fast, g)
        step_on("reference", ref, g)
        group = fast.param_groups[0]
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for k in SHAPES:
            sf, sr = fast.state[k], ref.state[k]
            assert sf["step"] == sr["step"] == t
            assert sf["exp_avg_sq"].tobytes() == sr["exp_avg_sq"].tobytes(), (t, k)
            # the bound's terms from float64 copies of the reference's arrays
            m_old = saved["state"][k]["exp_avg"].astype(np.float64) if t > 1 else np.zeros(SHAPES[k])
            gk = g[k].astype(np.float64)
            if wd and not decoupled:
                gk = gk + wd * before[k]
            scale_m = np.abs(m_old) + np.abs(gk)
            np.testing.assert_array_less(np.abs(sf["exp_avg"].astype(np.float64) - sr["exp_avg"]),
                                         2 * 6 * u * scale_m + np.finfo(np.float64).tiny)
            denom = np.sqrt(sr["exp_avg_sq"].astype(np.float64) / (1 - beta2 ** t)) + eps
            update = lr * np.abs(sr["exp_avg"].astype(np.float64)) / (1 - beta1 ** t) / denom
            bound = 2 * (2 * u * np.abs(params_r[k]) + 16 * u * update + lr / (1 - beta1 ** t) * 6 * u * scale_m / denom)
            diff = np.abs(params_f[k].astype(np.float64) - params_r[k])
            assert np.all(diff <= bound), (t, k, float(np.max(diff / bound)))
            assert not np.array_equal(params_r[k], before[k])          # the step did move p


BIT_EQUAL = [
    pytest.param(lambda ps: optim.AdamWeightDecay(ps, lr=1e-2, weight_decay=0.1, exclude_from_weight_decay=["b"]),
                 id="AdamWeightDecay"),
    pytest.param(lambda ps: optim.AdamWeightDecay(ps, lr=1e-2), id="AdamWeightDecay-no-decay"),
    pytest.param(lambda ps: optim.BertAdam(ps, lr=1e-2, warmup=0.2, t_total=6, max_grad_norm=1.0), id="BertAdam"),
    pytest.param(lambda ps: optim.BertAdam(ps, lr=1e-2, schedule="warmup_cosine", warmup=0.1, t_total=6,
                                           weight_decay=0.0, max_grad_norm=0.0), id="BertAdam-no-clip-no-decay"),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("make", BIT_EQUAL)
def test_uncorrected_reference_steps_are_bit_equal_to_the_fast_ones(make, dtype):
    """AdamWeightDecay and BertAdam: the fast path's in-place operations are the reference's
    in the same order (b1 m + (1 - b1) g, b2 v + (1 - b2) g^2, m / (sqrt(v) + e), + wd p, lr *),
    and BertAdam's per-parameter norm is the same dot product, so several steps agree to the bit."""
    start, grads = problem(dtype, seed=1, steps=5)
    params_f, fast = same_start(make, start)
    params_r, ref = same_start(make, start)
    for g in grads:
        step_on("fast", fast, g)
        step_on("reference", ref, g)
        for k in SHAPES:
            assert params_f[k].tobytes() == params_r[k].tobytes()
            for key, value in fast.state[k].items():
                if isinstance(value, np.ndarray):
                    assert value.tobytes() == ref.state[k][key].tobytes(), (k, key)
                else:
                    assert value == ref.state[k][key]
    for k in SHAPES:
        assert params_f[k].dtype == dtype and not np.array_equal(params_f[k], start[k])


ALL = [pytest.param(a.values[0], id=a.id) for a in ADAMS[:1] + ADAMS[2:3]] + BIT_EQUAL[:1] + BIT_EQUAL[2:3]   # one each


@pytest.mark.parametrize("make", ALL)
def test_the_path_is_read_at_each_step(make, monkeypatch):
    """step() runs the reference function exactly when npbert.get_path() says "reference"."""
    start, grads = problem(np.float64, steps=3)
    params, opt = same_start(make, start)
    calls = []
    for module_name, fn in [("adam", "adam_step"), ("adam_weight_decay", "adam_weight_decay_step"),
                            ("bert_adam", "bert_adam_step")]:
        module = getattr(optim, module_name)
        original = getattr(module, fn)
        monkeypatch.setattr(module, fn, lambda *a, _f=original, **kw: (calls.append(1), _f(*a, **kw)))
    step_on("fast", opt, grads[0])
    assert calls == []
    step_on("reference", opt, grads[1])
    assert len(calls) == len(SHAPES)                                  # one call per parameter
    before = npbert.set_path("reference")
    try:
        opt.step(grads[2])                                            # set_path reaches it too
    finally:
        npbert.set_path(before)
    assert len(calls) == 2 * len(SHAPES)


@pytest.mark.parametrize("make", ALL)
def test_state_dict_resumes_on_the_other_path(make):
    """Each path keeps the same state (names, shapes, dtypes, step counts), so a checkpoint of a
    fast run resumes on the reference path and the reverse: after the switch, the step equals,
    to the bit, the same path's step from the unsaved optimizer."""
    start, grads = problem(np.float32, steps=4)
    runs = {}
    for path in ("fast", "reference"):
        params, opt = same_start(make, start)
        for g in grads[:2]:
            step_on(path, opt, g)
        runs[path] = (params, opt)
    sd = {p: opt.state_dict() for p, (_, opt) in runs.items()}
    for k in SHAPES:                                                  # the same layout
        assert sd["fast"]["state"][k].keys() == sd["reference"]["state"][k].keys()
        for key, v in sd["fast"]["state"][k].items():
            w = sd["reference"]["state"][k][key]
            assert type(v) is type(w) and (not isinstance(v, np.ndarray) or (v.shape, v.dtype) == (w.shape, w.dtype))
    for saved_on, resume_on in (("fast", "reference"), ("reference", "fast")):
        params, opt = runs[saved_on]
        resumed_params, resumed = same_start(make, params, opt.state_dict())
        for g in grads[2:]:
            step_on(resume_on, opt, g)
            step_on(resume_on, resumed, g)
        for k in SHAPES:
            assert resumed_params[k].tobytes() == params[k].tobytes()


@pytest.mark.parametrize("path", ["fast", "reference"])
@pytest.mark.parametrize("make", ALL)
def test_frozen_parameters_and_missing_gradients_are_left_alone(make, path):
    """torch-style: a frozen parameter gets no .grad, and a parameter whose .grad is None (here
    set to None by hand) is skipped; neither changes nor gets state, on either path."""
    model = npbert.BertForSequenceClassification(tiny_config(num_labels=2), dtype=np.float64)
    model.freeze("bert.embeddings")
    with pytest.warns(UserWarning, match="frozen"):
        opt = make(model.parameters())
    before = {n: p.copy() for n, p in model.named_parameters()}
    params = dict(model.named_parameters())
    for _ in range(2):                         # two steps: BertAdam's warmup gives a rate of 0 at the first
        opt.zero_grad()
        model(input_ids=np.array([[1, 2, 3, 4]]), labels=np.array([1])).loss.backward()
        assert params["bert.embeddings.word_embeddings.weight"].grad is None
        params["classifier.bias"].grad = None
        with npbert.using_path(path):
            opt.step()
    for name, p in model.named_parameters():
        untouched = name.startswith("bert.embeddings") or name == "classifier.bias"
        assert np.array_equal(p, before[name]) == untouched, name
        assert (name in opt.state) == (not untouched), name


def test_the_docs_show_the_reference_lines_as_they_are():
    """docs/optimizers.md shows the reference steps as text blocks: every line shown is a line
    of npbert/optim/reference.py, so the page cannot drift from the code."""
    import os
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    page = open(os.path.join(root, "docs", "optimizers.md"), encoding="utf-8").read()
    source = open(os.path.join(root, "npbert", "optim", "reference.py"), encoding="utf-8").read().splitlines()
    shown = re.findall(r"^```text\n(.*?)^```", page, re.S | re.M)
    lines = [line for block in shown for line in block.splitlines() if line.strip()]
    assert len(shown) >= 2 and len(lines) >= 18
    missing = [line for line in lines if line not in source]
    assert not missing, missing
