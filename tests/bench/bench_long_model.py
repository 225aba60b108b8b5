"""Benchmark: the whole model at long sequences, npbert against torch's SDPA, with and without
gradient checkpointing (issue "Long sequences in tiles").  For each length T and batch B it runs
bench_model.py's workers: one process timing every implementation in alternating rounds (the
ratios quoted are medians of the round-by-round ratios), and one fresh process per
(implementation, mode) for the peak memory above the weights and inputs.

    python tests/bench/bench_long_model.py                                  # the whole table (long)
    python tests/bench/bench_long_model.py --layers 2 --seqs 512,2048 --batches 2 --rounds 2

Implementations: npbert (the fast path: attention in tiles from 1024 tokens on), npbert-ckpt
(and gradient checkpointing), torch-sdpa, torch-sdpa-ckpt (transformers' gradient_checkpointing_enable,
use_reentrant=False); add npbert-notiles to see the full attention op at the same lengths, npbert-tiles the tiled op.
Modes: forward (eval, no_grad) and train_fwd_bwd (a training step's forward and backward).
Prints a Markdown table: times in ms, npbert / torch-sdpa ratios, peak memory in MiB.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from bench_model import memory_environment, worker_environment   # (this folder is on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_MODEL = os.path.join(HERE, "bench_model.py")


def worker(args, T, B, impls, modes, extra):
    command = [sys.executable, BENCH_MODEL, "--layers", str(args.layers), "--batch", str(B), "--seq", str(T),
               "--rounds", str(args.rounds), "--impls", ",".join(impls), "--modes", ",".join(modes)] + extra
    env = worker_environment()
    if "--memory-worker" in extra:              # large blocks through mmap: RSS follows live memory
        env = memory_environment(env)
    r = subprocess.run(command, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"worker {extra} at T={T}, B={B} failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--seqs", default="128,512,1024,2048")
    p.add_argument("--batches", default="2,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--impls", default="npbert,npbert-ckpt,torch-sdpa,torch-sdpa-ckpt")
    p.add_argument("--modes", default="forward,train_fwd_bwd")
    p.add_argument("--no-memory", action="store_true")
    args = p.parse_args()
    impls, modes = args.impls.split(","), args.modes.split(",")
    print(f"bert-base shape, {args.layers} layers, float32, 2 threads, {args.rounds} alternating rounds", flush=True)
    header = "| T | B | mode | " + " | ".join(f"{i} ms" for i in impls)
    header += " | npbert / torch-sdpa | " + (" | ".join(f"{i} MiB" for i in impls) if not args.no_memory else "")
    print(header.rstrip(" |") + " |")
    print("|" + "---|" * (header.count("|") - 1))
    for T in map(int, args.seqs.split(",")):
        for B in map(int, args.batches.split(",")):
            times = worker(args, T, B, impls, modes, ["--time-worker"])
            for mode in modes:
                row = [str(T), str(B), mode]
                row += ["-" if times is None else f"{1000 * statistics.median(times[mode][i]):.0f}" for i in impls]
                if times is not None and "npbert" in impls and "torch-sdpa" in impls:
                    ratios = [a / b for a, b in zip(times[mode]["npbert"], times[mode]["torch-sdpa"])]
                    row.append(f"{statistics.median(ratios):.2f}x")
                else:
                    row.append("-")
                if not args.no_memory:
                    for impl in impls:
                        peak = worker(args, T, B, [impl], [mode], ["--memory-worker", impl, mode])
                        row.append("-" if peak is None else f"{peak['peak_mib']:.0f}")
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
