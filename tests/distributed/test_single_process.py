"""npbert.distributed without MPI: detection, the one-process world (the same methods, each
the identity), the bucket plan, the sharding of batches, threads per rank.  None of these
needs mpi4py; the first checks that nothing imports it."""
import os
import subprocess
import sys

import numpy as np
import pytest

from npbert import distributed as dist
from npbert.distributed import launch as launch_module
from npbert.training import Trainer, TrainingArguments
import distributed_helpers as h

LAUNCHER_VARS = ("OMPI_", "PMIX_", "PMI_", "PRTE_", "MV2_", "SLURM_", "NPBERT_DISTRIBUTED")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
    env.update(PYTHONPATH=h.ROOT, **extra)
    return env


def test_importing_npbert_and_distributed_does_not_import_mpi4py():
    code = ("import sys, npbert, npbert.distributed as d; w = d.init(); "
            "print(type(w).__name__, w.world_size, 'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["SingleProcess", "1", "False"]


def test_a_launcher_without_mpi4py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)               # `import mpi4py` now fails
    monkeypatch.setattr(launch_module, "_world", None)
    with pytest.raises(ImportError, match=r'pip install "npbert\[mpi\]"') as e:
        dist.init(environ={"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"})
    assert "Open MPI's mpiexec" in str(e.value) and "NPBERT_DISTRIBUTED=0" in str(e.value)
    assert launch_module._world is None                               # nothing half-initialised


