"""A nan or inf in a gradient (issue 36, case 5): clip_grad_norm_ and every optimizer keep torch's
arithmetic, and say so, naming the parameter; error_if_nonfinite refuses and changes nothing."""
import warnings

import numpy as np
import pytest

import npbert
from npbert import optim
from heads.head_helpers import tiny_config

torch = pytest.importorskip("torch")

BAD = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}


def gradients(bad, where="w2", at=(1, 2)):
    rng = np.random.default_rng(0)
    grads = {"w1": rng.normal(size=(3, 4)), "w2": rng.normal(size=(4, 5)), "w3": rng.normal(size=6)}
    grads[where][at] = BAD[bad]
    return grads


def torch_clip(grads, max_norm, norm_type=2.0):
    params = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64)) for g in grads.values()]
    for p, g in zip(params, grads.values()):
        p.grad = torch.from_numpy(g.copy())
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    return float(total), [p.grad.numpy() for p in params]


@pytest.mark.parametrize("norm_type", [2.0, 3.0, "inf"])
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_clip_grad_norm_warns_naming_the_parameter_and_scales_as_torch(bad, norm_type):
    grads = gradients(bad)
    expected_total, expected = torch_clip(grads, 1.0, norm_type)
    with pytest.warns(RuntimeWarning, match="the gradient of 'w2' holds nan or inf"):
        total = optim.clip_grad_norm_(grads, 1.0, norm_type=norm_type)
    assert not np.isfinite(total)
    assert np.isnan(total) == np.isnan(expected_total)
    for ours, theirs in zip(grads.values(), expected):
        # the same product g * (1 / (total + 1e-6)): nan everywhere for a nan total, 0 (nan
        # where g is inf) for an inf total, exactly as torch (assert_array_equal: nan == nan)
        np.testing.assert_array_equal(ours, theirs)


def test_a_nan_after_finite_gradients_makes_the_inf_norm_nan():
    """The max norm sees a nan in any gradient, not only the first (torch: nan)."""
    grads = gradients("nan", where="w3", at=(4,))
    with pytest.warns(RuntimeWarning, match="'w3'"):
        assert np.isnan(optim.clip_grad_norm_(grads, 1.0, norm_type="inf"))


@pytest.mark.parametrize("form", ["dict", "parameters"])
def test_error_if_nonfinite_raises_naming_the_parameter_and_changes_nothing(form):
    model = npbert.BertForSequenceClassification(tiny_config(num_labels=2), dtype=np.float64)
    out = model(input_ids=np.array([[1, 2, 3]]), labels=np.array([1]))
    if form == "dict":
        grads = model.backward()
        target = grads
    else:
        out.loss.backward()
        target = list(model.parameters())
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    grads["bert.encoder.layer.1.output.dense.weight"][0, 0] = np.nan
    kept = {k: g.copy() for k, g in grads.items()}
    with pytest.raises(RuntimeError, match="non-finite.*the gradient of 'bert.encoder.layer.1.output.dense.weight' "
                                           "holds nan or inf. No gradient was changed"):
        optim.clip_grad_norm_(target, 1e-3, error_if_nonfinite=True)
    for k, g in grads.items():
        np.testing.assert_array_equal(g, kept[k])
    # the same call on finite gradients clips them and says nothing
    grads["bert.encoder.layer.1.output.dense.weight"][0, 0] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total = optim.clip_grad_norm_(target, 1e-3, error_if_nonfinite=True)
    assert np.isfinite(total) and total > 1e-3


def test_an_overflowing_norm_of_finite_gradients_is_named_as_such():
    grads = {"w": np.full(4, 1e300)}
    with pytest.warns(RuntimeWarning, match="every gradient is finite, but the norm overflowed"):
        assert optim.clip_grad_norm_(grads, 1.0) == np.inf


MAKERS = {
    "AdamW": (lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.1), lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)),
    "Adam": (lambda ps: optim.Adam(ps, lr=1e-2, weight_decay=0.1), lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1)),
    "AdamWeightDecay": (lambda ps: optim.AdamWeightDecay(ps, lr=1e-2, weight_decay=0.1), None),
    "BertAdam": (lambda ps: optim.BertAdam(ps, lr=1e-2, max_grad_norm=1.0), None),
}


