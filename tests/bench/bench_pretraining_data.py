"""Benchmark: create_training_instances, npbert (npbert's BertTokenizer) vs Google's script with
its FullTokenizer (bert-tensorflow 1.0.4 through tests/google_reference.py), on the bundled
Shakespeare as documents, the same arguments and seed (the instances are equal: see
tests/data/test_pretraining_parity.py).  Target: >= 2x.  Alternating rounds in one process; the
ratio printed is the median of per-round ratios.

    python tests/bench/bench_pretraining_data.py [--rounds 3] [--kb 300]
"""
import argparse
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "..")]      # tests/ and the repository


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kb", type=int, default=300, help="about how many kilobytes of the 1.1 MB Shakespeare to use")
    args = p.parse_args()
    import google_reference
    from npbert.data import pretraining, shakespeare
    from npbert.data.vocab import build_vocab
    from npbert.tokenization import BertTokenizer
    d = tempfile.mkdtemp()
    speeches = shakespeare.read_speeches()
    docs = shakespeare.documents(speeches[:int(len(speeches) * args.kb / 1100)], 8)
    text_file = os.path.join(d, "docs.txt")
    shakespeare.write_documents(docs, text_file)
    vocab = os.path.join(d, "vocab.txt")
    build_vocab([text_file], 2000, output_file=vocab)
    cpd, tokenization = google_reference.load("create_pretraining_data"), google_reference.load("tokenization")
    settings = (128, 2, 0.1, 0.15, 20)
    runners = {
        "npbert": lambda: pretraining.create_training_instances([text_file], BertTokenizer(vocab), *settings,
                                                                random.Random(1)),
        "google": lambda: cpd.create_training_instances([text_file], tokenization.FullTokenizer(vocab, True),
                                                        *settings, random.Random(1)),
    }
    times = {k: [] for k in runners}
    for _ in range(args.rounds):
        for k, run in runners.items():
            t0 = time.perf_counter()
            n = len(run())
            times[k].append(time.perf_counter() - t0)
    print(f"{len(docs)} documents, {n} instances, {args.rounds} alternating rounds")
    for k in runners:
        print(f"  {k:7s} median {statistics.median(times[k]):6.2f} s")
    r = [g / o for o, g in zip(times["npbert"], times["google"])]
    print(f"  google / npbert {statistics.median(r):.2f}x (rounds {min(r):.2f}..{max(r):.2f})")


if __name__ == "__main__":
    main()
