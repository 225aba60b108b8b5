"""Benchmark: data-parallel training steps over MPI against one process, same global batch (issue 25).

Two steps, as bench_train_step.py builds them (random ids, a quarter of the rows half padded):
- demo: the demo's pre-training model (BertForPreTraining, 2 layers, hidden 128, vocab 2000),
  global batch 32 x 64, MLM at 15 % of the positions (gathered, the demo's default) + NSP;
- minilm: a sequence classifier the size of all-MiniLM-L6-v2 (6 layers, hidden 384, vocab
  30522), global batch 16 x 64.
--loop trainer (the default) times the Trainer's optimizer steps, what `npbert pretrain` and
`npbert finetune` run (collation of the micro-step, this rank's forward and backward with the
global normalisation, the bucketed all-reduce, clip, AdamW); --loop manual the hand-written
loop of docs/data_parallel.md (and --three: 3 ranks, which the Trainer's even global batches
here do not allow).

Runners, taking turns round by round: 1 process x 2 threads (NPBERT_NUM_THREADS and OpenBLAS 2),
`mpiexec -n 2` (1 thread each, as npbert.distributed decides on 2 cores), and with --three
`mpiexec -n 3 --oversubscribe` on the 2 cores.  Printed: the load average, median ms per step,
the all-reduce's ms per step and its share, and the ratio to the 1-process step (median of
per-round ratios).

    python tests/bench/bench_data_parallel.py                     # both steps, the Trainer, 3 rounds
    python tests/bench/bench_data_parallel.py --steps demo --rounds 5 --loop manual --three
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path[:0] = [HERE, ROOT]

SPECS = {
    "demo": dict(layers=2, hidden=128, heads=2, intermediate=512, vocab=2000, batch=32, seq=64, pretraining=True),
    "minilm": dict(layers=6, hidden=384, heads=12, intermediate=1536, vocab=30522, batch=16, seq=64,
                   pretraining=False),
}


def worker(spec_name, steps):
    """One runner: `steps` timed steps after one warm-up; rank 0 prints a JSON line."""
    import numpy as np

    import npbert
    from npbert import distributed as dist
    from npbert import optim
    from npbert.fast import parallel
    world = dist.init()                 # first: bench_train_step's import sets NPBERT_NUM_THREADS=2 if unset
    import bench_train_step as ts
    spec = SPECS[spec_name]
    cls = npbert.BertForPreTraining if spec["pretraining"] else npbert.BertForSequenceClassification
    extra = {} if spec["pretraining"] else {"num_labels": 2}
    model = cls(npbert.BertConfig(**ts.config_kwargs(spec), **extra), dtype=np.float32).train()
    model.config.gather_masked_lm = True
    dist.broadcast_parameters(model, world)
    opt = optim.AdamW(optim.optimizer_grouped_parameters(model, weight_decay=0.01), lr=1e-4)
    G = spec["batch"]
    P = -(-G // world.world_size)
    step_ms, reduce_ms = [], []
    for i in range(steps + 1):
        data = ts.batch(spec, spec["pretraining"], seed=i)
        shares = [s for s in dist.shard_global_batch(np.arange(G), P, world.world_size, world.rank) if len(s.indices)]
        world.barrier()
        t0 = time.perf_counter()
        batches = [{k: v[s.indices] for k, v in data.items()} for s in shares]
        local = [dist.count_loss_items(model, b) for b in batches]
        totals = world.sum_dict(dist.add_counts(local))
        grads = None
        with world.guard(f"step {i}"):
            for b, n in zip(batches, local):
                g = dist.backward_global_mean(model, model(**b), b, totals, local=n)
                grads = g if grads is None else {k: grads[k] + g[k] for k in grads}
        world.barrier()                                          # (the wait for the slowest rank is not the all-reduce's)
        t1 = time.perf_counter()
        grads = dist.allreduce_gradients(grads, model, world)
        t2 = time.perf_counter()
        optim.clip_grad_norm_(grads, 1.0)
        opt.step(grads)
        t3 = time.perf_counter()
        if i:                                                    # the first step warms up
            step_ms.append((t3 - t0) * 1e3)
            reduce_ms.append((t2 - t1) * 1e3)
    if world.is_main_process:
        buckets = next(iter(world.gradient_buckets.values()), None)
        print(json.dumps({"ranks": world.world_size, "threads": parallel.get_num_threads(),
                          "step_ms": statistics.median(step_ms), "allreduce_ms": statistics.median(reduce_ms),
                          "allreduce_bytes": None if buckets is None else buckets.nbytes}), flush=True)


def trainer_worker(spec_name, steps):
    """One runner of the Trainer (what `npbert pretrain` / `finetune` run): Trainer.train() over
    steps + 1 global batches of the spec's size; each optimizer step (collation, forward,
    backward, all-reduce, clip, AdamW) timed around the Trainer's update; rank 0 prints a JSON line."""
    import tempfile

    import numpy as np

    import npbert
    from npbert import distributed as dist
    from npbert.fast import parallel
    world = dist.init()
    import bench_train_step as ts
    from npbert.training import Trainer, TrainingArguments
    spec = SPECS[spec_name]
    cls = npbert.BertForPreTraining if spec["pretraining"] else npbert.BertForSequenceClassification
    extra = {} if spec["pretraining"] else {"num_labels": 2}
    model = cls(npbert.BertConfig(**ts.config_kwargs(spec), **extra), dtype=np.float32).train()
    model.config.gather_masked_lm = True
    G, W = spec["batch"], world.world_size
    if G % W:
        raise SystemExit(f"the Trainer runner needs a global batch ({G}) that {W} ranks share evenly")
    data = [ts.batch(spec, spec["pretraining"], seed=i) for i in range(steps + 1)]
    examples = [{k: v[j] for k, v in d.items()} for d in data for j in range(G)]
    out = world.broadcast_object(tempfile.mkdtemp(prefix="bench-dp-") if world.is_main_process else None)
    args = TrainingArguments(out, per_device_train_batch_size=G // W, max_steps=steps + 1, save_strategy="no",
                             logging_steps=1000, plot=False, learning_rate=1e-4, warmup_ratio=0.0)
    trainer = Trainer(model, args, train_dataset=examples)
    trainer._epoch_batches = lambda epoch, n: [np.arange(i, min(i + G, n)) for i in range(0, n, G)]   # in order
    step_ms, reduce_ms = [], []
    allreduce = dist.gradients.GradientBuckets.allreduce_

    def timed_allreduce(self, grads, w):
        t0 = time.perf_counter()
        result = allreduce(self, grads, w)
        reduce_ms.append((time.perf_counter() - t0) * 1e3)
        return result
    dist.gradients.GradientBuckets.allreduce_ = timed_allreduce
    def timed(update):
        def run(*a):
            t0 = time.perf_counter()
            result = update(*a)
            step_ms.append((time.perf_counter() - t0) * 1e3)
            return result
        return run
    trainer._update = timed(trainer._update)
    trainer.train()
    if world.is_main_process:
        shutil.rmtree(out, ignore_errors=True)
        buckets = next(iter(world.gradient_buckets.values()), None)
        print(json.dumps({"ranks": W, "threads": parallel.get_num_threads(),
                          "step_ms": statistics.median(step_ms[1:]),
                          "allreduce_ms": statistics.median(reduce_ms[1:]) if reduce_ms else 0.0,
                          "allreduce_bytes": None if buckets is None else buckets.nbytes}), flush=True)


