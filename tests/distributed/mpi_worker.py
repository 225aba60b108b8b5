"""Run by tests/distributed/test_mpi.py under `mpiexec -n N` (never by pytest directly).

    mpi_worker.py suite OUTDIR [DROPOUT]   every check that leaves the ranks running; each rank
                                           writes OUTDIR/rank<r>.json and .npz files for pytest
    mpi_worker.py raise-uncaught           the last rank raises in a guarded step; nobody catches it
    mpi_worker.py raise-unguarded          the last rank raises outside a guard, the others wait
    mpi_worker.py kill                     rank 1 is killed (SIGKILL) while the others all-reduce
"""
import json
import os
import signal
import sys

import numpy as np

import distributed_helpers as h
from npbert import distributed as dist
from npbert.fast import parallel


def save(outdir, name, rank, arrays):
    np.savez(os.path.join(outdir, f"{name}_rank{rank}.npz"), **arrays)


def expect_error(fn, *args, **kwargs):
    """The DistributedError message fn raised on this rank (every rank must raise it), or None."""
    try:
        fn(*args, **kwargs)
    except dist.DistributedError as e:
        return {"message": str(e), "ranks": sorted(e.errors)}
    return None


def suite(outdir, dropout):
    world = dist.init()
    W, r = world.world_size, world.rank
    res = {"rank": r, "world_size": W, "launcher": world.launcher, "threads": world.threads,
           "npbert_threads": parallel.get_num_threads()}
    getter = parallel._find_openblas_setter()[1]
    res["blas_threads"] = None if getter is None else int(getter())

    # 1. broadcast: every rank builds a different model; afterwards all hold rank 0's
    model = h.build_model("classification", seed=100 + r)
    dist.broadcast_parameters(model, world)
    save(outdir, "broadcast", r, h.params(model))
    res["rng_after_broadcast"] = float(model.state.rng.random())

    # 2. the bucketed all-reduce on integer-valued gradients: exact in float64 and float32
    for dtype in (np.float64, np.float32):
        m = h.build_model("pretraining", dtype=dtype)
        base = {n: (np.arange(p.size) % 7 + 1).reshape(p.shape).astype(dtype) for n, p in m.named_parameters()}
        grads = None if r == 0 else {n: (r + 1) * b for n, b in base.items()}       # rank 0: no example
        out = dist.allreduce_gradients(grads, m, world, bucket_bytes=4096)
        buckets = next(iter(world.gradient_buckets.values()))
        save(outdir, f"allreduce_{np.dtype(dtype).name}", r, out)
        res[f"allreduce_calls_{np.dtype(dtype).name}"] = buckets.calls
        res[f"buckets_{np.dtype(dtype).name}"] = [[e[0] for e in b] for b in buckets.buckets]
        res[f"same_arrays_{np.dtype(dtype).name}"] = grads is None or all(out[n] is grads[n] for n in grads)

    # 3. manual data-parallel steps of every head; per-rank-mean variant of some
    res["losses"] = {}
    for kind in h.HEADS:
        for normalisation in ("global", "per_rank_mean"):
            if normalisation == "per_rank_mean" and kind not in ("pretraining", "token_classification"):
                continue
            model = h.build_model(kind, seed=r, dropout=dropout)          # different on each rank ...
            dist.broadcast_parameters(model, world)                         # ... until rank 0's are broadcast
            opt = h.make_optimizer(model)
            losses = []
            for step, G in enumerate(h.step_sizes(W)):
                grads, loss = h.dp_step(model, opt, world, h.global_batch(kind, G, seed=step),
                                        normalisation=normalisation, dropout=dropout)
                losses.append(loss)
                if step == 0:
                    save(outdir, f"grads_{kind}_{normalisation}", r, grads)
            dist.check_same_parameters(model, world)
            save(outdir, f"params_{kind}_{normalisation}", r, h.params(model))
            res["losses"][f"{kind}_{normalisation}"] = losses

    # 4. sharded evaluation, gathered back in order on rank 0
    model = h.build_model("classification").eval()
    data = h.global_batch("classification", 11, seed=5)
    local = []
    for idx in dist.eval_batches(11, 2, W, r):
        out = model(**h.slice_batch(data, idx))
        local.append((idx, out["logits"], float(out["loss"]) * len(idx)))
    gathered = dist.gather_in_order(world, local)
    res["eval_batches"] = [len(b) for b in dist.eval_batches(11, 2, W, r)]
    if r == 0:
        save(outdir, "eval", r, {"indices": np.concatenate([g[0] for g in gathered]),
                                 "logits": np.concatenate([g[1] for g in gathered]),
                                 "loss_sums": np.array([g[2] for g in gathered])})
    else:
        res["gathered_elsewhere"] = gathered

    # 5. errors every rank raises together, caught here so that the run goes on
    def fail_on_last_rank():
        with world.guard("step 12"):
            if r == W - 1:
                raise ValueError("row 7 of the batch is broken (on purpose)")
    res["guard_error"] = expect_error(fail_on_last_rank)

    path = os.path.join(outdir, f"data_rank{r}.txt")
    with open(path, "w") as f:
        f.write("the same corpus\n" + ("but one line more\n" if r == 1 else ""))
    res["files_error"] = expect_error(world.check_same, {"train_file": dist.fingerprint_file(path),
                                                         "learning_rate": 1e-4}, what="the data")
    res["args_error"] = expect_error(world.check_same, {"learning_rate": 1e-4 if r else 2e-4, "seed": 42})
    res["same_ok"] = expect_error(world.check_same, {"learning_rate": 1e-4, "files": [dist.fingerprint_file(__file__)]})
    res["batches_error"] = expect_error(dist.plan_training, 100 - (r == W - 1), 2, 2, world)
    res["too_small_error"] = expect_error(dist.plan_training, W - 1, 2, 2, world)
    res["plan"] = dist.plan_training(17, 2, 2, world)

    def write_checkpoint(path):
        with open(path, "w") as f:
            f.write(f"written by rank {r}\n")
        return "written"
    res["run_on_main"] = world.run_on_main(write_checkpoint, os.path.join(outdir, "checkpoint.txt"))

    def full_disk():
        raise OSError(28, "No space left on device", os.path.join(outdir, "checkpoint-2"))
    res["disk_error"] = expect_error(world.run_on_main, full_disk, what="writing checkpoint-2")

    res["sum_dict"] = world.sum_dict({} if r == 0 else {"masked_lm": 10 * r, "next_sentence": 2})
    res["global_mean"] = world.global_mean(total=float(r + 1) * (r + 1), count=r + 1)   # rank r: r+1 items of r+1
    res["any_rank"] = [world.any_rank(r == W - 1), world.any_rank(False)]
    res["all_sum"] = [world.all_sum(r + 1), world.all_sum(0.5), world.all_sum(np.array([r, 1.0])).tolist()]
    with open(os.path.join(outdir, f"rank{r}.json"), "w") as f:
        json.dump(res, f)


def raise_uncaught():
    world = dist.init()
    with world.guard("step 3"):
        if world.rank == world.world_size - 1:
            raise FloatingPointError("the loss is nan at step 3 (on purpose)")
    print("not reached", flush=True)


def raise_unguarded():
    world = dist.init()
    if world.rank == world.world_size - 1:
        raise RuntimeError("a failure outside any guard (on purpose)")
    world.barrier()                                 # the others wait here for a rank that never comes
    print("not reached", flush=True)


def kill():
    world = dist.init()
    buffer = np.ones(1000)
    world.allreduce_(buffer)
    if world.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    world.allreduce_(buffer)                        # the others wait here for the killed rank
    print("not reached", flush=True)


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "suite":
        suite(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
    elif command == "raise-uncaught":
        raise_uncaught()
    elif command == "raise-unguarded":
        raise_unguarded()
    elif command == "kill":
        kill()
    else:
        raise SystemExit(f"unknown command {command}")
