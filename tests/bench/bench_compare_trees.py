"""Benchmark: the same npbert step from two source trees (say, before and after a change), and
the NumPy GEMM floor, taking turns run by run, so that a shared machine's changing load falls
on all alike.  Each side runs in its own long-lived process (2 threads each), built from that
tree's own benchmark runners; the ratios printed are medians of round-by-round ratios, of wall
time and of CPU time.

    git worktree add /tmp/before <commit>          # or: git archive <commit> | tar -x -C /tmp/before
    python tests/bench/bench_compare_trees.py /tmp/before . --step bert-base-train --rounds 7
    python tests/bench/bench_compare_trees.py /tmp/before . --step finetune           # MiniLM fine-tuning step
    python tests/bench/bench_compare_trees.py /tmp/before . --step finetune --style torch

Calibrate before trusting a few per cent: the same tree on both sides (an A/A run) measured
after / before 1.06x in wall time and 1.02x in CPU time on this 2-core machine, bert-base-train,
6 rounds, even with the order reversed every other round.  A difference smaller than that is
not one.

--style torch (finetune, pretrain) runs the second tree's step as the tutorials write it,
loss.backward(); clip_grad_norm_(model.parameters()); optimizer.step(); zero_grad(), instead of
npbert's dict form grads = model.backward(); opt.step(grads) (the first tree's step keeps the dict
form, so a tree from before the torch-style API can be the first).

Steps: bert-base-forward, bert-base-train (tests/bench/bench_model.py's runners: batch 8 x 128,
12 layers), finetune, pretrain (tests/bench/bench_train_step.py's).  --path reference runs the
second tree on npbert's reference path (npbert.set_path) instead of the fast one.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

STEPS = {"bert-base-forward": ("bench_model", "forward"), "bert-base-train": ("bench_model", "train_fwd_bwd"),
         "finetune": ("bench_train_step", "finetune"), "pretrain": ("bench_train_step", "pretrain")}


def worker(tree, step, impl, path, style="dict"):
    """Build the step from `tree`'s runners, then time one run per line read from stdin."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NPBERT_NUM_THREADS"):
        os.environ[var] = "2"
    if path:
        os.environ["NPBERT_PATH"] = path
    sys.path[:0] = [tree, os.path.join(tree, "tests", "bench")]
    module, mode = STEPS[step]
    if module == "bench_model":
        import bench_model
        run_mode, _ = bench_model.make_runner(impl, argparse.Namespace(layers=12, batch=8, seq=128))

        def run():
            return run_mode(mode)
    else:
        import bench_train_step
        spec = bench_train_step.STEPS[mode]
        if impl == "npbert":
            run = bench_train_step.npbert_runner(spec, mode == "pretrain", **({"style": style} if style != "dict" else {}))
        else:
            run = bench_train_step.gemm_floor_runner(spec, mode == "pretrain")
    run()                                                    # warm-up
    print("ready", flush=True)
    for _ in sys.stdin:
        t0, c0 = time.perf_counter(), time.process_time()
        out = run()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        del out
        print(elapsed, cpu, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", help="a source tree of npbert (holding npbert/ and tests/bench/)")
    p.add_argument("after", help="another source tree")
    p.add_argument("--step", choices=sorted(STEPS), default="bert-base-train")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--path", choices=("fast", "reference"), default=None, help="npbert path of the 'after' tree")
    p.add_argument("--style", choices=("dict", "torch"), default="dict",
                   help="(finetune, pretrain) the second tree's step: npbert's dict form or torch's loss.backward()")
    p.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        tree, step, impl, path, style = args.worker
        return worker(tree, step, impl, None if path == "-" else path, style)
    if args.style == "torch" and STEPS[args.step][0] != "bench_train_step":
        p.error("--style torch applies to the finetune and pretrain steps")
    sides = {"before": (args.before, "npbert", "-", "dict"), "after": (args.after, "npbert", args.path or "-", args.style),
             "floor": (args.after, "gemm-floor", "-", "dict")}
    procs = {name: subprocess.Popen([sys.executable, os.path.abspath(__file__), "x", "x", "--worker",
                                     os.path.abspath(tree), args.step, impl, path, style],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for name, (tree, impl, path, style) in sides.items()}
    for name, proc in procs.items():
        if proc.stdout.readline().strip() != "ready":
            sys.exit(f"the {name} worker did not start")
    times = {name: [] for name in procs}
    cpu = {name: [] for name in procs}
    for r in range(args.rounds):
        # The order is reversed every other round: run after run, whichever side goes second was
        # measured ~5 % slower with the same tree on both sides, an order effect, not a tree's.
        order = list(procs.items()) if r % 2 == 0 else list(procs.items())[::-1]
        for name, proc in order:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            wall, used = proc.stdout.readline().split()
            times[name].append(float(wall))
            cpu[name].append(float(used))
    for proc in procs.values():
        proc.stdin.close()
        proc.wait(timeout=600)
    print(f"{args.step}: {args.rounds} alternating rounds (after: {args.style} form)")
    for name, t in times.items():
        print(f"  {name:7s} median {statistics.median(t):7.3f} s   min {min(t):7.3f} s")
    for a, b in (("after", "before"), ("before", "floor"), ("after", "floor")):
        r = [x / y for x, y in zip(times[a], times[b])]
        print(f"  {a} / {b:7s} {statistics.median(r):5.2f}x (rounds {min(r):.2f}..{max(r):.2f})")
    # CPU time (all of a process's threads): less swayed than wall time by other jobs taking the
    # cores, though they still share caches and memory bandwidth.
    r = [x / y for x, y in zip(cpu["after"], cpu["before"])]
    print(f"  CPU time after / before {statistics.median(r):5.2f}x (rounds {min(r):.2f}..{max(r):.2f}); "
          f"medians {statistics.median(cpu['after']):.3f} s / {statistics.median(cpu['before']):.3f} s")


if __name__ == "__main__":
    main()
