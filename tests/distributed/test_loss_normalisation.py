"""The global-mean normalisation, in one process: W ranks simulated by a loop over their shares,
the all-reduce by a sum.  For every head, the summed gradients of backward_global_mean equal
the gradient of the whole global batch's loss, and the per-rank mean (the usual bug) does not.
(test_mpi.py runs the same step over real MPI ranks.)"""
import numpy as np
import pytest

from npbert import distributed as dist
from distributed_helpers import HEADS, P, build_model, global_batch, slice_batch, step_sizes
from heads.head_helpers import analytically_zero, assert_grads_close, rel

# float64: the two sides add the same per-row terms in a different order (per share, then over
# shares) and scale by (n_r / N) / n_r instead of 1 / N: round-off of ~1e-16 per operation, a
# few 1e-15 after two layers.  1e-12 leaves room for that; a wrong normalisation changes
# gradients at the 1e-2 level (see the per-rank-mean test below).
TOL = 1e-12


def reference(kind, batch, dtype=np.float64):
    model = build_model(kind, dtype=dtype)
    out = model(**batch)
    return model.backward(), float(out["loss"])


def simulated(kind, batch, world_size, normalisation="global", per_device=P, dtype=np.float64):
    """Every rank's shares run in turn on one model; their gradients summed (the all-reduce)."""
    model = build_model(kind, dtype=dtype)
    G = len(next(iter(batch.values())))
    shares = {r: [s for s in dist.shard_global_batch(np.arange(G), per_device, world_size, r) if len(s.indices)]
              for r in range(world_size)}
    micro_steps = len(dist.shard_global_batch(np.arange(G), per_device, world_size, 0))
    local = {(r, i): dist.count_loss_items(model, slice_batch(batch, s.indices))
             for r in shares for i, s in enumerate(shares[r])}
    totals = dist.add_counts(local.values())
    grads, loss = None, 0.0
    for r in shares:
        for i, s in enumerate(shares[r]):
            b = slice_batch(batch, s.indices)
            out = model(**b)
            if normalisation == "global":
                g = dist.backward_global_mean(model, out, b, totals, local=local[r, i])
                loss += dist.loss_share(model, out, b, totals, local=local[r, i])
            else:
                g = model.backward(loss=1.0 / (world_size * micro_steps))
            grads = g if grads is None else {k: grads[k] + g[k] for k in grads}
    return grads, loss, totals


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("short", [False, True], ids=["full", "short"])
@pytest.mark.parametrize("kind", list(HEADS))
def test_summed_shares_equal_the_global_batch(kind, world_size, short):
    G = step_sizes(world_size)[1 if short else 0]
    batch = global_batch(kind, G, seed=7)
    want, want_loss = reference(kind, batch)
    got, got_loss, _ = simulated(kind, batch, world_size)
    assert_grads_close(got, want, zero=analytically_zero(want, HEADS[kind][0]), tol=TOL)
    assert abs(got_loss - want_loss) <= TOL * abs(want_loss), (got_loss, want_loss)


# float32: round-off of 6e-8 per operation, grown through two layers and by the other order of
# the sums to at most 1.3e-6 here (measured over every head, 2 and 3 ranks); 1e-5 bounds it, and a
# wrong normalisation is still 1e-2 away.
TOL32 = 1e-5


@pytest.mark.parametrize("kind", list(HEADS))
def test_float32_within_its_bound(kind):
    batch = global_batch(kind, step_sizes(3)[0], seed=7)
    want, want_loss = reference(kind, batch, np.float32)
    got, got_loss, _ = simulated(kind, batch, 3, dtype=np.float32)
    zero = analytically_zero(want, HEADS[kind][0])
    for name in want:
        assert got[name].dtype == np.float32
        if name in zero:    # round-off alone on both sides: judged against the layer's weight gradient
            scale = np.max(np.abs(want[name[:-len("bias")] + "weight"]))
            assert np.max(np.abs(got[name])) <= TOL32 * scale, name
        else:
            assert rel(got[name], want[name]) <= TOL32, f"{name}: {rel(got[name], want[name]):.2e}"
    assert abs(got_loss - want_loss) <= TOL32 * abs(want_loss)


@pytest.mark.parametrize("kind", ["pretraining", "masked_lm", "causal_lm", "token_classification",
                                  "question_answering"])
def test_the_per_rank_mean_is_not_the_global_mean(kind):
    """The shares of a full global batch hold uneven item counts; averaging the per-rank
    means weighs them wrongly: some gradient is off by far more than round-off."""
    batch = global_batch(kind, step_sizes(2)[0], seed=7)
    want, _ = reference(kind, batch)
    got, _, totals = simulated(kind, batch, 2, normalisation="per_rank_mean")
    worst = max(rel(got[k], want[k]) for k in want if k not in analytically_zero(want, HEADS[kind][0]))
    assert worst > 1e-3, f"{kind}: the per-rank mean is within {worst:.2e} of the global mean; the test batch " \
                         f"does not separate them (counts {totals})"


def test_a_share_without_masked_tokens():
    """A rank whose rows hold no masked token: its MLM mean is NaN (0 / 0), its share of the
    MLM gradient 0, its NSP share still counts."""
    batch = global_batch("pretraining", 8, seed=3)
    batch["labels"][:2] = -100                                   # rank 0's first micro-step: no MLM item
    want, want_loss = reference("pretraining", batch)
    got, got_loss, totals = simulated("pretraining", batch, 2)
    assert totals["masked_lm"] == int((batch["labels"] != -100).sum())
    assert_grads_close(got, want, zero=analytically_zero(want, "BertForPreTraining"), tol=TOL)
    assert abs(got_loss - want_loss) <= TOL * want_loss


def test_counts():
    """The items each loss averages over, counted as the model counts them."""
    model = build_model("pretraining")
    b = {"labels": np.array([[-100, 3, -100], [4, 5, -100]]), "next_sentence_label": np.array([0, -100])}
    assert dist.count_loss_items(model, b) == {"masked_lm": 3, "next_sentence": 1}
    causal = build_model("causal_lm")
    assert dist.count_loss_items(causal, {"labels": np.array([[7, 8, -100], [9, 9, 9]])}) == {"causal_lm": 3}
    qa = build_model("question_answering")
    b = {"input_ids": np.zeros((3, 8), dtype=np.int64), "start_positions": np.array([0, 8, 99]),
         "end_positions": np.array([[7], [3], [-4]])}
    assert dist.count_loss_items(qa, b) == {"start": 1, "end": 3}      # >= T is ignored, < 0 is clamped to 0
    reg = build_model("regression")
    assert dist.count_loss_items(reg, {"labels": np.zeros(5)}) == {"regression": 5}
    cls = build_model("classification")
    assert dist.count_loss_items(cls, {"labels": np.array([1, -100, 2])}) == {"classification": 2}
    assert cls.config.problem_type is None                           # counting does not set it


def test_unknown_model_and_missing_labels():
    model = build_model("pretraining")
    with pytest.raises(KeyError, match="next_sentence_label"):
        dist.count_loss_items(model, {"labels": np.zeros((1, 2), dtype=np.int64)})
    with pytest.raises(TypeError, match="BertModel computes no loss"):
        import npbert
        dist.count_loss_items(npbert.BertModel(npbert.BertConfig(**{**dict(vocab_size=29, hidden_size=8,
                              num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)})), {})
