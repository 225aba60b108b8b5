"""What every `npbert` command shares: the error a user can fix, argparse value types, the
TrainingArguments flags, and the frame of a training command (`training_run`)."""
import argparse
import contextlib
import shlex
import sys


class CliError(Exception):
    """A problem the user can fix (a bad path, a bad option); printed without a traceback."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def non_negative_int(text):
    """argparse type: a non-negative integer (what np.random.default_rng accepts as a seed)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _bool(text):
    if text.lower() in ("1", "true", "yes", "y"):
        return True
    if text.lower() in ("0", "false", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_training_arguments(parser, **defaults):
    """Every TrainingArguments field as `--name value` (transformers' HfArgumentParser style),
    with `defaults` replacing the dataclass defaults; output_dir is left to the command."""
    import dataclasses
    import json

    from npbert.training import TrainingArguments
    group = parser.add_argument_group("training arguments (npbert.training.TrainingArguments)")
    for f in dataclasses.fields(TrainingArguments):
        if f.name == "output_dir":
            continue
        default = defaults.get(f.name, f.default if f.default is not dataclasses.MISSING else f.default_factory())
        kind = {bool: _bool, int: int, float: float, str: str, dict: json.loads, list: lambda s: s.split(",")}.get(
            f.type if isinstance(f.type, type) else {"bool": bool, "int": int, "float": float, "str": str,
                                                     "dict": dict, "list": list}.get(f.type, str), str)
        if f.name in ("logging_steps", "eval_steps", "save_steps", "num_train_epochs", "learning_rate"):
            kind = float
        extra = {"nargs": "?", "const": True} if kind is _bool else {}    # `--flag` alone means true
        group.add_argument(f"--{f.name}", type=kind, default=default, metavar=f.name.upper(),
                           help=_FLAG_HELP.get(f.name, "") + f"(default {default!r})", **extra)


_FLAG_HELP = {
    "overwrite_output_dir": "start over in an --output_dir that holds another run's checkpoints or model "
                            "(its checkpoints are removed) ",
    "ignore_changed_args": "resume even though a flag that changes the result (seed, learning_rate, ...) "
                           "differs from the checkpoint's ",
}


def training_arguments(args, output_dir, **overrides):
    """TrainingArguments from the parsed `--name value` flags; bad values are a CliError."""
    import dataclasses

    from npbert.training import TrainingArguments
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainingArguments)
              if f.name != "output_dir" and hasattr(args, f.name)}
    for name in ("logging_steps", "eval_steps", "save_steps"):
        if values.get(name) is not None and float(values[name]).is_integer():
            values[name] = int(values[name])
    values.update(overrides)
    try:
        return TrainingArguments(output_dir=output_dir, **values)
    except ValueError as e:
        raise CliError(str(e)) from None


def resume_command(command, argv=None):
    """The command line that resumes this run, with "{checkpoint}" where the checkpoint goes:
    this process's own arguments with --resume_from_checkpoint replaced (or added)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if command not in argv:
        return f"npbert {command} <the same flags> --resume_from_checkpoint {{checkpoint}}"
    argv = argv[argv.index(command) + 1:]
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a == "--resume_from_checkpoint":
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            continue
        if a.startswith("--resume_from_checkpoint="):
            continue
        out.append(a)
    quoted = " ".join(shlex.quote(a).replace("{", "{{").replace("}", "}}") for a in out)
    return f"npbert {command} {quoted} --resume_from_checkpoint {{checkpoint}}"


@contextlib.contextmanager
def training_run(command, output_dir, overwrite_output_dir=False, resume_from_checkpoint=None):
    """The frame of `npbert pretrain` / `npbert finetune`: holds output_dir's run lock for the
    whole command, checks the directory (another run's files, leftovers), and turns what a run
    can raise (RunError, CheckpointError, a full disk, TrainingInterrupted, a NaN loss,
    Ctrl-C outside the training loop) into a one-line CliError.  Yields the resume command."""
    from npbert.io.errors import CheckpointError, RunError
    from npbert.training.runs import RunLock, prepare_output_dir
    from npbert.training.signals import TrainingInterrupted
    try:
        with RunLock(output_dir, command=" ".join(["npbert"] + sys.argv[1:])):
            prepare_output_dir(output_dir, overwrite_output_dir, resume_from_checkpoint)
            yield resume_command(command)
    except TrainingInterrupted as e:
        raise CliError(str(e), status=e.exit_status) from None
    except KeyboardInterrupt:
        from npbert.training.checkpoint import describe_last_checkpoint
        raise CliError(f"interrupted (Ctrl-C) outside the training loop; {describe_last_checkpoint(output_dir)}",
                       status=130) from None
    except (RunError, CheckpointError, FloatingPointError) as e:
        raise CliError(str(e)) from None
    except OSError as e:
        if e.errno is None:
            raise
        raise CliError(f"{e.strerror or e} (errno {e.errno}){': ' + str(e.filename) if e.filename else ''}") from None
