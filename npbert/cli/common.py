"""What every `npbert` command shares: the error a user can fix, and argparse value types."""
import argparse


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
        group.add_argument(f"--{f.name}", type=kind, default=default, metavar=f.name.upper(),
                           help=f"(default {default!r})")


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
