"""The fast path's BertEncoder (npbert/modeling/halves.py) runs a batch of B >= 2
rows as two halves (rows [0, B//2) and [B//2, B)), side by side on two threads
(npbert.fast.parallel.side_by_side).  What must hold: the outputs are each row's own (equal to
running the rows in one piece, with dropout on too: each row's masks are keyed by its global
index), the gradients are the two halves' sums, the numbers do not depend on the number of
threads, a forward takes one draw from the model's generator, and errors in a half reach the
caller.  Also here: model.batch_offset, the data-parallel share of a global batch.
"""
import threading

import numpy as np
import pytest

import npbert
import npbert.modeling.halves as halves_module
from npbert.modeling.encoder import BertEncoder
from npbert.fast import parallel

from modeling.bert_helpers import grad_scale, random_batch, random_model, tiny_config

pytestmark = pytest.mark.usefixtures("fast_path")


@pytest.fixture
def fast_path():
    with npbert.using_path("fast"):
        yield


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
    """Make the fast encoder run every batch as one piece (the comparison)."""
    monkeypatch.setattr(BertEncoder, "forward", lambda self, h, *a, **k: self.forward_layers(h, *a, **k))


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("B", [2, 3, 5])
def test_halves_give_each_rows_own_outputs_and_the_summed_gradients(monkeypatch, B, training):
    """float64: the outputs (hidden states and attentions included) equal the one-piece run
    exactly, in eval and with dropout on (every op works row by row, and each row's dropout
    masks are keyed by its global index); the weight gradients are a sum of two GEMMs instead
    of one, so they agree to round-off: 1e-12 relative to the largest gradient entry of the
    same layer (key.bias's gradient is analytically 0, round-off on both sides)."""
    config = tiny_config(num_hidden_layers=3, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    ids, types, mask = random_batch(config, B, 6, seed=B)
    flags = dict(output_hidden_states=True, output_attentions=True)
    halves = run(random_model(config, seed=B).train(training), ids, types, mask, **flags)
    with monkeypatch.context() as m:
        in_one_piece(m)
        whole = run(random_model(config, seed=B).train(training), ids, types, mask, **flags)
    (out_h, g_h, _), (out_w, g_w, _) = halves, whole
    assert np.array_equal(out_h.last_hidden_state, out_w.last_hidden_state)
    assert np.array_equal(out_h.pooler_output, out_w.pooler_output)
    for a, b in zip(out_h.hidden_states + out_h.attentions, out_w.hidden_states + out_w.attentions):
        assert a.shape == b.shape and np.array_equal(a, b)
    assert list(g_h) == list(g_w)                                   # same names, same order
    for name in g_w:
        scale = grad_scale(g_w, name.split("attention.")[0].split("intermediate.")[0].split("output.")[0])
        assert np.abs(g_h[name] - g_w[name]).max() <= 1e-12 * scale, name


def test_a_single_row_runs_in_one_piece():
    model = random_model(tiny_config(), seed=1)
    ids, types, mask = random_batch(model.config, 1, 5)
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert not isinstance(model._cache["encoder"], halves_module.HalfCaches)
    ids, types, mask = random_batch(model.config, 2, 5)
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert isinstance(model._cache["encoder"], halves_module.HalfCaches)
    assert model._cache["encoder"].bounds == ((0, 1), (1, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_numbers_do_not_depend_on_the_thread_count(threads, dtype):
    """With dropout on: 1 thread (halves one after the other), 2 (side by side) and 4 (one after
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


def test_mask_broadcast_over_the_batch_stays_whole():
    mask = np.zeros((1, 1, 1, 5))
    assert halves_module._rows(mask, 2, 4) is mask
    assert halves_module._rows(np.zeros((5,)), 2, 4).shape == (5,)
    full = np.arange(4 * 5.0).reshape(4, 1, 1, 5)
    assert np.array_equal(halves_module._rows(full, 2, 4), full[2:4])


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


def test_an_error_in_a_half_reaches_the_caller_after_both_end(threads):
    threads(2)
    finished = []

    def slow():
        import time
        time.sleep(0.05)
        finished.append("slow")
        return 1

    def bad():
        raise ValueError("half 1 failed")
    with pytest.raises(ValueError, match="half 1 failed"):
        parallel.side_by_side([slow, bad])
    assert finished == ["slow"]
    with pytest.raises(ValueError, match="half 0 failed"):
        parallel.side_by_side([lambda: (_ for _ in ()).throw(ValueError("half 0 failed")), slow])
    assert finished == ["slow", "slow"]                # the other task ran to its end first


def test_bad_input_in_a_half_is_reported_as_without_halves():
    """A wrong-shaped upstream gradient still raises the model's own message."""
    model = random_model(tiny_config(), seed=2)
    ids, types, mask = random_batch(model.config, 4, 5)
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    with pytest.raises(ValueError, match="last_hidden_state"):
        model.backward(last_hidden_state=np.zeros((4, 5, 3)))
