"""Two versions of an element-wise kernel timed against each other in one process, taking turns
call by call (A B A B ...), CPU time (time.process_time) and wall, on one npbert thread (as in the
encoder's halves: docs/performance.md) or more.  For a change to a kernel: the module as it was
(`git show BASE:npbert/fast/gelu.py > /tmp/gelu_before.py`, its relative imports made absolute)
against this tree's.

    python tests/bench/bench_kernels_before_after.py gelu /tmp/gelu_before.py --rounds 7
"""
import argparse
import importlib.util
import statistics
import sys
import time

import numpy as np


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cases(kind, before, after, shape):
    """{label: (before_fn, after_fn)}: calls with the same arguments."""
    rng = np.random.default_rng(0)
    x = (2 * rng.standard_normal(shape)).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    if kind == "gelu":
        y, cache = after.gelu_forward(x)
        return {
            "gelu_forward": (lambda: before.gelu_forward(x), lambda: after.gelu_forward(x)),
            "gelu_forward_with_grad": (lambda: before.gelu_forward_with_grad(x), lambda: after.gelu_forward_with_grad(x)),
            "gelu_backward": (lambda: before.gelu_backward(dy, cache), lambda: after.gelu_backward(dy, cache)),
        }
    raise SystemExit(f"unknown kernel kind {kind}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind")
    p.add_argument("before", help="the module as it was (a .py file)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=5, help="calls per timed round")
    p.add_argument("--shape", default="512,3072", help="one encoder half's (B/2 T, I) at bert-base, B=8, T=128")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    import npbert.fast as fast
    fast.set_num_threads(args.threads)
    after = sys.modules[f"npbert.fast.{args.kind}"]
    before = load(args.before, f"{args.kind}_before")
    shape = tuple(int(s) for s in args.shape.split(","))
    print(f"{args.kind}: before = {args.before}, after = this tree; shape {shape}, float32, {args.threads} npbert "
          f"thread(s); {args.rounds} rounds of {args.calls} calls each, alternating")
    for label, (fa, fb) in cases(args.kind, before, after, shape).items():
        fa(), fb()                                               # warm-up
        cpu = {0: [], 1: []}
        wall = {0: [], 1: []}
        for r in range(args.rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)             # each goes first in turn
            for k in order:
                f = (fa, fb)[k]
                c0, w0 = time.process_time(), time.perf_counter()
                for _ in range(args.calls):
                    f()
                cpu[k].append((time.process_time() - c0) / args.calls)
                wall[k].append((time.perf_counter() - w0) / args.calls)
        rc = [b / a for a, b in zip(cpu[0], cpu[1])]
        rw = [b / a for a, b in zip(wall[0], wall[1])]
        print(f"  {label:24s} before {statistics.median(cpu[0]) * 1e3:7.2f} ms CPU  after "
              f"{statistics.median(cpu[1]) * 1e3:7.2f} ms CPU   after/before CPU {statistics.median(rc):.3f}x "
              f"({min(rc):.3f}..{max(rc):.3f}), wall {statistics.median(rw):.3f}x ({min(rw):.3f}..{max(rw):.3f})")


if __name__ == "__main__":
    main()
