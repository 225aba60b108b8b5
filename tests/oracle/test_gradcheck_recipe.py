"""npbert.gradcheck's verdict: consistent with the backward on the padding row, no false failure
where a fixed step and cs231n's fixed floor cry wolf, and still a failure for every wrong
backward.  The same drawn cases run by the thousand in tests/bench/bench_gradcheck_recipe.py."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import npbert
from npbert.functional import linear_backward, linear_forward
from npbert.gradcheck import (check_forward_backward, check_gradients, check_model, model_loss,
                              numerical_gradient, rel_error)

import outside_bert as ob
import recipe_cases

TOL = 1e-7        # cs231n's threshold, the recipe's default tol


def tiny(**overrides):
    base = dict(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                max_position_embeddings=16, initializer_range=0.5)
    return npbert.BertConfig(**{**base, **overrides})


# ---- 1. the padding row: the finite differences follow torch's rule, as the backward -----------
@pytest.mark.parametrize("ids", [[[2, 7, 9, 3]], [[2, 0, 9, 3]]], ids=["no pad", "pad id 0"])
def test_check_model_agrees_with_the_backward_with_and_without_pad_ids(ids):
    """The issue's example: [[2, 0, 9, 3]] used to give rel_error 1.0 on the word embeddings."""
    model = npbert.BertModel(tiny(), dtype=np.float64).eval()
    inputs = {"input_ids": np.array(ids), "attention_mask": np.array([[1, 1, 1, 0]])}
    upstream = {"last_hidden_state": np.random.default_rng(0).normal(size=(1, 4, 8))}
    checks = check_model(model, inputs, upstream, names=["embeddings.word_embeddings.weight"])
    c = checks["embeddings.word_embeddings.weight"]
    assert c.ok and c.error < TOL and c.rel_error < TOL, c
    if 0 in ids[0]:
        assert np.all(c.analytic[0] == 0) and np.all(c.numerical[0] == 0)   # the lookup held fixed: exactly 0
        assert "pad_token_id" in c.note
        # the plain function does depend on the row: without the rule the differences see it
        plain = numerical_gradient(lambda _x: model_loss(model(**inputs), upstream),
                                   model.state.params["embeddings.word_embeddings.weight"][0], h=1e-3, order=4)
        assert np.abs(plain).max() > 1e-3
    else:
        assert c.note == ""


def test_padding_rule_with_sampled_entries_and_a_pad_row_elsewhere():
    """pad_token_id 3, several pads, 20 sampled entries per parameter and the whole model:
    every Comparison ok; the note appears only when entries of the pad row were sampled."""
    model = npbert.BertModel(tiny(pad_token_id=3), seed=1, dtype=np.float64).eval()
    inputs = {"input_ids": np.array([[2, 3, 3, 5], [3, 1, 4, 3]]), "attention_mask": np.array([[1, 1, 1, 0], [1] * 4])}
    rng = np.random.default_rng(1)
    upstream = {"last_hidden_state": rng.normal(size=(2, 4, 8)), "pooler_output": rng.normal(size=(2, 8))}
    checks = check_model(model, inputs, upstream, max_entries=20, seed=3)
    assert all(c.ok for c in checks.values()), {n: (c.error, c.note) for n, c in checks.items() if not c.ok}
    word = check_model(model, inputs, upstream, names=["embeddings.word_embeddings.weight"])
    assert word["embeddings.word_embeddings.weight"].ok and "row 3 (pad_token_id)" in word[
        "embeddings.word_embeddings.weight"].note


def test_padding_rule_on_a_tied_table_keeps_the_decoders_part():
    """BertForMaskedLM: the pad row also feeds the decoder; its analytic gradient is that part
    alone, and the finite differences with the lookup held fixed give the same."""
    model = npbert.BertForMaskedLM(tiny(), seed=2, dtype=np.float64).eval()
    rng = np.random.default_rng(2)
    model.load_state_dict({k: v + rng.normal(0, 0.3, v.shape) for k, v in model.state_dict().items()})
    inputs = dict(input_ids=np.array([[2, 0, 5, 0]]), labels=np.array([[-100, 4, 9, -100]]))
    name = "bert.embeddings.word_embeddings.weight"
    c = check_model(model, inputs, {"loss": 1.0}, names=[name])[name]
    assert c.ok and np.abs(c.analytic[0]).max() > 1e-3, c.note


