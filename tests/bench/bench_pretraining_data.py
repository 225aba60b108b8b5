"""Benchmark: create_training_instances, npbert vs google-research/bert's script (bert-tensorflow
1.0.4 through tests/google_reference.py, its own FullTokenizer), on the same Shakespeare
documents, vocabulary, arguments and seed; alternating rounds in one process.  Also checks the
two produce the same instances.

    python tests/bench/bench_pretraining_data.py [--speeches 2000] [--rounds 3]
"""
import argparse
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--speeches", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    import google_reference

    import npbert
    from npbert.data import build_vocab, create_training_instances, shakespeare
    cpd = google_reference.load("create_pretraining_data")
    tokenization = google_reference.load("tokenization")
    d = tempfile.mkdtemp()
    text = os.path.join(d, "train.txt")
    shakespeare.write_documents(shakespeare.documents(shakespeare.read_speeches()[:args.speeches]), text)
    vocab = os.path.join(d, "vocab.txt")
    build_vocab([text], 3000, vocab)
    kw = dict(max_seq_length=128, dupe_factor=2, short_seq_prob=0.1, masked_lm_prob=0.15, max_predictions_per_seq=20)
    ours_tok = npbert.BertTokenizer(vocab)
    google_tok = tokenization.FullTokenizer(vocab_file=vocab, do_lower_case=True)
    ours, theirs = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        a = create_training_instances([text], ours_tok, rng=random.Random(1), **kw)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = cpd.create_training_instances([text], google_tok, rng=random.Random(1), **kw)
        theirs.append(time.perf_counter() - t0)
    same = len(a) == len(b) and all(x.tokens == y.tokens and x.masked_lm_positions == y.masked_lm_positions
                                    for x, y in zip(a, b))
    speedup = [b_ / a_ for a_, b_ in zip(ours, theirs)]
    print(f"{len(a)} instances from {args.speeches} speeches ({os.path.getsize(text) / 1e6:.2f} MB), "
          f"identical to Google's: {same}")
    print(f"  npbert median {statistics.median(ours):.2f} s   Google median {statistics.median(theirs):.2f} s")
    print(f"  npbert is {statistics.median(speedup):.2f}x as fast (rounds {min(speedup):.2f}..{max(speedup):.2f})")


if __name__ == "__main__":
    main()
