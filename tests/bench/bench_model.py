"""Benchmark: npbert vs transformers (eager and sdpa attention) on a bert-base-sized model.

Three modes: forward (eval, under npbert.no_grad() / torch.no_grad()), forward+backward in
train mode (dropout on) and forward+backward in eval mode.  The backward is of
sum(last_hidden_state * dH) + sum(pooler_output * dP), and both sides keep every parameter
gradient.  Both sides use 2 threads (torch.set_num_threads(2), OPENBLAS_NUM_THREADS=2 and
npbert's own pool).

- Time: one process builds all the models and, for each mode, runs them in turn, round after
  round (npbert, eager, sdpa, npbert, eager, sdpa, ...), so that a shared machine's changing
  load falls on all of them alike; it prints each one's median and npbert's ratio to each
  torch variant, round by round medians of ratios being what to quote.
- Peak memory: one fresh subprocess per (implementation, mode); after a warm-up, VmHWM is
  reset and the peak above the resident size (weights + inputs) is read after one run.
  Large allocations go through mmap there (MALLOC_MMAP_THRESHOLD_), so RSS follows live
  memory on both sides.

    python tests/bench/bench_model.py                  # bert-base, batch 8 x seq 128, float32
    python tests/bench/bench_model.py --layers 2 --rounds 3    # quicker
    python tests/bench/bench_model.py --profile --impls npbert,gemm-floor --no-memory
                                                        # and where npbert's time goes, op by op

Every run first prints the CPU it ran on: the model name (/proc/cpuinfo), whether it has
AVX-512, and the BLAS NumPy loaded with the kernel it runs (threadpoolctl's "architecture":
OpenBLAS runs its Haswell kernels on AMD Zen, its SkylakeX ones on Intel AVX-512).
`--profile` then runs npbert's fast path once more with every op timed (tests/bench/op_profile.py),
alternating with the GEMM floor, and prints each op's share of the step, the bytes it reads
and writes, and how many threads ran it.

Targets (issue 2): forward <= 0.85x torch's time, forward+backward <= 0.9x,
peak memory of forward+backward <= torch's.  `npbert-reference` is the same model on the
reference path (npbert.set_path("reference"): the plain ops and modules, docs/performance.md);
its ratios say what the fast path buys.

`gemm-floor` runs nothing but the big GEMMs of the same model in NumPy (see
_gemm_floor_runner): its ratio to torch is a lower bound on what any NumPy implementation
can reach with NumPy's BLAS on this machine.  `attn-floor` adds the products attention cannot
do without, Q K^T and probs V per head (and their four gradients in the backward), as batched
matmuls with nothing between them: the floor of any BERT that computes attention at all, so
`attn-floor / gemm-floor` is how close to the GEMM floor any implementation can get here.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ("forward", "train_fwd_bwd", "eval_fwd_bwd")
IMPLS = ("npbert", "npbert-reference", "torch-eager", "torch-sdpa", "gemm-floor", "attn-floor")
# also accepted in --impls: "npbert-ckpt" and "torch-sdpa-ckpt" (gradient checkpointing on), "npbert-notiles"
# (the fast path with its attention never in tiles: encoder.attention_tiles_from = None), "npbert-tiles"
# (always in tiles: attention_tiles_from = 1)
FLOORS = ("gemm-floor", "attn-floor")


def _rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:   # "5" resets VmHWM to the current RSS
        f.write("5")


def _inputs(args):
    import numpy as np
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30522, (args.batch, args.seq))
    mask = np.ones((args.batch, args.seq), dtype=np.int64)
    mask[1, args.seq // 2:] = 0                        # one padded row, so masking is exercised
    dH = rng.standard_normal((args.batch, args.seq, 768)).astype(np.float32)
    dP = rng.standard_normal((args.batch, 768)).astype(np.float32)
    return ids, mask, dH, dP


def make_runner(impl, args):
    """Build `impl`'s model; return (run(mode), reset()) closures."""
    cfg = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=args.layers, num_attention_heads=12,
               intermediate_size=3072, max_position_embeddings=max(512, args.seq), type_vocab_size=2)
    checkpointing = impl.endswith("-ckpt")
    impl = impl.removesuffix("-ckpt")
    ids, mask, dH, dP = _inputs(args)
    if impl.startswith("npbert"):
        import numpy as np

        import npbert
        path = "reference" if impl == "npbert-reference" else "fast"   # npbert.set_path: the same numbers
        with npbert.using_path(path):                                  # the model's path: fixed when it is built
            model = npbert.BertModel(npbert.BertConfig(**cfg), dtype=np.float32)
        if checkpointing:
            model.gradient_checkpointing_enable()
        if impl == "npbert-notiles":
            model.encoder.attention_tiles_from = None
        if impl == "npbert-tiles":
            model.encoder.attention_tiles_from = 1

        def run(mode):
            model.train(mode == "train_fwd_bwd")
            if mode == "forward":
                with npbert.no_grad():              # as torch.no_grad() below
                    return model(input_ids=ids, attention_mask=mask)
            out = model(input_ids=ids, attention_mask=mask)
            return out, model.backward(last_hidden_state=dH, pooler_output=dP)

        def reset():
            model._cache = None
        return run, reset

    if impl in FLOORS:
        return _gemm_floor_runner(args, dH, with_attention=impl == "attn-floor")

    import torch
    import transformers
    torch.set_num_threads(2)
    model = transformers.BertModel(transformers.BertConfig(**cfg, attn_implementation=impl.split("-")[1]))
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    tids, tmask, tdH, tdP = (torch.tensor(a) for a in (ids, mask, dH, dP))

    def run(mode):
        model.train(mode == "train_fwd_bwd")
        if mode == "forward":
            with torch.no_grad():
                return model(input_ids=tids, attention_mask=tmask)
        model.zero_grad(set_to_none=True)
        out = model(input_ids=tids, attention_mask=tmask)
        torch.autograd.backward([out.last_hidden_state, out.pooler_output], [tdH, tdP])
        return out, [p.grad for p in model.parameters()]   # the gradients are kept, as npbert's

    def reset():
        model.zero_grad(set_to_none=True)
    return run, reset


