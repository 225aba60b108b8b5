"""`npbert build-vocab`: learn a WordPiece vocabulary from text files.

    npbert build-vocab --input_file corpus.txt --vocab_size 2000 --output vocab.txt

As the `tokenizers` library's WordPieceTrainer (see npbert/data/vocab.py): BasicTokenizer words,
BPE merges of the most frequent adjacent pieces with "##" continuations, special tokens first.
"""
from npbert.cli.common import CliError


def add_parser(subparsers):
    p = subparsers.add_parser("build-vocab", help="learn a WordPiece vocabulary (vocab.txt) from text",
                              description=__doc__.split("\n\n", 1)[1])
    p.add_argument("--input_file", required=True, help="comma-separated text files")
    p.add_argument("--vocab_size", type=int, required=True, help="entries of the vocabulary, specials included")
    p.add_argument("--output", default="vocab.txt", help="where to write vocab.txt (default ./vocab.txt)")
    p.add_argument("--min_frequency", type=int, default=2, help="a pair occurring fewer times is not merged")
    p.add_argument("--do_lower_case", type=lambda t: t.lower() in ("1", "true", "yes"), default=True)
    p.set_defaults(run=run)
    return p


def run(args):
    from npbert.data.pretraining import _lines
    from npbert.data.vocab import build_vocab, write_vocab
    lines = []
    for f in args.input_file.split(","):
        try:
            lines.extend(_lines(f))
        except OSError as e:
            raise CliError(f"--input_file {f}: {e.strerror}") from None
        except ValueError as e:
            raise CliError(str(e)) from None
    try:
        vocab = build_vocab(lines, args.vocab_size, min_frequency=args.min_frequency,
                            do_lower_case=args.do_lower_case)
    except ValueError as e:
        raise CliError(f"{args.input_file}: {e}") from None
    write_vocab(vocab, args.output)
    print(f"wrote {len(vocab)} tokens to {args.output}")
    return 0
