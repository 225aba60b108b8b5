"""Benchmark: `npbert demo` against the targets of issue 24, and the budget curve behind its default.

    python tests/bench/bench_demo.py                       # the default demo, timed, targets beside results
    python tests/bench/bench_demo.py --steps 300,600,1200,2400 [--flags "--seed 1"]
                                                           # one demo per step count, no time limit:
                                                           # held-out accuracy against steps and seconds

Each demo runs as `python -m npbert demo` in a subprocess, in a temporary directory, and is
read back from its results.json.  The machine's load (/proc/loadavg, 1 minute) is printed before
and after every run: on a shared machine seconds mean little without it; steps do not change.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOTAL_SECONDS = 180            # the default run, in all
RATIO = 3.0                    # held-out MLM accuracy >= 3x always guessing the most frequent token
NSP_POINTS = 0.05              # NSP accuracy >= majority + 5 points, or the demo says why not


def load():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def run_demo(flags, timeout):
    """(results dict, wall seconds, load before, load after) of one demo."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "npbert-demo")
        cmd = [sys.executable, "-m", "npbert", "demo", "--output_dir", out] + flags
        before, t = load(), time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                              timeout=timeout)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
            return json.load(f), wall, before, load()


def targets(r, wall):
    """[(target, wanted, got, met)] for issue 24's targets."""
    b, a, fill, nsp, ft = r["baselines"], r["after"], r["fill_mask"], r["nsp"], r.get("fine_tuning")
    ratio = a["mlm_accuracy"] / b["mlm_accuracy"]
    below = b["unigram_entropy"] - a["mlm_loss"]
    return [
        ("time in all", f"<= {TOTAL_SECONDS} s", f"{wall:.0f} s (demo's own count {r['total_seconds']:.0f} s, "
         f"training {r['train_seconds']:.0f} s, {r['steps']} steps)", wall <= TOTAL_SECONDS),
        ("held-out MLM accuracy", f">= {RATIO:g} x {b['mlm_accuracy']:.3f} = {RATIO * b['mlm_accuracy']:.3f}",
         f"{a['mlm_accuracy']:.3f} ({ratio:.2f}x always {b['most_frequent_token']!r})", ratio >= RATIO),
        ("... at the [MASK] inputs", "reported (the context alone; no copying)",
         f"{a['mlm_accuracy_at_mask']:.3f} (always {b['most_frequent_token']!r}: {b['mlm_accuracy_at_mask']:.3f})", True),
        ("held-out MLM top-5", "reported", f"{a['mlm_top5_accuracy']:.3f} (5 most frequent tokens: "
         f"{b['mlm_top5_accuracy']:.3f})", True),
        ("held-out MLM loss", f"clearly below the unigram entropy {b['unigram_entropy']:.3f}",
         f"{a['mlm_loss']:.3f} ({below:+.3f} nats below)", below >= 0.2),
        ("NSP accuracy", f">= {b['nsp_majority']:.3f} + {NSP_POINTS:g}, or said why not",
         f"{a['nsp_accuracy']:.3f} ({'learned' if nsp['learned'] else 'not learned; the demo says why'})",
         nsp["learned"] or "Why:" in nsp["explanation"]),
        ("fill-mask, 10 held-out prompts", "ranks before/after, how many in the top 5",
         f"{fill['in_top5_before']} -> {fill['in_top5_after']} of {len(fill['prompts'])} in the top 5; median rank "
         f"{fill['median_rank_before']:g} -> {fill['median_rank_after']:g}", len(fill["prompts"]) == 10),
    ] + ([("(optional) fine-tuning", "pre-trained beats random init, same steps",
           f"{ft['pretrained']:.3f} vs {ft['random_init']:.3f} after {ft['steps']} steps (majority {ft['majority']:.3f})",
           ft["pretrained"] > ft["random_init"])] if ft else [])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", help="comma-separated step counts: one demo each, --train_seconds 0 (the budget curve)")
    p.add_argument("--flags", default="", help="more demo flags, e.g. \"--seed 1\"")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per demo before giving up")
    args = p.parse_args()
    flags = shlex.split(args.flags)
    if not args.steps:
        r, wall, l0, l1 = run_demo(flags, args.timeout)
        print(f"npbert demo {' '.join(flags)}: load {l0} before, {l1} after (2-core machine; 1-minute load average)")
        rows = targets(r, wall)
        w = max(len(t) for t, *_ in rows)
        for name, wanted, got, met in rows:
            print(f"  {name:<{w}s}  {'met' if met else 'NOT MET':7s}  wanted {wanted}\n  {'':<{w}s}           got    {got}")
        return
    print(f"{'steps':>6s} {'train s':>8s} {'wall s':>7s} {'load':>9s} {'top-1':>6s} {'x base':>6s} {'@MASK':>6s} {'top-5':>6s} "
          f"{'MLM loss':>8s} {'unigram':>7s} {'NSP':>6s} {'major.':>6s} {'in top5':>7s} {'med.rank':>8s} "
          f"{'ft pre/rand':>11s}")
    for steps in [int(s) for s in args.steps.split(",")]:
        r, wall, l0, l1 = run_demo(["--max_steps", str(steps), "--train_seconds", "0"] + flags, args.timeout)
        b, a, fill, ft = r["baselines"], r["after"], r["fill_mask"], r.get("fine_tuning")
        print(f"{r['steps']:>6d} {r['train_seconds']:>8.0f} {wall:>7.0f} {l0 + '-' + l1:>9s} {a['mlm_accuracy']:>6.3f} "
              f"{a['mlm_accuracy'] / b['mlm_accuracy']:>6.2f} {a['mlm_accuracy_at_mask']:>6.3f} {a['mlm_top5_accuracy']:>6.3f} {a['mlm_loss']:>8.3f} "
              f"{b['unigram_entropy']:>7.3f} {a['nsp_accuracy']:>6.3f} {b['nsp_majority']:>6.3f} "
              f"{fill['in_top5_after']:>4d}/{len(fill['prompts']):<2d} {fill['median_rank_after']:>8g} "
              + (f"{ft['pretrained']:.3f}/{ft['random_init']:.3f}" if ft else ""), flush=True)


if __name__ == "__main__":
    main()
