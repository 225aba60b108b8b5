"""BertEncoder runs a batch of B >= 2 rows as two parts (rows [0, B//2) and [B//2, B)), side by
side on two threads (npbert.ops.parallel.side_by_side).  What must hold: the outputs are each
row's own (equal to running the rows in one piece), the gradients are the two parts' sums, the
numbers do not depend on the number of threads, dropout stays reproducible and advances the
model's generator by one draw, and errors in a part reach the caller.
"""
import threading

import numpy as np
import pytest

import npbert
import npbert.modeling.encoder as encoder_module
from npbert.ops import parallel

from bert_helpers import grad_scale, random_batch, random_model, tiny_config


@pytest.fixture
def threads():
    """Set npbert's thread count for a test; restored afterwards."""
    before = parallel.get_num_threads()
    yield parallel.set_num_threads
    parallel.set_num_threads(before)


def run(model, ids, types, mask, up_seed=5, **flags):
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, **flags)
    rng = np.random.default_rng(up_seed)
    up = {"last_hidden_state": rng.standard_normal(out.last_hidden_state.shape),
          "pooler_output": rng.standard_normal(out.pooler_output.shape)}
    if flags.get("output_hidden_states"):
        up["hidden_states"] = [rng.standard_normal(h.shape) for h in out.hidden_states]
    if flags.get("output_attentions"):
        up["attentions"] = [rng.standard_normal(a.shape) for a in out.attentions]
    return out, model.backward(**up), model.inputs_embeds_grad


def in_one_piece(monkeypatch):
    """Make BertEncoder run every batch as one part (the reference)."""
    monkeypatch.setattr(encoder_module.BertEncoder, "forward",
                        lambda self, h, *a, **k: self._forward_layers(h, *a, **k))


@pytest.mark.parametrize("B", [2, 3, 5])
def test_parts_give_each_rows_own_outputs_and_the_summed_gradients(monkeypatch, B):
    """float64, eval: the outputs (hidden states and attentions included) equal the one-piece
    run exactly (every op works row by row); the weight gradients are a sum of two GEMMs
    instead of one, so they agree to round-off: 1e-12 relative to the largest gradient entry of
    the same layer (key.bias's gradient is analytically 0, round-off on both sides)."""
    config = tiny_config(num_hidden_layers=3)
    ids, types, mask = random_batch(config, B, 6, seed=B)
    flags = dict(output_hidden_states=True, output_attentions=True)
    parts = run(random_model(config, seed=B), ids, types, mask, **flags)
    with monkeypatch.context() as m:
        in_one_piece(m)
        whole = run(random_model(config, seed=B), ids, types, mask, **flags)
    (out_p, g_p, _), (out_w, g_w, _) = parts, whole
    assert np.array_equal(out_p.last_hidden_state, out_w.last_hidden_state)
    assert np.array_equal(out_p.pooler_output, out_w.pooler_output)
    for a, b in zip(out_p.hidden_states + out_p.attentions, out_w.hidden_states + out_w.attentions):
        assert a.shape == b.shape and np.array_equal(a, b)
    assert list(g_p) == list(g_w)                                   # same names, same order
    for name in g_w:
        scale = grad_scale(g_w, name.split("attention.")[0].split("intermediate.")[0].split("output.")[0])
        assert np.abs(g_p[name] - g_w[name]).max() <= 1e-12 * scale, name


