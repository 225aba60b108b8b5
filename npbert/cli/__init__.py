"""The `npbert` command line: one module per command.

Each module in COMMANDS has `add_parser(subparsers)`, which registers its subcommand and sets
`run=<function(args) -> exit status>` as the parser's default.  Its imports are at its top, as
every module's (`npbert --help` already loads npbert itself, nearly all of what they need);
only optional dependencies (matplotlib) are imported where a picture is drawn.

Every help page shows each flag's default (HelpFormatter).  An error is one line on stderr,

    npbert finetune: error: --train_file data/train.csv:14: label 'nan' is not a class ...

naming what was wrong (the file and line, the flag, the field); `--debug` (anywhere on the
command line, or NPBERT_DEBUG=1) shows the Python traceback instead.

Exit status, the same in every command: 0 success; 2 a usage error, what was typed is wrong
(argparse's errors and common.UsageError: a flag's value, flags that do not go together, a path
that does not exist or is not the kind the flag takes, a model of the wrong kind for the
command); 1 a failure (common.CliError: a file's contents, a corrupt checkpoint, the output
directory's state, a run that broke, or an error npbert did not foresee); 128 + N after signal N
(130 Ctrl-C, 143 SIGTERM).
"""
import importlib
import os
import sys

from npbert import __version__
from npbert.cli import mpi
from npbert.cli.common import CliError, HelpFormatter, OneLineErrorParser, one_line

# The commands, in the order `npbert --help` lists them: module names under npbert/cli/.
COMMANDS = [
    "demo",
    "explain",
    "build_vocab",
    "create_pretraining_data",
    "pretrain",
    "fill_mask",
    "finetune",
    "predict",
    "attention",
    "embed",
    "attribute",
    "head_importance",
]


def build_parser():
    parser = OneLineErrorParser(
        prog="npbert", formatter_class=HelpFormatter,
        description="npbert: a NumPy-only reference implementation of BERT (forward and hand-written backward).",
        epilog="Run `npbert explain` for a walk through one sentence; docs/index.md is the read-along. "
               "Add --debug to any command to see the Python traceback of an error.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--debug", action="store_true", help="on an error, show the Python traceback")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineErrorParser)
    for name in COMMANDS:
        importlib.import_module(f"npbert.cli.{name}").add_parser(commands)
    return parser


def main(argv=None):
    """Entry point of the `npbert` console script and of `python -m npbert`.  Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("NPBERT_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]           # accepted before or after the command
    mpi.quiet_other_ranks()                  # under mpiexec: rank 0 alone prints (cli/mpi.py)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)       # unknown commands and options: one line and exit status 2
    except SystemExit as e:
        mpi.grace(e.code)
        raise
    if args.version:
        print(f"npbert {__version__}")
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        print("\nnpbert: error: a command is required (e.g. `npbert explain`)", file=sys.stderr)
        mpi.grace(2)
        return 2
    where = f"npbert {args.command}"
    ranks = None
    try:
        ranks = mpi.start(args.command, args, argv)      # mpiexec -n N npbert pretrain/finetune: N ranks, data-parallel
        status, message = args.run(args), None
    except CliError as e:
        if debug:
            raise
        status, message = e.status, one_line(str(e), limit=None)
    except KeyboardInterrupt:
        if debug:
            raise
        status, message = 130, "interrupted"
    except Exception as e:                          # a problem the command did not foresee: still one line
        if debug:
            raise
        status, message = 1, f"{type(e).__name__}: {one_line(str(e))} (run with --debug for the traceback)"
    if message is not None:
        print(f"{where}: {message}" if status == 130 and message == "interrupted" else f"{where}: error: {message}",
              file=sys.stderr)
    return mpi.finish(ranks, status, message, where)