@pytest.mark.parametrize("path", ["fast", "reference"])
@pytest.mark.parametrize("bad", ["nan", "inf"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_step_with_a_nonfinite_gradient_warns_and_applies_as_torch(name, bad, path):
    """Applied as torch.optim applies it: the bad entries of the parameter become nan (all of it
    under BertAdam with a nan, whose per-parameter clipping multiplies by a nan factor),
    the other parameters take their ordinary step.  The warning names only the bad parameter."""
    make, make_torch = MAKERS[name]
    rng = np.random.default_rng(1)
    # "big" is above the fast path's threaded size, and the bad entry far into its last piece
    shapes = {"small": (4, 5), "big": (300, 700)}
    start = {k: rng.normal(size=s) for k, s in shapes.items()}
    grads = {k: rng.normal(size=s) for k, s in shapes.items()}
    grads["big"][290, 650] = BAD[bad]
    params = {k: v.copy() for k, v in start.items()}
    opt = make(list(params.items()))
    clean = {k: v.copy() for k, v in start.items()}
    clean_opt = make(list(clean.items()))
    with npbert.using_path(path), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        opt.step({k: g.copy() for k, g in grads.items()})
    # one warning, the optimizer's (numpy's "invalid value" warnings from inside the step are not repeated)
    assert len(seen) == 1 and str(seen[0].message).startswith(f"{name}.step(): the gradient of 1 parameter(s) holds"), \
        [str(w.message) for w in seen]
    params = {k: v.copy() for k, v in start.items()}
    opt = make(list(params.items()))
    with npbert.using_path(path):
        with pytest.warns(RuntimeWarning, match=r"the gradient of 1 parameter\(s\) holds nan or inf, first 'big'; "
                                                r"the update was applied as torch.optim applies it"):
            opt.step({k: g.copy() for k, g in grads.items()})
        with warnings.catch_warnings():
            warnings.simplefilter("error")                       # finite gradients: no word
            clean_opt.step({k: g.copy() for k, g in grads.items() if k == "small"})
    np.testing.assert_array_equal(params["small"], clean["small"])   # the others: their ordinary step
    nan = np.isnan(params["big"])
    everywhere = name == "BertAdam" and bad == "nan"          # its clipping factor is nan (inf: 0, then 0 * inf = nan)
    assert nan[290, 650] and np.isfinite(params["big"]).sum() == (0 if everywhere else params["big"].size - 1)
    if make_torch is not None:
        tparams = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in start.values()]
        for tp, g in zip(tparams, grads.values()):
            tp.grad = torch.from_numpy(g.copy())
        make_torch(tparams).step()
        for ours, theirs in zip(params.values(), tparams):
            # one float64 step, the same formula up to the order of a few operations: 1e-12
            # relative, and 1e-15 absolute where p - update cancels (the update is below lr = 1e-2
            # times |m| / sqrt(v) <= 1 at the first step, so its round-off is below 1e-17)
            np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-12, atol=1e-15)   # nan == nan


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_the_warning_lists_several_parameters(path):
    params = {k: np.zeros(3) for k in "abcdef"}
    opt = optim.AdamW(list(params.items()))
    grads = {k: np.array([1.0, np.nan if k in "bcdef" else 0.0, 2.0]) for k in params}
    with npbert.using_path(path), pytest.warns(RuntimeWarning, match=r"of 5 parameter\(s\).*first 'b' \(also 'c', 'd', 'e' \.\.\.\)"):
        opt.step(grads)
    assert np.isfinite(params["a"]).all() and np.isnan(params["b"][1]) and np.isfinite(params["b"][[0, 2]]).all()


def _copies(model, opt):
    return ({n: np.array(p) for n, p in model.named_parameters()},
            {n: {k: np.array(v) for k, v in s.items()} for n, s in opt.state.items()})


@pytest.mark.parametrize("path", ["fast", "reference"])
@pytest.mark.parametrize("name", ["AdamW", "Adam", "BertAdam", "AdamWeightDecay"])
def test_nonfinite_raise_and_skip_change_nothing_and_name_the_parameters(name, path):
    """opt.nonfinite = "raise" refuses a step with a nan gradient before any update, "skip" skips
    it with a warning: in both the parameters and the optimizer state stay bit for bit as they
    were (after one ordinary step, so that there is state to keep).  On finite gradients both
    take the same step as "apply"."""
    kwargs = {"lr": 1e-2, **({"t_total": 10, "warmup": 0.1} if name == "BertAdam" else {})}
    results = {}
    for mode in ("apply", "raise", "skip"):
        with npbert.using_path(path):
            model = npbert.BertForSequenceClassification(tiny_config(num_labels=2), dtype=np.float64)
            opt = getattr(optim, name)(model.named_parameters(), **kwargs)
        opt.nonfinite = mode
        model(input_ids=np.array([[1, 2, 3]]), labels=np.array([1]))
        grads = model.backward()
        opt.step(grads)                                        # a finite step: the same in every mode
        results[mode] = _copies(model, opt)
        before = results[mode]
        grads = {k: g.copy() for k, g in grads.items()}
        grads["classifier.weight"][0, 1] = np.nan
        grads["bert.pooler.dense.bias"][3] = np.inf
        if mode == "raise":
            with pytest.raises(ValueError, match=r"2 parameter\(s\) holds nan or inf \('bert.pooler.dense.bias', "
                                                 r"'classifier.weight'\); the step was refused"):
                opt.step(grads)
        elif mode == "skip":
            with pytest.warns(RuntimeWarning, match="the step was skipped"):
                opt.step(grads)
        else:
            continue
        after = _copies(model, opt)
        for n in before[0]:
            np.testing.assert_array_equal(after[0][n], before[0][n], err_msg=n)
        assert after[1].keys() == before[1].keys()
        for n in before[1]:
            for k in before[1][n]:
                np.testing.assert_array_equal(after[1][n][k], before[1][n][k], err_msg=f"{n} {k}")
    for mode in ("raise", "skip"):                             # the finite step: bit for bit as "apply"
        for n, p in results["apply"][0].items():
            np.testing.assert_array_equal(results[mode][0][n], p, err_msg=n)


def test_a_bad_nonfinite_setting_is_named():
    """Refused where it is set (npbert/settings.py), not at the next step; the setting keeps its value."""
    opt = optim.AdamW([("w", np.zeros(3))], lr=1e-3)
    with pytest.raises(ValueError, match=r"AdamW.nonfinite must be one of \('apply', 'raise', 'skip'\), got 'ignore'"):
        opt.nonfinite = "ignore"
    assert opt.nonfinite == "apply"
    opt.step({"w": np.ones(3)})
