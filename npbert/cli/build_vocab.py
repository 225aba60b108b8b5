"""`npbert build-vocab`: learn a WordPiece vocabulary from text files (npbert/data/vocab.py)."""
import os

from npbert.cli.common import CliError, UsageError, positive_int
from npbert.cli.outputs import refuse_overwriting_inputs
from npbert.data.vocab import build_vocab


def add_parser(commands):
    p = commands.add_parser("build-vocab", help="learn a WordPiece vocabulary (vocab.txt) from a corpus",
                            description="Learn a WordPiece vocabulary from text files as the tokenizers library's "
                                        "WordPieceTrainer does: BasicTokenizer words, pieces merged by frequency, "
                                        "## continuations, the special tokens first.")
    p.add_argument("--input_file", nargs="+", required=True, help="text files (every line is read)")
    p.add_argument("--vocab_size", type=positive_int, required=True, help="entries in vocab.txt")
    p.add_argument("--output_file", default="vocab.txt", help="where to write it (default vocab.txt)")
    p.add_argument("--do_lower_case", type=lambda s: s.lower() in ("1", "true", "yes"), default=True,
                   help="lower-case and strip accents (default true)")
    p.add_argument("--min_frequency", type=positive_int, default=2, help="a merge needs this many occurrences")
    p.add_argument("--limit_alphabet", type=positive_int, default=1000, help="keep this many characters at most")
    p.set_defaults(run=run)


def run(args):
    for path in args.input_file:
        if not os.path.isfile(path):
            raise UsageError(f"--input_file {path}: no such file")
    refuse_overwriting_inputs([("--output_file", args.output_file)], [("--input_file", p) for p in args.input_file])
    try:
        vocab = build_vocab(args.input_file, args.vocab_size, args.output_file, args.do_lower_case,
                            args.min_frequency, args.limit_alphabet)
    except ValueError as e:
        raise CliError(str(e)) from None
    print(f"wrote {args.output_file}: {len(vocab)} tokens"
          + (f" (fewer than {args.vocab_size}: no pair left occurring {args.min_frequency} times)"
             if len(vocab) < args.vocab_size else ""))
    return 0