def _gemm_floor_runner(args, dH, with_attention=False):
    """Only the big GEMMs of a BERT layer stack, in NumPy (OpenBLAS, 2 threads), and nothing else:
    per layer Q/K/V (one stacked GEMM), attention output, intermediate and output dense, and in
    the backward their input and weight gradients.  No attention products, bias, GELU, softmax,
    LayerNorm or embedding, so any NumPy implementation of the same model takes at least this
    long: its ratio to torch is the best ratio npbert could reach with NumPy's BLAS here.
    with_attention: also attention's per-head products (see the module docstring)."""
    import numpy as np
    rng = np.random.default_rng(1)
    n, h, i = args.batch * args.seq, 768, 3072
    shapes = [(3 * h, h), (h, h), (i, h), (h, i)]             # torch layout (out, in)
    weights = [[rng.standard_normal(s, dtype=np.float32) * 0.02 for s in shapes] for _ in range(args.layers)]
    x0 = dH.reshape(n, h)
    B, T, N = args.batch, args.seq, 12
    q = x0.reshape(B, T, N, h // N).transpose(0, 2, 1, 3)                # (B, N, T, D) view, as npbert's

    from npbert.fast.parallel import over_batch          # the fastest way found to run many small GEMMs

    def attention():                                             # Q K^T and probs V, per batch row and head
        if not with_attention:
            return None
        p = np.empty((B, N, T, T), np.float32)
        ctx = np.empty((B, N, T, h // N), np.float32)

        def rows(a, b):
            np.matmul(q[a:b], q[a:b].transpose(0, 1, 3, 2), out=p[a:b])   # (B, N, T, T): "probs"
            np.matmul(p[a:b], q[a:b], out=ctx[a:b])                      # (B, N, T, D)
        over_batch(rows, B)
        return p

    def attention_backward(p):
        if not with_attention:
            return
        dp, dq = np.empty_like(p), np.empty((B, N, T, h // N), np.float32)

        def rows(a, b):
            dctx = q[a:b]
            np.matmul(dctx, q[a:b].transpose(0, 1, 3, 2), out=dp[a:b])      # dprobs = dctx V^T
            np.matmul(p[a:b].transpose(0, 1, 3, 2), dctx, out=dq[a:b])      # dV = probs^T dctx
            np.matmul(dp[a:b], q[a:b], out=dq[a:b])                         # dQ = dscores K
            np.matmul(dp[a:b].transpose(0, 1, 3, 2), q[a:b], out=dq[a:b])   # dK = dscores^T Q
        over_batch(rows, B)

    def run(mode):
        acts = []
        for w_qkv, w_o, w_1, w_2 in weights:
            qkv = x0 @ w_qkv.T
            probs = attention()
            a = qkv[:, :h] @ w_o.T
            m = a @ w_1.T
            y = m @ w_2.T
            acts.append((x0, qkv, a, m, probs))
        if mode == "forward":
            return y
        grads = []
        dy = x0
        for (x, qkv, a, m, probs), (w_qkv, w_o, w_1, w_2) in zip(reversed(acts), reversed(weights)):
            grads.append(dy.T @ m)                            # dW2
            dm = dy @ w_2
            grads.append(dm.T @ a)                            # dW1
            da = dm @ w_1
            grads.append(da.T @ qkv[:, :h])                   # dWo
            da @ w_o                                          # dctx
            attention_backward(probs)
            grads.append(qkv.T @ x)                           # dWqkv (qkv stands in for dQKV: same shape)
            dy = qkv @ w_qkv
        return y, grads

    return run, lambda: None


def cpu_description():
    """One line: the CPU (model name, AVX-512 or not, cores) and NumPy's BLAS with its kernel."""
    import numpy as np
    model, flags = "unknown CPU", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1]
    except OSError:
        pass
    simd = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "no AVX2"
    try:
        import threadpoolctl
        blas = [f"{i.get('internal_api')} {i.get('version')} kernel {i.get('architecture', '?')}, "
                f"{i.get('num_threads')} threads" for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
        blas = "; ".join(blas) or "no BLAS found by threadpoolctl"
    except ImportError:
        blas = "BLAS kernel unknown (pip install threadpoolctl)"
    return f"cpu: {model} ({simd}, {os.cpu_count()} cpus); numpy {np.__version__}: {blas}"


def profile_worker(args):
    """npbert's fast path with every op timed (op_profile.py), alternating with the GEMM floor run by
    run; prints one JSON line {mode: {"profile": ..., "floor": [seconds], "npbert": [seconds]}}."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import op_profile
    op_profile.install()                                  # before the model is built and run
    run, _ = make_runner("npbert", args)
    floor, _ = _gemm_floor_runner(args, _inputs(args)[2])
    result = {}
    for mode in args.modes.split(","):
        run(mode), floor(mode)                            # warm-up
        op_profile.reset()
        walls, floors = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            floor(mode)
            floors.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run(mode)
            walls.append(time.perf_counter() - t0)
        result[mode] = {"profile": op_profile.snapshot(sum(walls)), "floor": floors, "npbert": walls}
    print(json.dumps(result))


def alternating_times(runners, modes, rounds):
    """{mode: {impl: [seconds per round]}}: one warm-up each, then the implementations taking
    turns run by run, so that a shared machine's changing load falls on all alike."""
    result = {}
    for mode in modes:
        times = {impl: [] for impl in runners}
        for run in runners.values():
            run(mode)                                   # warm-up
        for _ in range(rounds):
            for impl, run in runners.items():
                t0 = time.perf_counter()
                out = run(mode)
                times[impl].append(time.perf_counter() - t0)
                del out
        result[mode] = times
    return result


def time_worker(args):
    """All implementations in one process, alternating run by run; prints one JSON line."""
    runners = {impl: make_runner(impl, args)[0] for impl in args.impls.split(",")}
    print(json.dumps(alternating_times(runners, args.modes.split(","), args.rounds)))


def memory_worker(impl, mode, args):
    run, reset = make_runner(impl, args)
    run(mode)                                           # warm-up
    reset()                                             # nothing left from it
    _reset_peak()
    base = _rss_kib("VmRSS")                            # weights and inputs
    out = run(mode)
    peak = _rss_kib("VmHWM") - base
    del out
    print(json.dumps({"peak_mib": peak / 1024}))


def worker_environment():
    """The workers' environment: 2 threads everywhere, and npbert from this checkout."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2",
               NPBERT_NUM_THREADS="2")
    # torch's OpenMP threads (libgomp) spin after each of its ops; in one process, alternating,
    # they took the cores of the next npbert run (measured: attn-floor 4x the GEMM floor, 1.06x
    # with them passive).  Passive, they sleep when done, as npbert's and OpenBLAS's threads do.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(here)) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def memory_environment(env):
    """A memory worker's: large allocations through mmap (returned to the OS on free), so that RSS
    follows live memory and freed blocks kept by malloc do not hide the peak."""
    return dict(env, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--rounds", type=int, default=7, help="timed runs of each implementation per mode")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--profile", action="store_true", help="also print where npbert's time goes, op by op")
    p.add_argument("--profile-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--time-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--memory-worker", nargs=2, metavar=("IMPL", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.time_worker:
        return time_worker(args)
    if args.profile_worker:
        return profile_worker(args)
    if args.memory_worker:
        return memory_worker(*args.memory_worker, args)

    env = worker_environment()
    common = [sys.executable, os.path.abspath(__file__), "--layers", str(args.layers), "--batch", str(args.batch),
              "--seq", str(args.seq), "--rounds", str(args.rounds), "--impls", args.impls, "--modes", args.modes]
    impls, modes = args.impls.split(","), args.modes.split(",")
    print(f"config: {args.layers} layers, hidden 768, 12 heads, intermediate 3072, vocab 30522; "
          f"batch {args.batch} x seq {args.seq}, float32, 2 threads; {args.rounds} alternating rounds", flush=True)
    cpu = subprocess.run([sys.executable, "-c", "import bench_model; print(bench_model.cpu_description())"],
                         env=dict(env, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)) + os.pathsep
                                  + env["PYTHONPATH"]), capture_output=True, text=True)
    print(cpu.stdout.strip() or cpu.stderr[-500:], flush=True)

    out = subprocess.run(common + ["--time-worker"], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"time worker failed:\n{out.stderr[-3000:]}")
    times = json.loads(out.stdout.strip().splitlines()[-1])

    peaks = {}
    if not args.no_memory:
        # Memory runs: large allocations through mmap (returned to the OS on free), so that RSS
        # follows live memory and freed blocks kept by malloc do not hide the peak.
        memory_env = memory_environment(env)
        for mode in modes:
            for impl in impls:
                if impl in FLOORS:                      # a time bound only: its memory means nothing
                    continue
                r = subprocess.run(common + ["--memory-worker", impl, mode], env=memory_env,
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"memory worker {impl} {mode} failed:\n{r.stderr[-2000:]}")
                    continue
                peaks[(impl, mode)] = json.loads(r.stdout.strip().splitlines()[-1])["peak_mib"]

    for mode in modes:
        print(f"\n{mode}")
        for impl in impls:
            t = times[mode][impl]
            peak = f"   peak +{peaks[(impl, mode)]:7.1f} MiB" if (impl, mode) in peaks else ""
            print(f"  {impl:11s} median {statistics.median(t):7.3f} s   min {min(t):7.3f} s{peak}")
        for impl in impls:
            if impl == "npbert" or "npbert" not in impls:
                continue
            # the ratio of the two runs made next to each other, round by round
            ratios = [a / b for a, b in zip(times[mode]["npbert"], times[mode][impl])]
            mem = ""
            if ("npbert", mode) in peaks and (impl, mode) in peaks:
                mem = f"   memory {peaks[('npbert', mode)] / max(peaks[(impl, mode)], 1e-9):5.2f}x"
            print(f"  npbert / {impl:11s} time {statistics.median(ratios):5.2f}x "
                  f"(rounds {min(ratios):.2f}..{max(ratios):.2f}){mem}")
        if "npbert-reference" in impls:
            for impl in ("gemm-floor", "torch-eager"):
                if impl in impls:
                    ratios = [a / b for a, b in zip(times[mode]["npbert-reference"], times[mode][impl])]
                    print(f"  npbert-reference / {impl:11s} time {statistics.median(ratios):5.2f}x "
                          f"(rounds {min(ratios):.2f}..{max(ratios):.2f})")
        if "attn-floor" in impls and "gemm-floor" in impls:
            ratios = [a / b for a, b in zip(times[mode]["attn-floor"], times[mode]["gemm-floor"])]
            print(f"  attn-floor / gemm-floor  time {statistics.median(ratios):5.2f}x "
                  f"(rounds {min(ratios):.2f}..{max(ratios):.2f}): the nearest any BERT gets to the GEMM floor")
        if "gemm-floor" in impls:
            for impl in impls:
                if impl.startswith("torch"):
                    ratios = [a / b for a, b in zip(times[mode]["gemm-floor"], times[mode][impl])]
                    print(f"  gemm-floor / {impl:11s} time {statistics.median(ratios):5.2f}x "
                          f"(rounds {min(ratios):.2f}..{max(ratios):.2f}): no NumPy BERT can do better here")

    if args.profile:
        print_profile(common, env, modes, args.rounds)


def print_profile(common, env, modes, rounds):
    """Run the profile worker and print its tables (op_profile.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import op_profile
    out = subprocess.run(common + ["--profile-worker"], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"profile worker failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for mode in modes:
        r = result[mode]
        ratios = [a / b for a, b in zip(r["npbert"], r["floor"])]
        print(f"\n{mode}: npbert (profiled) / gemm-floor, round by round: median {statistics.median(ratios):.2f}x "
              f"(rounds {min(ratios):.2f}..{max(ratios):.2f}; the timers add a little)")
        op_profile.print_table(mode, r["profile"], rounds, floor=statistics.median(r["floor"]))


if __name__ == "__main__":
    main()