@pytest.mark.parametrize("environ,found", [
    ({}, None),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, "Open MPI"),
    ({"PMI_SIZE": "2", "PMI_RANK": "1"}, "MPICH"),
    ({"PMIX_RANK": "0"}, "PMIx"),
    ({"MV2_COMM_WORLD_SIZE": "2"}, "MVAPICH2"),
    ({"SLURM_STEP_NUM_TASKS": "8", "SLURM_PROCID": "3"}, "srun"),
    ({"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, None),     # an sbatch script: one process
    ({"OMPI_COMM_WORLD_SIZE": "4", "NPBERT_DISTRIBUTED": "0"}, None),
    ({"NPBERT_DISTRIBUTED": "1"}, "NPBERT_DISTRIBUTED=1"),
])
def test_detect_launcher(environ, found):
    got = dist.detect_launcher(environ)
    assert got is None if found is None else found in got


def test_detection_details():
    with pytest.raises(ValueError, match="NPBERT_DISTRIBUTED='maybe'"):
        dist.detect_launcher({"NPBERT_DISTRIBUTED": "maybe"})
    assert dist.launcher_world_size({"OMPI_COMM_WORLD_SIZE": "3"}) == 3
    assert dist.launcher_world_size({"SLURM_STEP_NUM_TASKS": "16"}) == 16
    assert dist.launcher_world_size({"PMIX_RANK": "0"}) is None


def test_the_single_process_world_is_the_identity():
    w = dist.SingleProcess()
    assert (w.rank, w.world_size, w.is_main_process) == (0, 1, True)
    assert w.all_sum(3) == 3 and isinstance(w.all_sum(3), int) and w.all_sum(2.5) == 2.5
    a = np.arange(3.0)
    assert np.array_equal(w.all_sum(a), a) and w.allreduce_(a) is a
    assert w.global_mean(6.0, 4) == 1.5 and np.isnan(w.global_mean(0.0, 0))
    assert w.any_rank(True) is True and w.any_rank(0) is False
    assert w.sum_dict({"b": 2, "a": 1}) == {"a": 1, "b": 2}
    assert w.gather_object("x") == ["x"] and w.all_gather_object(1) == [1] and w.broadcast_object(5) == 5
    w.check_same({"anything": object()})                           # nothing to compare with
    with pytest.raises(TypeError, match="C-contiguous"):
        w.allreduce_(np.arange(6.0)[::2])
    # errors keep their own type on one process: nothing to coordinate
    with pytest.raises(FloatingPointError, match="nan"):
        with w.guard("step 1"):
            raise FloatingPointError("the loss is nan")
    with pytest.raises(OSError, match="No space"):
        w.run_on_main(lambda: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    assert w.run_on_main(lambda x: x + 1, 1) == 2


def test_allreduce_on_one_process_checks_and_leaves_the_gradients():
    model = h.build_model("classification")
    w = dist.SingleProcess()
    grads = model(**h.global_batch("classification", 4, seed=0)) and model.backward()
    before = {k: v.copy() for k, v in grads.items()}
    assert dist.allreduce_gradients(grads, model, w) is grads
    assert all(np.array_equal(grads[k], before[k]) for k in grads)
    zeros = dist.allreduce_gradients(None, model, w)                # a rank with no example: zeros
    assert list(zeros) == list(grads) and all(not v.any() for v in zeros.values())
    with pytest.raises(KeyError, match="missing"):
        dist.allreduce_gradients({k: v for k, v in list(grads.items())[1:]}, model, w)
    model.freeze("bert.embeddings")                                  # a new plan: the frozen ones are left out
    plan = dist.GradientBuckets.for_model(model)
    assert not any(n.startswith("bert.embeddings") for n in plan.shapes)


def test_the_bucket_plan():
    shapes = [("a", (10,)), ("b", (3, 4)), ("big", (100,)), ("c", (5,)), ("d", (2,))]
    plan = dist.GradientBuckets(shapes, np.float64, bucket_bytes=8 * 24)            # 24 values a bucket
    assert [[e[0] for e in b] for b in plan.buckets] == [["a", "b"], ["big"], ["c", "d"]]
    assert [e[1:3] for e in plan.buckets[0]] == [(0, 10), (10, 22)]
    assert plan.nbytes == 8 * 129
    with pytest.raises(ValueError, match="at least one"):
        dist.GradientBuckets(shapes, np.float64, bucket_bytes=4)


def test_split_evenly_and_shares():
    assert dist.split_evenly(7, 3) == [(0, 2), (2, 4), (4, 7)]
    assert dist.split_evenly(2, 3) == [(0, 0), (0, 1), (1, 2)]
    batch = np.arange(100, 113)                                     # a short global batch of 13
    shares = [dist.shard_global_batch(batch, 2, 3, r) for r in range(3)]
    assert len({len(s) for s in shares}) == 1                       # every rank: the same number of micro-steps
    # full micro-steps: rank r has rows r*P .. r*P + P - 1 of each; the short last one is split evenly
    assert [(s.start, s.indices.tolist()) for s in shares[1]] == [(2, [102, 103]), (8, [108, 109]), (12, [])]
    assert [(s.start, s.indices.tolist()) for s in shares[2]] == [(4, [104, 105]), (10, [110, 111]), (12, [112])]
    rows = sorted((s.start, i) for r in shares for s in r for i in s.indices)
    assert [i for _, i in rows] == batch.tolist()                   # nothing dropped, nothing twice, in order
    for r in shares:
        for s in r:
            assert s.indices.tolist() == batch[s.start:s.start + len(s.indices)].tolist()
            assert s.indices.tolist() == s.micro[s.offset:s.offset + len(s.indices)].tolist()
    assert [s.micro.tolist() for s in shares[2]] == [[100 + i for i in range(a, min(a + 6, 13))] for a in (0, 6, 12)]
    with pytest.raises(ValueError):
        dist.shard_global_batch(batch, 2, 3, 3)


@pytest.mark.parametrize("drop_last", [False, True])
def test_one_rank_makes_the_trainers_batches(drop_last):
    """With W = 1 the Trainer's global batches, cut into micro-steps, are the epoch permutation
    cut into batches of P, A of them per update (the last update shorter; drop_last leaves out
    the incomplete batch), and plan_training counts its updates."""
    n, P, A, seed = 23, 3, 3, 5                                       # 8 batches (7 full) -> 3 updates
    args = TrainingArguments("unused", per_device_train_batch_size=P, gradient_accumulation_steps=A, seed=seed,
                             dataloader_drop_last=drop_last)
    trainer = Trainer(h.build_model("classification"), args, train_dataset=[{}] * n)
    for epoch in range(2):
        order = np.random.default_rng([seed, epoch]).permutation(n)
        cut = n // P * P if drop_last else n
        batches = [order[i:min(i + P, cut)] for i in range(0, cut, P)]
        updates = [batches[u:u + A] for u in range(0, len(batches), A)]
        ours = [[s.indices for s in dist.shard_global_batch(g, P, 1, 0)] for g in trainer._epoch_batches(epoch, n)]
        assert len(ours) == len(updates) == trainer._plan()[1]
        for mine, theirs in zip(ours, updates):
            assert [m.tolist() for m in mine] == [t.tolist() for t in theirs]
    assert dist.plan_training(n, P, A, dist.SingleProcess(), drop_last)["updates_per_epoch"] == trainer._plan()[1]


def test_global_batches_with_drop_last():
    """4 ranks x 2 per device: micro-steps of 8; 2 accumulation steps: global batches of 16."""
    full = dist.global_batches(30, 2, 4, 2, seed=1, epoch=0)
    assert [len(g) for g in full] == [16, 14]
    dropped = dist.global_batches(30, 2, 4, 2, seed=1, epoch=0, drop_last=True)
    assert [len(g) for g in dropped] == [16, 8]                        # the 6 past the third micro-step left out
    assert np.array_equal(np.concatenate(dropped), np.concatenate(full)[:24])


def test_eval_batches_are_the_one_process_batches():
    n, bs = 11, 2
    for W in (1, 2, 3, 4):
        runs = [dist.eval_batches(n, bs, W, r) for r in range(W)]
        flat = [b.tolist() for run in runs for b in run]
        assert flat == [list(range(s, min(s + bs, n))) for s in range(0, n, bs)]
        assert max(map(len, runs)) - min(map(len, runs)) <= 1
    assert dist.gather_in_order(dist.SingleProcess(), [1, 2]) == [1, 2]


def test_plan_training_on_one_process():
    w = dist.SingleProcess()
    assert dist.plan_training(10, 2, 3, w) == {"global_batch_size": 6, "updates_per_epoch": 2}
    assert dist.plan_training(10, 2, 3, w, drop_last=True)["updates_per_epoch"] == 2     # 5 micro-steps: 3 + 2
    assert dist.plan_training(11, 2, 3, w, drop_last=True)["updates_per_epoch"] == 2
    # one process: the Trainer's words (batches, not ranks and micro-steps)
    with pytest.raises(ValueError, match=r"has 1 examples: not one batch of 2 \(dataloader_drop_last\)"):
        dist.plan_training(1, 2, 3, w, drop_last=True)
    with pytest.raises(ValueError, match="has 0 examples: not one batch of 2$"):
        dist.plan_training(0, 2, 3, w)


@pytest.mark.parametrize("mine,local,want", [
    ([0, 1], [[0, 1], [0, 1]], 1),                                   # 2 ranks share 2 cores
    ([0], [[0], [1]], 1),                                            # bound to a core each
    (list(range(8)), [list(range(8)), list(range(8, 16))] * 2, 4),   # 4 ranks, 2 sockets of 8
    ([0, 1], [[0, 1]] * 3, 1),                                       # 3 ranks oversubscribe 2 cores
    (list(range(16)), [list(range(16))], 16),                        # one rank alone on its machine
])
def test_threads_per_rank(mine, local, want):
    assert dist.threads_per_rank(mine, local) == want


def test_configure_threads_respects_overrides(monkeypatch):
    from npbert.fast import parallel
    before = parallel.get_num_threads()
    setter, getter = parallel._find_openblas_setter()
    blas_before = getter() if getter is not None else None
    try:
        w = dist.SingleProcess()
        got = dist.configure_threads(w, threads=None, environ={"NPBERT_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"})
        assert got["npbert"] == before and "NPBERT_NUM_THREADS" in got["how"] and "OMP_NUM_THREADS" in got["how"]
        got = dist.configure_threads(w, threads=1, environ={})
        assert got["npbert"] == 1 and parallel.get_num_threads() == 1
        if got["blas"] is not None:
            assert got["blas"] == 1
        with pytest.raises(ValueError, match=">= 1"):
            dist.configure_threads(w, threads=0)
    finally:
        parallel.set_num_threads(before)
        if setter is not None:
            setter(blas_before)


def test_fingerprint_file(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"same")
    b.write_bytes(b"same")
    fa, fb = dist.fingerprint_file(str(a)), dist.fingerprint_file(str(b))
    assert fa["size"] == 4 and fa["sha256"] == fb["sha256"] and fa["path"] == "a.txt"
    from npbert.distributed.world import _describe
    assert _describe(fa)[0] == _describe(fb)[0]                      # the content decides, not the name
    b.write_bytes(b"diff")
    assert _describe(dist.fingerprint_file(str(b)))[0] != _describe(fa)[0]
