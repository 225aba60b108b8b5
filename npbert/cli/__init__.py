"""The `npbert` command line: one module per command.

Each module in COMMANDS has `add_parser(subparsers)`, which registers its subcommand and sets
`run=<function(args) -> exit status>` as the parser's default.  A command module keeps its
heavy imports inside its functions, so that `npbert --help` stays fast.

Exit status: 0 success, 1 a failure the command reports, 2 a usage error.
"""
import argparse
import importlib
import sys

from npbert.cli.common import CliError

# The commands, in the order `npbert --help` lists them: module names under npbert/cli/.
COMMANDS = [
    "demo",
    "explain",
    "build_vocab",
    "create_pretraining_data",
    "pretrain",
    "fill_mask",
    "finetune",
    "attention",
    "embed",
    "attribute",
    "head_importance",
]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="npbert",
        description="npbert: a NumPy-only reference implementation of BERT (forward and hand-written backward).",
        epilog="Run `npbert explain` for a walk through one sentence; docs/index.md is the read-along.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"npbert.cli.{name}").add_parser(commands)
    return parser


def main(argv=None):
    """Entry point of the `npbert` console script and of `python -m npbert`.  Returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)           # unknown commands and options: a message and exit status 2
    if args.version:
        from npbert import __version__
        print(f"npbert {__version__}")
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        print("\nnpbert: error: a command is required (e.g. `npbert explain`)", file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except CliError as e:
        print(f"npbert {args.command}: error: {e}", file=sys.stderr)
        return e.status