def test_a_single_row_runs_in_one_piece():
    model = random_model(tiny_config(), seed=1)
    ids, types, mask = random_batch(model.config, 1, 5)
    out, cache = model.forward(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert not isinstance(cache["encoder"], encoder_module._PartCaches)
    ids, types, mask = random_batch(model.config, 2, 5)
    out, cache = model.forward(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert isinstance(cache["encoder"], encoder_module._PartCaches)
    assert cache["encoder"].bounds == ((0, 1), (1, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_numbers_do_not_depend_on_the_thread_count(threads, dtype):
    """With dropout on: 1 thread (parts one after the other), 2 (side by side) and 4 (one after
    the other, each op split over 4 threads) give bit-identical outputs and gradients."""
    config = tiny_config(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3, num_hidden_layers=2)
    ids, types, mask = random_batch(config, 6, 7, seed=3)
    results = []
    for n in (1, 2, 4):
        threads(n)
        model = random_model(config, seed=3, dtype=dtype).train()
        out, grads, _ = run(model, ids, types, mask)
        results.append((out.last_hidden_state, grads, model.state.rng.bit_generator.state))
    for other in results[1:]:
        assert np.array_equal(results[0][0], other[0])
        assert all(np.array_equal(results[0][1][k], other[1][k]) for k in results[0][1])
        assert results[0][2] == other[2]


def test_dropout_per_part_is_reproducible_and_advances_the_models_generator_by_one_draw():
    config = tiny_config(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    ids, types, mask = random_batch(config, 4, 6, seed=4)
    model = random_model(config, seed=4).train()
    state = model.state.rng.bit_generator.state
    first = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    model.state.rng.bit_generator.state = state
    again = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    assert np.array_equal(first, again)                                 # same generator state: same masks
    # The encoder takes exactly one draw (its parts' seed) from the model's generator:
    draws = []
    original = model.encoder._part_generators

    def counting(n):
        before = model.state.rng.bit_generator.state
        gens = original(n)
        probe = np.random.Generator(np.random.PCG64())
        probe.bit_generator.state = before
        probe.bit_generator.random_raw()
        draws.append(probe.bit_generator.state == model.state.rng.bit_generator.state)
        return gens
    model.encoder._part_generators = counting
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert draws == [True]
    # eval: no draw at all
    model.eval()
    before = model.state.rng.bit_generator.state
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert model.state.rng.bit_generator.state == before


def test_the_part_generator_is_seen_only_in_its_own_thread():
    state = random_model(tiny_config()).state
    own, mine = state.rng, np.random.default_rng(9)
    seen = {}
    with state.part_rng(mine):
        t = threading.Thread(target=lambda: seen.setdefault("other", state.rng))
        t.start()
        t.join()
        seen["here"] = state.rng
    assert seen["here"] is mine and seen["other"] is own and state.rng is own


def test_mask_broadcast_over_the_batch_stays_whole():
    mask = np.zeros((1, 1, 1, 5))
    assert encoder_module._rows(mask, 2, 4) is mask
    assert encoder_module._rows(np.zeros((5,)), 2, 4).shape == (5,)
    full = np.arange(4 * 5.0).reshape(4, 1, 1, 5)
    assert np.array_equal(encoder_module._rows(full, 2, 4), full[2:4])


def test_side_by_side_runs_tasks_together_and_restores_blas(threads):
    threads(2)
    barrier = threading.Barrier(2, timeout=10)        # both tasks must be running at once to pass it

    def task(k):
        barrier.wait()
        return k, parallel._local.inline
    assert parallel.side_by_side([lambda: task(0), lambda: task(1)]) == [(0, True), (1, True)]
    assert not getattr(parallel._local, "inline", False)
    setter, getter = parallel._find_openblas_setter()
    if getter is not None:
        before = getter()
        assert parallel.side_by_side([lambda: getter(), lambda: getter()]) == [1, 1]
        assert getter() == before


def test_side_by_side_one_after_the_other_on_one_thread(threads):
    threads(1)
    order = []
    assert parallel.side_by_side([lambda: order.append(0) or 0, lambda: order.append(1) or 1]) == [0, 1]
    assert order == [0, 1]


def test_an_error_in_a_part_reaches_the_caller_after_both_end(threads):
    threads(2)
    finished = []

    def slow():
        import time
        time.sleep(0.05)
        finished.append("slow")
        return 1

    def bad():
        raise ValueError("part 1 failed")
    with pytest.raises(ValueError, match="part 1 failed"):
        parallel.side_by_side([slow, bad])
    assert finished == ["slow"]
    with pytest.raises(ValueError, match="part 0 failed"):
        parallel.side_by_side([lambda: (_ for _ in ()).throw(ValueError("part 0 failed")), slow])
    assert finished == ["slow", "slow"]                # the other task ran to its end first


def test_bad_input_in_a_part_is_reported_as_without_parts():
    """A wrong-shaped upstream gradient still raises the model's own message."""
    model = random_model(tiny_config(), seed=2)
    ids, types, mask = random_batch(model.config, 4, 5)
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    with pytest.raises(ValueError, match="last_hidden_state"):
        model.backward(last_hidden_state=np.zeros((4, 5, 3)))