def launch(spec_name, ranks, steps, loop="manual"):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "PRTE_"))}
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(ROOT), HERE])
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", spec_name, "--worker_steps", str(steps),
           "--loop", loop]
    if ranks == 1:
        env.update(NPBERT_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    else:
        for var in ("NPBERT_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
            env.pop(var, None)                                   # npbert.distributed decides: cores / ranks
        mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
        mpiexec = mpiexec if os.path.exists(mpiexec) else shutil.which("mpiexec")
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        # --oversubscribe only with more ranks than cores: it makes Open MPI yield the core while it
        # waits for a message, and each hop of an all-reduce then waits for the scheduler (measured
        # here: 3 MB in 60 ms instead of 0.5 ms with 2 ranks on 2 busy cores)
        over = ["--oversubscribe"] if ranks > (os.cpu_count() or 1) else []
        cmd = [mpiexec, "-n", str(ranks), *over, *root] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", default="demo,minilm")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps_per_run", type=int, default=5)
    p.add_argument("--three", action="store_true", help="also 3 ranks (oversubscribing 2 cores)")
    p.add_argument("--loop", choices=("trainer", "manual"), default="trainer",
                   help="time the Trainer's steps (what npbert pretrain/finetune run) or the manual loop of "
                        "docs/data_parallel.md")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker_steps", type=int, default=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return (trainer_worker if args.loop == "trainer" else worker)(args.worker, args.worker_steps)
    runners = [1, 2] + ([3] if args.three else [])
    if args.three and args.loop == "trainer":
        p.error("--three needs --loop manual (the global batches of 32 and 16 rows do not split into 3 equal shares)")
    for name in args.steps.split(","):
        spec = SPECS[name]
        results = {r: [] for r in runners}
        for _ in range(args.rounds):
            for r in runners:
                results[r].append(launch(name, r, args.steps_per_run, args.loop))
        load = os.getloadavg()[0]
        print(f"\n{name} ({args.loop} loop): {spec}, {args.rounds} rounds x {args.steps_per_run} steps; "
              f"load average {load:.1f} on {os.cpu_count()} cores")
        for r in runners:
            step = statistics.median(x["step_ms"] for x in results[r])
            red = statistics.median(x["allreduce_ms"] for x in results[r])
            ratio = statistics.median(x["step_ms"] / y["step_ms"] for x, y in zip(results[r], results[1]))
            mb = results[r][0]["allreduce_bytes"] / 1e6 if results[r][0]["allreduce_bytes"] else 0.0
            # a ring all-reduce sends 2 (N - 1) / N of the buffer from each rank: at 10 Gb/s, 1.25e9 bytes/s
            ring = 2 * (r - 1) / r * mb * 1e6 / 1.25e9 * 1e3
            print(f"  {r} rank{'s' if r > 1 else ''} x {results[r][0]['threads']} thread(s): {step:8.1f} ms/step, "
                  f"all-reduce {red:6.1f} ms ({100 * red / step:4.1f} %, {mb:.1f} MB; {ring:.0f} ms over 10 Gb/s), "
                  f"time / 1-process time {ratio:.2f}")


if __name__ == "__main__":
    main()
