"""npbert.optim without a reference: parameter groups, state_dict round trips, in-place updates,
dtypes, and the errors a user meets."""
import numpy as np
import pytest

import npbert
from npbert import optim
from heads.head_helpers import tiny_config

NO_DECAY = ["bias", "LayerNorm.bias", "LayerNorm.weight"]


def tiny_classifier(dtype=np.float64, **overrides):
    return npbert.BertForSequenceClassification(tiny_config(num_labels=3, **overrides), dtype=dtype)


def test_groups_equal_the_tutorials_hand_built_groups():
    model = tiny_classifier()
    groups = optim.optimizer_grouped_parameters(model, weight_decay=0.01, no_decay=NO_DECAY)
    # seed 001/004: two groups, decay on everything but biases and LayerNorm
    by_hand = [[n for n, _ in model.named_parameters() if not any(nd in n for nd in NO_DECAY)],
               [n for n, _ in model.named_parameters() if any(nd in n for nd in NO_DECAY)]]
    assert [[n for n, _ in g["params"]] for g in groups] == by_hand
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0]
    assert all("lr" not in g for g in groups)          # the optimizer's lr applies
    # the arrays are the model's own
    assert groups[0]["params"][0][1] is model.state.params[groups[0]["params"][0][0]]


def test_layerwise_decay_and_head_lr():
    model = tiny_classifier(num_hidden_layers=3)
    groups = optim.optimizer_grouped_parameters(model, weight_decay=0.01, lr=1.0, layerwise_lr_decay=0.5, head_lr=7.0)
    rate = {n: g["lr"] for g in groups for n, _ in g["params"]}
    assert set(rate) == set(model.state.params)
    # L = 3: layer i gets 0.5^(2 - i), embeddings 0.5^3, pooler 1, head 7
    assert rate["bert.encoder.layer.2.output.dense.weight"] == 1.0
    assert rate["bert.encoder.layer.1.attention.self.query.bias"] == 0.5
    assert rate["bert.encoder.layer.0.output.LayerNorm.weight"] == 0.25
    assert rate["bert.embeddings.word_embeddings.weight"] == 0.125
    assert rate["bert.pooler.dense.weight"] == 1.0
    assert rate["classifier.weight"] == rate["classifier.bias"] == 7.0
    for g in groups:                                   # one (lr, decay) pair per group
        assert len({(rate[n], g["weight_decay"]) for n, _ in g["params"]}) == 1
    with pytest.raises(ValueError, match="needs the base learning rate"):
        optim.optimizer_grouped_parameters(model, layerwise_lr_decay=0.9)


@pytest.mark.parametrize("make", [
    lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    lambda ps: optim.Adam(ps, lr=1e-2, weight_decay=0.1),
    lambda ps: optim.AdamWeightDecay(ps, lr=1e-2, weight_decay=0.1),
    lambda ps: optim.BertAdam(ps, lr=1e-2, warmup=0.1, t_total=20),
])
def test_state_dict_round_trip_continues_bit_identically(make):
    rng = np.random.default_rng(0)
    grads = [{"a": rng.normal(size=(3, 4)).astype(np.float32), "b": rng.normal(size=5).astype(np.float32)}
             for _ in range(8)]
    start = {"a": rng.normal(size=(3, 4)).astype(np.float32), "b": rng.normal(size=5).astype(np.float32)}

    def fresh():
        params = {k: v.copy() for k, v in start.items()}
        opt = make(list(params.items()))
        sched = optim.get_linear_schedule_with_warmup(opt, 2, 8)
        return params, opt, sched

    params, opt, sched = fresh()
    for g in grads:
        opt.step({k: v.copy() for k, v in g.items()})
        sched.step()
    params2, opt2, sched2 = fresh()
    for g in grads[:3]:
        opt2.step({k: v.copy() for k, v in g.items()})
        sched2.step()
    saved_opt, saved_sched, saved_params = opt2.state_dict(), sched2.state_dict(), {k: v.copy() for k, v in params2.items()}
    params3, opt3, sched3 = fresh()
    for k in params3:
        params3[k][...] = saved_params[k]
    opt3.load_state_dict(saved_opt)
    sched3.load_state_dict(saved_sched)
    for g in grads[3:]:
        opt3.step({k: v.copy() for k, v in g.items()})
        sched3.step()
    for k in params:
        assert params3[k].tobytes() == params[k].tobytes()
        assert params3[k].dtype == np.float32
        assert not np.array_equal(params[k], start[k])


def test_state_dict_holds_only_plain_values():
    params = {"w": np.ones(3)}
    opt = optim.AdamW(list(params.items()), lr=0.1)
    opt.step({"w": np.ones(3)})
    d = opt.state_dict()

    def walk(x):
        if isinstance(x, dict):
            return all(isinstance(k, str) and walk(v) for k, v in x.items())
        if isinstance(x, (list, tuple)):
            return all(walk(v) for v in x)
        return isinstance(x, (int, float, str, bool, np.ndarray)) or x is None

    assert walk(d)
    d["state"]["w"]["exp_avg"][:] = 123              # a copy: the live state is untouched
    assert opt.state["w"]["exp_avg"][0] != 123


