"""Benchmark: npbert vs transformers (eager and sdpa) on a bert-base-sized model.

Prints, for forward (eval, under torch.no_grad() / npbert.no_grad()) and forward+backward (train mode,
dropout on, and eval mode), the median time and the peak extra memory of each
implementation, and npbert's ratio to each torch variant.  Every measurement runs in a
fresh subprocess so that peak memory (VmHWM, reset before the measured call) is not
polluted by the others.  Both sides use 2 threads (torch.set_num_threads, OpenBLAS).

    python tests/bench/bench_model.py                  # bert-base, batch 8 x seq 128, float32
    python tests/bench/bench_model.py --layers 2       # quicker

Targets (issue 2): forward <= 0.85x torch's time, forward+backward <= 0.9x,
peak memory of forward+backward <= torch's.
"""
import argparse
import json
import os
import subprocess
import sys
import time

MODES = ("forward", "train_fwd_bwd", "eval_fwd_bwd")


def _rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:   # "5" resets VmHWM to the current RSS
        f.write("5")


def worker(impl, mode, args):
    """Runs in a subprocess: time `mode` for `impl`, print one JSON line."""
    import numpy as np
    cfg = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=args.layers, num_attention_heads=12,
               intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, cfg["vocab_size"], (args.batch, args.seq))
    mask = np.ones((args.batch, args.seq), dtype=np.int64)
    mask[1, args.seq // 2:] = 0                        # one padded row, so masking is exercised
    dH = rng.standard_normal((args.batch, args.seq, 768)).astype(np.float32)
    dP = rng.standard_normal((args.batch, 768)).astype(np.float32)

    if impl == "npbert":
        import npbert
        model = npbert.BertModel(npbert.BertConfig(**cfg), dtype=np.float32)

        def run():
            model.train(mode == "train_fwd_bwd")
            if mode == "forward":
                with npbert.no_grad():                  # as torch.no_grad() below
                    return model(input_ids=ids, attention_mask=mask)
            out = model(input_ids=ids, attention_mask=mask)
            model.backward(last_hidden_state=dH, pooler_output=dP)
            return out

        def reset():
            model._cache = None
    else:
        import torch
        import transformers
        torch.set_num_threads(2)
        config = transformers.BertConfig(**cfg, attn_implementation=impl.split("-")[1])
        model = transformers.BertModel(config)
        tids, tmask = torch.tensor(ids), torch.tensor(mask)
        tdH, tdP = torch.tensor(dH), torch.tensor(dP)

        def run():
            model.train(mode == "train_fwd_bwd")
            if mode == "forward":
                with torch.no_grad():
                    return model(input_ids=tids, attention_mask=tmask)
            model.zero_grad(set_to_none=True)
            out = model(input_ids=tids, attention_mask=tmask)
            torch.autograd.backward([out.last_hidden_state, out.pooler_output], [tdH, tdP])
            grads = [p.grad for p in model.parameters()]   # keep the gradients, as npbert returns them
            return grads

        def reset():
            model.zero_grad(set_to_none=True)

    run()                                               # warm-up
    if args.measure == "memory":
        reset()                                         # nothing left from the warm-up
        _reset_peak()
        base = _rss_kib("VmRSS")                        # the model's weights and the inputs
        result = run()
        peak = _rss_kib("VmHWM") - base
        del result
        print(json.dumps({"peak_mib": peak / 1024}))
        return
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t0)
        del result
    print(json.dumps({"median_s": sorted(times)[len(times) // 2], "min_s": min(times)}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--impls", default="npbert,torch-eager,torch-sdpa")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--worker", nargs=2, metavar=("IMPL", "MODE"), help=argparse.SUPPRESS)
    p.add_argument("--measure", choices=("time", "memory"), default="time", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(*args.worker, args)

    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    # Memory runs: large allocations through mmap (returned to the OS on free) for both sides,
    # so that RSS follows live memory and the warm-up's freed blocks do not hide the peak.
    # Timing runs keep glibc's default (adaptive) allocator, which is what users get.
    memory_env = dict(env, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(here)) + os.pathsep + env.get("PYTHONPATH", "")
    print(f"config: {args.layers} layers, hidden 768, 12 heads, intermediate 3072, vocab 30522; "
          f"batch {args.batch} x seq {args.seq}, float32, 2 threads, median of {args.repeats}")
    results = {}
    for mode in args.modes.split(","):
        for impl in args.impls.split(","):
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", impl, mode,
                   "--layers", str(args.layers), "--batch", str(args.batch), "--seq", str(args.seq),
                   "--repeats", str(args.repeats)]
            r = {}
            for measure, e in (("time", env), ("memory", memory_env)):
                out = subprocess.run(cmd + ["--measure", measure], env=e, capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"{impl} {mode} {measure} failed:\n{out.stderr[-2000:]}")
                    break
                r.update(json.loads(out.stdout.strip().splitlines()[-1]))
            else:
                results[(impl, mode)] = r
            if (impl, mode) not in results:
                continue
            print(f"  {mode:14s} {impl:11s} median {r['median_s']:7.3f} s   min {r['min_s']:7.3f} s   "
                  f"peak +{r['peak_mib']:7.1f} MiB", flush=True)
    print("\nratios npbert / torch (time; peak memory):")
    for mode in args.modes.split(","):
        ours = results.get(("npbert", mode))
        for impl in args.impls.split(","):
            theirs = results.get((impl, mode))
            if impl == "npbert" or ours is None or theirs is None:
                continue
            print(f"  {mode:14s} vs {impl:11s} time {ours['median_s'] / theirs['median_s']:5.2f}x   "
                  f"memory {ours['peak_mib'] / max(theirs['peak_mib'], 1e-9):5.2f}x")


if __name__ == "__main__":
    main()
