"""Benchmark: one AdamW step over bert-base's parameters (float32), npbert vs torch.optim.AdamW.

Time: alternating rounds in one process (npbert, torch, npbert, ...), the median of the
round-by-round ratios.  Memory: tracemalloc's peak during a step beyond the moments
(npbert allocates one scratch buffer the size of the largest parameter on its first step;
the figure printed is the peak of a later step, in units of that largest parameter).

    python tests/bench/bench_optim.py [--rounds 7]
"""
import argparse
import os
import statistics
import time
import tracemalloc

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    import numpy as np
    import torch

    import npbert
    from npbert import optim
    torch.set_num_threads(2)
    config = npbert.BertConfig()                          # bert-base
    model = npbert.BertModel(config, dtype=np.float32)
    rng = np.random.default_rng(0)
    grads = {n: rng.standard_normal(p.shape, dtype=np.float32) * 1e-3 for n, p in model.named_parameters()}
    opt = optim.AdamW(optim.optimizer_grouped_parameters(model, weight_decay=0.01), lr=1e-4)
    tparams = [torch.nn.Parameter(torch.from_numpy(p.copy())) for _, p in model.named_parameters()]
    for tp, g in zip(tparams, grads.values()):
        tp.grad = torch.from_numpy(g.copy())
    topt = torch.optim.AdamW(tparams, lr=1e-4, weight_decay=0.01)
    opt.step(grads)
    topt.step()                                           # warm-up: moments allocated on both sides
    ours, theirs = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        opt.step(grads)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        topt.step()
        theirs.append(time.perf_counter() - t0)
    ratios = [a / b for a, b in zip(ours, theirs)]
    largest = max(p.nbytes for p in model.parameters())
    tracemalloc.start()
    opt.step(grads)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n = sum(p.size for p in model.parameters())
    print(f"AdamW step over {n:,} float32 parameters, {args.rounds} alternating rounds")
    print(f"  npbert median {statistics.median(ours) * 1e3:7.1f} ms   torch median {statistics.median(theirs) * 1e3:7.1f} ms")
    print(f"  npbert / torch {statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}..{max(ratios):.2f})")
    print(f"  new memory during a step: {peak / 2**20:.1f} MiB = {peak / largest:.2f} x the largest parameter "
          f"({largest / 2**20:.1f} MiB); the scratch buffer itself was allocated on the first step")


if __name__ == "__main__":
    main()