def test_updates_in_place_in_the_parameter_dtype_and_skip_missing_grads():
    model = tiny_classifier(dtype=np.float32)
    before = {n: p.copy() for n, p in model.named_parameters()}
    ids = {n: id(p) for n, p in model.named_parameters()}
    opt = optim.AdamW(model.named_parameters(), lr=1e-2)
    model(input_ids=np.array([[1, 2, 3]]), labels=np.array([1]))
    grads = model.backward()
    del grads["classifier.bias"]
    opt.step(grads)
    for n, p in model.named_parameters():
        assert id(p) == ids[n] and p.dtype == np.float32
    assert np.array_equal(model.state.params["classifier.bias"], before["classifier.bias"])
    assert not np.array_equal(model.state.params["classifier.weight"], before["classifier.weight"])


def test_errors_name_what_is_wrong():
    w = np.zeros((2, 3))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.AdamW([("w", w)], lr=-1)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([("w", w)], betas=(0.9, 1.5))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.AdamW([])
    with pytest.raises(TypeError, match="named_parameters"):
        optim.AdamW([w])
    with pytest.raises(KeyError, match="unknown options.*momentum"):
        optim.AdamW([{"params": [("w", w)], "momentum": 0.9}])
    with pytest.raises(ValueError, match="Invalid schedule parameter"):
        optim.BertAdam([("w", w)], lr=0.1, schedule="warmup_linaer")
    opt = optim.AdamW([("w", w)])
    with pytest.raises(ValueError, match="gradient of 'w' has shape \\(3, 2\\)"):
        opt.step({"w": np.zeros((3, 2))})
    with pytest.raises(TypeError, match="gradient of 'w' is float32"):
        opt.step({"w": np.zeros((2, 3), np.float32)})
    with pytest.raises(KeyError, match="does not hold.*'v'"):
        opt.step({"v": np.zeros(1)})
    other = optim.AdamW([("x", np.zeros(2))])
    with pytest.raises(ValueError, match="other parameters"):
        other.load_state_dict(opt.state_dict())


def test_clip_grad_norm_matches_the_formula():
    rng = np.random.default_rng(1)
    grads = {"a": rng.normal(size=(4, 5)), "b": rng.normal(size=3)}
    total = np.sqrt(sum((g ** 2).sum() for g in grads.values()))
    copy = {k: v.copy() for k, v in grads.items()}
    assert optim.clip_grad_norm_(grads, 1.0) == pytest.approx(total, rel=1e-14)
    for k in grads:   # every gradient scaled by max_norm / (total + 1e-6)
        np.testing.assert_allclose(grads[k], copy[k] * (1.0 / (total + 1e-6)), rtol=1e-14)
    small = {k: v * 1e-3 for k, v in copy.items()}
    kept = {k: v.copy() for k, v in small.items()}
    optim.clip_grad_norm_(small, 1.0)
    assert all(np.array_equal(small[k], kept[k]) for k in small)   # below max_norm: untouched
    assert optim.clip_grad_norm_({"a": np.array([3.0, -4.0])}, 10.0, norm_type="inf") == 4.0


def test_step_allocates_no_array_of_parameter_size():
    """The step's temporaries live in the preallocated scratch buffer: tracemalloc sees less than
    one parameter's worth of new memory during a second step (the first allocates the moments)."""
    import tracemalloc
    params = [("w", np.zeros((500, 500)))]
    opt = optim.AdamW(params, lr=1e-3)
    g = {"w": np.ones((500, 500))}
    opt.step(g)
    tracemalloc.start()
    opt.step(g)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 500 * 500 * 8 / 4, peak


def test_threaded_update_equals_the_single_thread_one():
    """A large parameter is updated in pieces on npbert's threads: the bytes are those of the
    update in one piece (elementwise work, split on fixed boundaries)."""
    from npbert.fast.parallel import get_num_threads, set_num_threads
    rng = np.random.default_rng(2)
    start, grads = rng.normal(size=(300, 700)).astype(np.float32), rng.normal(size=(300, 700)).astype(np.float32)
    results = []
    before = get_num_threads()
    try:
        for threads in (1, 3):
            set_num_threads(threads)
            for cls in (optim.AdamW, optim.Adam, optim.AdamWeightDecay):
                p = start.copy()
                opt = cls([("w", p)], lr=1e-2, weight_decay=0.1)
                for _ in range(3):
                    opt.step({"w": grads})
                results.append(p.tobytes())
    finally:
        set_num_threads(before)
    assert results[:3] == results[3:] and len(set(results)) == 3
