"""Benchmark: one pre-training step, npbert vs transformers' BertForPreTraining + torch AdamW.

Steps (issue 11): the demo's model (2 layers, hidden 128, vocab 2000, batch 32 x 64) and BERT-mini
(4 layers, hidden 256, vocab 30522, batch 32 x 128); MLM labels at 15 % of the positions + NSP,
forward, backward, clip_grad_norm_(1.0), AdamW, linear schedule.  npbert runs twice: with the
MLM head over all positions as transformers (`full`), and only at the masked positions
(`gather`, config.gather_masked_lm, Google's gather_indexes; the same loss and
gradients).  Target: npbert / torch <= 1.1.

All runners alternate round by round in one process, 2 threads each; ratios are medians of
per-round ratios.  Reuses the batch, the npbert step and the torch step of bench_train_step.py.

    python tests/bench/bench_pretrain_step.py [--sizes demo,mini] [--rounds 5]
"""
import argparse
import os
import statistics
import sys
import time

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NPBERT_NUM_THREADS"):
    os.environ.setdefault(var, "2")
# torch's OpenMP threads spin after each op and, alternating in one process, take the cores of
# the next npbert run; passive, they sleep when done (see bench_model.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..")]             # bench_train_step and the repository

import bench_train_step as train_step  # noqa: E402

SIZES = {
    "demo": dict(layers=2, hidden=128, heads=2, intermediate=512, vocab=2000, batch=32, seq=64),
    "mini": dict(layers=4, hidden=256, heads=4, intermediate=1024, vocab=30522, batch=32, seq=128),
}


def npbert_runner(spec, gather):
    """bench_train_step's npbert pre-training step, with config.gather_masked_lm = gather."""
    train_step.GATHER[0] = gather
    return train_step.npbert_runner(spec, True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="demo,mini")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    for name in args.sizes.split(","):
        spec = SIZES[name]
        runners = {"npbert-full": npbert_runner(spec, False), "npbert-gather": npbert_runner(spec, True),
                   "torch": train_step.torch_runner(spec, True)}
        for run in runners.values():
            run()                                            # warm-up (allocates optimizer state)
        times = {k: [] for k in runners}
        for _ in range(args.rounds):
            for k, run in runners.items():
                t0 = time.perf_counter()
                run()
                times[k].append(time.perf_counter() - t0)
        print(f"\n{name}: {spec}, {args.rounds} alternating rounds")
        for k in runners:
            print(f"  {k:14s} median {statistics.median(times[k]):7.3f} s   min {min(times[k]):7.3f} s")
        for k in ("npbert-full", "npbert-gather"):
            r = [a / b for a, b in zip(times[k], times["torch"])]
            print(f"  {k} / torch {statistics.median(r):5.2f}x (rounds {min(r):.2f}..{max(r):.2f})")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