# ---- 2. no false failures where the fixed recipe fails ------------------------------------------
def _layer_norm_width_2(spread, eps, bugs=()):
    """A LayerNorm of width 2 (the outside user's, outside_bert.py) whose rows have the given
    half-spread |x1 - x2| / 2."""
    rng = np.random.default_rng(0)
    centre = rng.normal(size=(3, 1))
    x = np.concatenate([centre - spread, centre + spread], axis=1)
    gamma, beta = rng.normal(size=2), rng.normal(size=2)

    def forward(x, weight, bias):
        return ob.layer_norm(x, weight, bias, eps, bugs)

    def backward(dy, cache):
        dx, dgamma, dbeta = ob.layer_norm_backward(dy, cache, bugs)
        return {"x": dx, "weight": dgamma, "bias": dbeta}
    return forward, backward, {"x": x, "weight": gamma, "bias": beta}


def test_layer_norm_row_with_spread_near_sqrt_eps_needs_smaller_steps():
    """eps 1e-5, half-spread 2e-3 ~ sqrt(eps): x_hat = d / sqrt(d^2 + eps) bends on the scale of
    sqrt(eps), so h = 1e-3 (five-point) is off by more than 1e-7.  The recipe refines those
    entries and passes; a wrong backward on the same rows still fails."""
    forward, backward, inputs = _layer_norm_width_2(2e-3, 1e-5)
    out, cache = forward(**inputs)
    dout = np.random.default_rng(1).normal(size=out.shape)
    dx = backward(dout, cache)["x"]
    fixed = numerical_gradient(lambda x: np.sum(forward(x, inputs["weight"], inputs["bias"])[0] * dout),
                               inputs["x"], h=1e-3, order=4)
    assert rel_error(dx, fixed) > TOL                         # the fixed step cries wolf here
    checks = check_forward_backward(forward, backward, inputs, dout=dout)
    assert checks["x"].ok and "smaller steps" in checks["x"].note, checks["x"]
    # the backward without "- xhat mean(dxhat xhat)", on the same rows: caught
    forward, wrong, inputs = _layer_norm_width_2(2e-3, 1e-5, bugs=("layer_norm_no_projection",))
    assert not check_forward_backward(forward, wrong, inputs, dout=dout)["x"].ok


def test_gradients_zero_in_exact_arithmetic_are_judged_against_the_scale():
    """eps 1e-12, half-spread 1: x_hat = +-1 up to ~1e-12, so d loss / dx is ~1e-12 and its
    difference quotient is round-off.  cs231n's fixed 1e-8 floor gives rel_error ~1: a false
    failure.  Judged against the scale of the layer's other gradients (gamma's, beta's: O(1)) it
    agrees.  The same holds for the key bias of every model (see the model test below)."""
    forward, backward, inputs = _layer_norm_width_2(1.0, 1e-12)
    checks = check_forward_backward(forward, backward, inputs)
    x = checks["x"]
    assert np.abs(x.analytic).max() < 1e-10 and x.rel_error > TOL          # cs231n's verdict: wrong
    assert x.ok and x.error < TOL, x                                       # the recipe's: right
    assert checks["weight"].ok and checks["bias"].ok


def test_key_bias_and_every_parameter_of_a_model_pass():
    model = npbert.BertModel(tiny(num_hidden_layers=2), seed=4, dtype=np.float64).eval()
    inputs = {"input_ids": np.array([[2, 0, 9, 3, 0]]), "attention_mask": np.array([[1, 1, 1, 1, 0]])}
    rng = np.random.default_rng(4)
    upstream = {"last_hidden_state": rng.normal(size=(1, 5, 8)), "pooler_output": rng.normal(size=(1, 8))}
    checks = check_model(model, inputs, upstream, max_entries=10)
    assert set(checks) == set(model.state_dict())
    assert all(c.ok for c in checks.values()), {n: (c.error, c.note) for n, c in checks.items() if not c.ok}
    key_bias = checks["encoder.layer.0.attention.self.key.bias"]
    assert np.abs(key_bias.analytic).max() < 1e-12 and key_bias.rel_error > TOL   # round-off against round-off


