"""Benchmark: the attention op alone on long sequences: npbert's tiled op
(npbert/fast/tiled_attention.py), npbert's fast op (npbert/fast/attention.py, the full (B, N, F, T)
arrays) and torch's scaled_dot_product_attention (SDPA: on CPU a tiled kernel with an online
softmax), forward and forward + backward, float32, 2 threads, B = 2, N = 12, D = 64, a padding
mask (B, 1, 1, T) with the second row's last eighth masked, no dropout (eval).

- Time: one process per T runs the three in turn, round after round (tiled, fast, sdpa, tiled,
  ...), so that a shared machine's changing load falls on all of them alike; printed: each one's
  median and the round-by-round medians of the tiled op's ratios to the others.
- Peak memory: one fresh subprocess per (implementation, mode, T): after a warm-up, VmHWM is
  reset (/proc/self/clear_refs) and the peak above the resident size (inputs) is read after one
  run.  Large allocations go through mmap there (MALLOC_MMAP_THRESHOLD_), so RSS follows live
  memory on both sides.  fwd_bwd's peak includes what the forward keeps for the backward.
- `gemm-floor`: only the tiled op's GEMMs (Q K^T and S V forward; Q K^T again, S^T dO, dO V^T,
  dS K, dS^T Q backward) on the same threads and tiles, nothing between them: no NumPy
  implementation of attention gets below it here, so tiled / gemm-floor is what the softmax,
  masks and rescaling cost, and gemm-floor / sdpa what NumPy's GEMMs cost against torch's kernel.
- `exp-floor`: gemm-floor plus one np.exp over every score tile (in the backward too, where the
  probabilities are recomputed): the least a softmax needs besides its GEMMs; exp-floor / sdpa is
  how near SDPA any NumPy attention op that runs np.exp can come.

    python tests/bench/bench_long_attention.py                      # T = 512, 1024, 2048, 5 rounds
    python tests/bench/bench_long_attention.py --quick              # 3 rounds, T = 512, 2048
    python tests/bench/bench_long_attention.py --seqs 4096 --block 256
    python tests/bench/bench_long_attention.py --dropout 0.1     # training: dropout on the probabilities

With --dropout, npbert's ops draw keyed masks (a DropoutKey, as the model does; the tiled op
draws them in the forward and again in the backward) and SDPA gets dropout_p (torch's choice of
kernel then).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# (this folder, the script's own directory, is on sys.path; bench_model imports only the standard library)
from bench_model import _reset_peak, _rss_kib, alternating_times, memory_environment, worker_environment

MODES = ("forward", "fwd_bwd")
IMPLS = ("tiled", "fast", "sdpa", "gemm-floor", "exp-floor")


def make_runner(impl, T, args):
    """run(mode) for one implementation on fixed random inputs (B, N, T, D) float32."""
    import numpy as np
    B, N, D = args.batch, args.heads, args.head_size
    rng = np.random.default_rng(0)
    q, k, v, dcontext = (rng.normal(size=(B, N, T, D)).astype(np.float32) for _ in range(4))
    mask = np.zeros((B, 1, 1, T), np.float32)
    mask[-1, ..., T - T // 8:] = np.finfo(np.float32).min                # the last row padded

    dropout_p = args.dropout
    if impl in ("tiled", "fast"):
        import npbert.fast as F
        F.set_num_threads(2)
        drop = dict(dropout_p=dropout_p, rng=F.DropoutKey(0, "bench.dropout", 0), training=dropout_p > 0)
        if impl == "tiled":
            def forward():
                return F.tiled_attention_forward(q, k, v, mask, block=args.block, **drop)

            def run(mode):
                context, cache = forward()
                return context if mode == "forward" else F.tiled_attention_backward(dcontext, cache)
        else:
            def run(mode):
                context, cache = F.attention_forward(q, k, v, mask, **drop)
                return context if mode == "forward" else F.attention_backward(dcontext, cache, free=True)
        return run

    if impl in ("gemm-floor", "exp-floor"):
        return _gemm_floor_runner(q, k, v, dcontext, args.block, with_exp=impl == "exp-floor")

    import torch
    torch.set_num_threads(2)
    tq, tk, tv, tdo = (torch.from_numpy(a) for a in (q, k, v, dcontext))
    tmask = torch.from_numpy(mask)

    def run(mode):
        if mode == "forward":
            with torch.no_grad():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask,
                                                                        dropout_p=dropout_p)
        qq, kk, vv = (t.detach().requires_grad_() for t in (tq, tk, tv))
        out = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, attn_mask=tmask, dropout_p=dropout_p)
        out.backward(tdo)
        return qq.grad, kk.grad, vv.grad
    return run


def _gemm_floor_runner(q, k, v, dcontext, block, with_exp=False):
    """The tiled op's GEMMs alone, tile by tile on npbert's threads (one BLAS thread each);
    with_exp: and np.exp over each score tile once (forward and backward), the one pass no
    softmax can do without."""
    import numpy as np
    from npbert.fast.parallel import over_batch, set_num_threads
    set_num_threads(2)
    B, N, T, D = k.shape
    out, dq, dk, dv = (np.empty_like(q) for _ in range(4))

    def run(mode):
        def rows(a, b):
            s, ds = np.empty((N, block, block), np.float32), np.empty((N, block, block), np.float32)
            for i in range(a, b):
                for f0 in range(0, T, block):
                    qi, do = q[i, :, f0:f0 + block], dcontext[i, :, f0:f0 + block]
                    for t0 in range(0, T, block):
                        kj, vj = k[i, :, t0:t0 + block], v[i, :, t0:t0 + block]
                        np.matmul(qi, kj.transpose(0, 2, 1), out=s)                  # Q K^T
                        if with_exp:
                            np.exp(s, out=s)
                        if mode == "forward":
                            np.matmul(s, vj, out=out[i, :, f0:f0 + block])           # S V
                            continue
                        np.matmul(s.transpose(0, 2, 1), do, out=dv[i, :, t0:t0 + block])   # S^T dO
                        np.matmul(do, vj.transpose(0, 2, 1), out=ds)                 # dO V^T
                        np.matmul(ds, kj, out=dq[i, :, f0:f0 + block])               # dS K
                        np.matmul(ds.transpose(0, 2, 1), qi, out=dk[i, :, t0:t0 + block])  # dS^T Q
        over_batch(rows, B)
        return out
    return run


def time_worker(T, args):
    """The implementations in one process, alternating run by run; prints one JSON line."""
    runners = {impl: make_runner(impl, T, args) for impl in args.impls.split(",")}
    print(json.dumps(alternating_times(runners, args.modes.split(","), args.rounds)))


def memory_worker(impl, mode, T, args):
    run = make_runner(impl, T, args)
    run(mode)                                           # warm-up
    _reset_peak()
    base = _rss_kib("VmRSS")                            # inputs, libraries
    out = run(mode)
    peak = _rss_kib("VmHWM") - base
    del out
    print(json.dumps({"peak_mib": peak / 1024}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqs", default="512,1024,2048", help="sequence lengths T, comma-separated")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-size", type=int, default=64)
    p.add_argument("--block", type=int, default=128, help="the tiled op's block (query rows and key columns)")
    p.add_argument("--rounds", type=int, default=5, help="timed runs of each implementation per mode")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--dropout", type=float, default=0.0, help="dropout on the probabilities (training)")
    p.add_argument("--quick", action="store_true", help="3 rounds, T = 512 and 2048")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--time-worker", type=int, help=argparse.SUPPRESS)
    p.add_argument("--memory-worker", nargs=3, metavar=("IMPL", "MODE", "T"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.time_worker:
        return time_worker(args.time_worker, args)
    if args.memory_worker:
        impl, mode, T = args.memory_worker
        return memory_worker(impl, mode, int(T), args)
    if args.quick:
        args.rounds, args.seqs = min(args.rounds, 3), "512,2048"

    env = worker_environment()
    common = [sys.executable, os.path.abspath(__file__), "--batch", str(args.batch), "--heads", str(args.heads),
              "--head-size", str(args.head_size), "--block", str(args.block), "--rounds", str(args.rounds),
              "--dropout", str(args.dropout),
              "--impls", args.impls, "--modes", args.modes]
    impls, modes = args.impls.split(","), args.modes.split(",")
    print(f"attention alone: B {args.batch}, N {args.heads}, D {args.head_size}, float32, 2 threads, "
          f"padding mask, dropout {args.dropout}; tiled block {args.block}; {args.rounds} alternating rounds",
          flush=True)
    memory_env = memory_environment(env)
    for T in (int(t) for t in args.seqs.split(",")):
        out = subprocess.run(common + ["--time-worker", str(T)], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"time worker failed:\n{out.stderr[-3000:]}")
        times = json.loads(out.stdout.strip().splitlines()[-1])
        peaks = {}
        if not args.no_memory:
            for mode in modes:
                for impl in impls:
                    if impl.endswith("-floor"):                # a time bound only: its memory means nothing
                        continue
                    r = subprocess.run(common + ["--memory-worker", impl, mode, str(T)], env=memory_env,
                                       capture_output=True, text=True)
                    if r.returncode != 0:
                        print(f"memory worker {impl} {mode} T={T} failed:\n{r.stderr[-2000:]}")
                        continue
                    peaks[(impl, mode)] = json.loads(r.stdout.strip().splitlines()[-1])["peak_mib"]
        for mode in modes:
            print(f"\nT = {T}, {mode}", flush=True)
            for impl in impls:
                t = times[mode][impl]
                peak = f"   peak +{peaks[(impl, mode)]:8.1f} MiB" if (impl, mode) in peaks else ""
                print(f"  {impl:6s} median {1e3 * statistics.median(t):8.1f} ms   min {1e3 * min(t):8.1f} ms{peak}")
            if "tiled" not in impls:
                continue
            for impl in impls:
                if impl in ("tiled", "gemm-floor", "exp-floor"):   # (the floors' ratios below)
                    continue
                ratios = [a / b for a, b in zip(times[mode]["tiled"], times[mode][impl])]   # round by round
                mem = ""
                if ("tiled", mode) in peaks and (impl, mode) in peaks:
                    mem = f"   memory {peaks[('tiled', mode)] / max(peaks[(impl, mode)], 1e-9):5.2f}x"
                print(f"  tiled / {impl:5s} time {statistics.median(ratios):5.2f}x "
                      f"(rounds {min(ratios):.2f}..{max(ratios):.2f}){mem}", flush=True)
            if "gemm-floor" in impls:
                for a, b in (("tiled", "gemm-floor"), ("tiled", "exp-floor"), ("gemm-floor", "sdpa"), ("exp-floor", "sdpa")):
                    if a in impls and b in impls:
                        ratios = [x / y for x, y in zip(times[mode][a], times[mode][b])]
                        print(f"  {a} / {b} time {statistics.median(ratios):5.2f}x "
                              f"(rounds {min(ratios):.2f}..{max(ratios):.2f})", flush=True)


if __name__ == "__main__":
    main()
