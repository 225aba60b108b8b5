"""Benchmark: one optimizer step over bert-base's parameters (float32, the tutorials' two decay
groups), from two source trees (before and after a change), taking turns round by round so that
a shared machine's changing load falls on both alike.  Each tree runs in its own long-lived
process; the ratio printed is the median of the round-by-round ratios (second / first).

    git archive <commit> | tar -x -C /tmp/before
    python tests/bench/bench_optim_trees.py /tmp/before . [--optimizer AdamW] [--rounds 9] [--path fast]

--path reference runs the second tree's step on npbert's reference path (the first stays fast).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def worker(tree, optimizer, path):
    """Build bert-base's parameters, gradients and the optimizer from `tree`, then time one
    step() per line read from stdin."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NPBERT_NUM_THREADS"):
        os.environ[var] = "2"
    sys.path.insert(0, tree)
    import numpy as np

    import npbert
    from npbert import optim
    if path:
        npbert.set_path(path)
    model = npbert.BertModel(npbert.BertConfig(), dtype=np.float32)
    rng = np.random.default_rng(0)
    grads = {n: rng.standard_normal(p.shape, dtype=np.float32) * 1e-3 for n, p in model.named_parameters()}
    groups = optim.optimizer_grouped_parameters(model, weight_decay=0.01)
    kwargs = {"BertAdam": dict(lr=1e-4, warmup=0.1, t_total=1000)}.get(optimizer, dict(lr=1e-4))
    opt = getattr(optim, optimizer)(groups, **kwargs)
    opt.step(grads)                                          # warm-up: the moments and scratch allocated
    print("ready", flush=True)
    for _ in sys.stdin:
        t0 = time.perf_counter()
        opt.step(grads)
        print(time.perf_counter() - t0, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--optimizer", default="AdamW", choices=["AdamW", "Adam", "AdamWeightDecay", "BertAdam"])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--path", default="", choices=["", "fast", "reference"])
    p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        tree, optimizer, path = args.worker
        worker(tree, optimizer, path if path != "-" else "")
        return
    procs = []
    for tree, path in ((args.first, "fast"), (args.second, args.path or "fast")):
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        procs.append(subprocess.Popen([sys.executable, __file__, "x", "x", "--worker", os.path.abspath(tree),
                                       args.optimizer, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=env))
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    times = [[], []]
    for r in range(args.rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)             # alternate who goes first
        for i in order:
            procs[i].stdin.write("go\n")
            procs[i].stdin.flush()
            times[i].append(float(procs[i].stdout.readline()))
    for proc in procs:
        proc.stdin.close()
        proc.wait()
    ratios = [b / a for a, b in zip(*times)]
    print(f"{args.optimizer}.step() over bert-base's parameters (float32), {args.rounds} alternating rounds")
    print(f"  first  {args.first}: median {statistics.median(times[0]) * 1e3:7.1f} ms")
    print(f"  second {args.second}{' (' + args.path + ' path)' if args.path else ''}: "
          f"median {statistics.median(times[1]) * 1e3:7.1f} ms")
    print(f"  second / first: {statistics.median(ratios):.3f}x (rounds {min(ratios):.2f}..{max(ratios):.2f})")


if __name__ == "__main__":
    main()