# ---- the verdict can fail -------------------------------------------------------------------------
def _linear_case(seed=18):
    rng = np.random.default_rng(seed)
    x, W, b = rng.normal(size=(3, 4)), rng.normal(size=(2, 4)), rng.normal(size=2)
    return x, W, b


@pytest.mark.parametrize("factor", [1.01, 1 + 1e-6])
def test_an_entry_off_by_a_little_fails_and_is_named(factor):
    """A backward off by 1 %, or by 1e-6 relative, in one entry: not ok, and `bad` names it."""
    x, W, b = _linear_case()

    def wrong_backward(dy, cache):
        dx, g = linear_backward(dy, cache)
        dx = dx.copy()
        dx[1, 2] *= factor
        return {"x": dx, **g}
    c = check_forward_backward(linear_forward, wrong_backward, {"x": x, "weight": W, "bias": b})
    assert not c["x"].ok and c["x"].bad == ((1, 2),) and "1 wrong" in c["x"].note
    assert c["weight"].ok and c["bias"].ok


def test_a_small_entry_that_should_not_be_zero_fails():
    """The floor is 1e-3 of the largest gradient: an entry whose true value is 1e-3 of the scale
    but is returned as 0 is off by 1 against that floor, far above 1e-7."""
    x = np.array([1.0, 1.0])
    g = {"x": np.array([1.0, 0.0])}
    c = check_gradients(lambda: x[0] + 1e-3 * x[1], {"x": x}, g)["x"]
    assert not c.ok and c.bad == ((1,),)


def test_a_loss_the_differences_cannot_settle_is_not_passed():
    """A loss with noise of 1e-6 on every call: no estimate agrees with the gradient and no two
    agree with each other: the entry is unresolved, reported as bad, never as agreeing."""
    noise = np.random.default_rng(0)
    x = np.array([0.5])
    c = check_gradients(lambda: float(np.sin(x[0]) + 1e-6 * noise.normal()), {"x": x},
                        {"x": np.array([np.cos(0.5)])}, loss_scale=1.0)["x"]
    assert not c.ok and "unresolved" in c.note


def test_max_entries_on_check_forward_backward():
    x, W, b = _linear_case()
    checks = check_forward_backward(linear_forward, lambda d, c: dict(zip(("x",), linear_backward(d, c)[:1])),
                                    {"x": x, "weight": W, "bias": b}, max_entries=5)
    assert checks["x"].analytic.shape == (5,) and checks["x"].ok


# ---- 2. drawn configs: never fails a correct model, fails every wrong backward -----------------
# derandomize: the same draws on every run, so that the counts below are the same too (the bench
# draws thousands of fresh ones)
DRAWN = dict(deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))


@settings(max_examples=12, **DRAWN)
@given(st.data())
def test_drawn_correct_models_never_fail(data):
    """Every activation, hidden sizes down to 1, eps 1e-12 and 1e-5, random O(1) weights, pad
    ids, padded masks, dropout now and then (the bench runs thousands)."""
    counts = recipe_cases.model_case(data)
    assert counts["false failures"] == 0, counts["details"]


LAYER_COUNTS = []


@settings(max_examples=30, **DRAWN)
@given(st.data())
def test_drawn_layers_correct_passes_each_wrong_backward_fails(data):
    counts = recipe_cases.layer_case(data)
    assert counts["false failures"] == 0, counts["details"]
    for bug in ob.BACKWARD_BUGS:
        assert counts[f"{bug}: caught"] == counts[f"{bug}: changes a checked entry"], bug
    LAYER_COUNTS.append(counts)


def test_each_wrong_backward_came_up():
    """Over the drawn layers above (run again if they have not run in this session), each wrong
    backward changed a checked entry in some of them: the test above did judge it."""
    if not LAYER_COUNTS:
        test_drawn_layers_correct_passes_each_wrong_backward_fails()
    for bug in ob.BACKWARD_BUGS:
        assert sum(c[f"{bug}: changes a checked entry"] for c in LAYER_COUNTS) >= 2, bug
