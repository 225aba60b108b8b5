"""Benchmark: npbert's float32 GELU forward/backward against torch's, same run.

    python tests/bench/bench_activations.py [--repeats 15] [--threads 2]

For x of shape (8, 128, 3072) float32 (one bert-base intermediate activation
at batch 8 x seq 128) it times, interleaved so that machine load hits both
alike, and prints the median of each and the ratio npbert / torch:

    forward   npbert gelu_forward(x)           torch F.gelu(x)
    backward  npbert gelu_backward(dy, x)      torch autograd: y.backward(dy)
                                               (timed alone, forward excluded)

Target: both ratios <= 1.0. torch runs with torch.set_num_threads(threads)
and npbert with set_num_threads(threads). This is a script, not a test.
"""

import argparse
import statistics
import time

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shape", type=int, nargs="+", default=[8, 128, 3072])
    args = parser.parse_args()

    import torch
    from npbert import fast as act                       # the fast path's GELU (npbert/fast/gelu.py) and threads

    torch.set_num_threads(args.threads)
    act.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.shape).astype(np.float32)
    dy = rng.standard_normal(args.shape).astype(np.float32)
    xt, dyt = torch.from_numpy(x), torch.from_numpy(dy)

    def np_forward():
        return act.gelu_forward(x)

    def np_backward():
        return act.gelu_backward(dy, x)

    def torch_forward():
        with torch.no_grad():
            return torch.nn.functional.gelu(xt)

    leaf = xt.clone().requires_grad_()

    def torch_backward_setup():
        leaf.grad = None
        return torch.nn.functional.gelu(leaf)

    def torch_backward(y):
        y.backward(dyt)

    times = {"np_fwd": [], "np_bwd": [], "torch_fwd": [], "torch_bwd": []}
    for _ in range(2):                                   # warm up pools, pages
        np_forward(), np_backward(), torch_forward(), torch_backward(torch_backward_setup())
    for _ in range(args.repeats):
        t0 = time.perf_counter(); np_forward(); t1 = time.perf_counter()
        times["np_fwd"].append(t1 - t0)
        t0 = time.perf_counter(); torch_forward(); t1 = time.perf_counter()
        times["torch_fwd"].append(t1 - t0)
        t0 = time.perf_counter(); np_backward(); t1 = time.perf_counter()
        times["np_bwd"].append(t1 - t0)
        y = torch_backward_setup()
        t0 = time.perf_counter(); torch_backward(y); t1 = time.perf_counter()
        times["torch_bwd"].append(t1 - t0)

    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    n = int(np.prod(args.shape))
    print(f"GELU float32, shape {tuple(args.shape)} ({n / 1e6:.1f}M elements), "
          f"{args.threads} threads, median of {args.repeats}")
    print(f"{'':10s}{'npbert ms':>12s}{'torch ms':>12s}{'ratio':>9s}")
    for label, ours, theirs in (("forward", "np_fwd", "torch_fwd"), ("backward", "np_bwd", "torch_bwd")):
        print(f"{label:10s}{med[ours]:12.2f}{med[theirs]:12.2f}{med[ours] / med[theirs]:9.2f}")


if __name__ == "__main__":
    main()
