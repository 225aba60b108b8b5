"""What every `npbert` command shares: the error a user can fix, one-line errors, help pages
that show defaults, argparse value types, the training flags, the frame of a training command
(`training_run`), and loading a checkpoint so that what is wrong with it is said (a random
head, a length the model cannot take)."""
import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import sys
import textwrap
import warnings

import numpy as np

import npbert
from npbert import io
from npbert.config import BertConfig
from npbert.distributed import DistributedError
from npbert.io import find_weights_file
from npbert.io.errors import CheckpointError, RunError
from npbert.task_names import TASKS, canonical_task, describe_tasks, task_names
from npbert.training import TrainingArguments
from npbert.training.checkpoint import describe_last_checkpoint
from npbert.training.runs import RunLock, prepare_output_dir
from npbert.training.signals import TrainingInterrupted


class CliError(Exception):
    """A problem the command reports in one line, without a traceback: by default a failure (exit
    status 1): something the command met is wrong (a file's contents, a corrupt checkpoint, the
    output directory's state, a run that broke, a missing package).  See UsageError."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


class UsageError(CliError):
    """What was typed is wrong (exit status 2, as argparse's own errors): a flag's value, flags
    that do not go together or are missing, a path that does not exist or is not the kind the
    flag takes, a model or file of the wrong kind for the command or task.  The fix is a
    change to the command line; the message names the flag."""

    def __init__(self, message):
        super().__init__(message, status=2)


def one_line(text, limit=600):
    """A message on one line: its lines joined with "; ", cut at `limit` characters (None: not
    cut, for npbert's own messages, which may end with a command to copy)."""
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    text = "; ".join(parts)
    return text if limit is None or len(text) <= limit else text[:limit - 5] + " ..."


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written (the format lists of finetune / predict keep their lines), every
    option's default at the end of its help: "(default: 128)", and help lines broken between
    words only (a task name such as question-answering stays whole)."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("%(default)" in text or "default" in text.lower() or not action.option_strings
                or default in (None, False, argparse.SUPPRESS) or isinstance(action, argparse._StoreTrueAction)):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse with a one-line usage error (not the whole usage, which for finetune is a page),
    and HelpFormatter for every subcommand."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


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


# The command that runs a task another command does not (for the --task error).
TASK_ELSEWHERE = {"fill-mask": "npbert pretrain trains a masked LM; npbert predict --task fill-mask and "
                               "npbert fill-mask use one",
                  "feature-extraction": "npbert embed gives a text's vector",
                  "multiple-choice": "npbert finetune and npbert predict run it"}


def add_task_argument(parser, command, tasks, required=False, help=""):
    """`--task` with the names of npbert/task_names.py: each of `tasks` (canonical names) or one of
    its aliases, stored as the canonical name.  Any other name is a one-line usage error listing
    the names this command takes, and which command runs the task when another one does."""

    def task(text):
        name = canonical_task(text)
        if name in tasks:
            return name
        hint = f" ({TASK_ELSEWHERE[name]})" if name in TASKS and name in TASK_ELSEWHERE else ""
        raise argparse.ArgumentTypeError(f"npbert {command} does not run {text!r}{hint}; give one of "
                                         f"{describe_tasks(tasks)}")
    parser.add_argument("--task", type=task, required=required, metavar="TASK",
                        help=f"{help}: {describe_tasks(tasks)}".lstrip(": "))
    return task_names(tasks)


def _bool(text):
    if text.lower() in ("1", "true", "yes", "y"):
        return True
    if text.lower() in ("0", "false", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# What each TrainingArguments field does (transformers' meanings), for the help pages.
TRAINING_HELP = {
    "num_train_epochs": "passes over the training data (a fraction is allowed)",
    "max_steps": "optimizer steps; > 0 overrides num_train_epochs",
    "per_device_train_batch_size": "training examples per step (per process under mpiexec)",
    "per_device_eval_batch_size": "examples per evaluation / prediction batch",
    "gradient_accumulation_steps": "micro-batches summed into one optimizer step",
    "learning_rate": "the peak learning rate of the schedule",
    "weight_decay": "decoupled weight decay (AdamW); biases and LayerNorm weights get none",
    "adam_beta1": "Adam's beta1", "adam_beta2": "Adam's beta2", "adam_epsilon": "Adam's epsilon",
    "max_grad_norm": "clip the gradients' global L2 norm to this (0: no clipping)",
    "lr_scheduler_type": "the learning-rate schedule (linear, cosine, constant, ...)",
    "lr_scheduler_kwargs": "extra schedule arguments, as JSON",
    "warmup_ratio": "fraction of the steps spent warming the learning rate up from 0",
    "warmup_steps": "warm-up steps (overrides warmup_ratio when > 0)",
    "logging_steps": "log the mean training loss every N steps (a value < 1: a fraction of the run)",
    "logging_first_step": "log the first step too",
    "eval_strategy": "when to evaluate: no, steps (every eval_steps) or epoch",
    "eval_steps": "evaluate every N steps with eval_strategy steps (default: logging_steps)",
    "save_strategy": "when to save a checkpoint-N directory: no, steps or epoch",
    "save_steps": "save every N steps with save_strategy steps",
    "save_total_limit": "keep at most this many checkpoint-N directories (the best one is kept as well)",
    "save_only_model": "checkpoints hold the model alone, not the optimizer's state: a third of the size with "
                       "Adam, but training cannot resume from them (a stop on a signal still saves everything)",
    "load_best_model_at_end": "after training, load the checkpoint with the best metric_for_best_model",
    "metric_for_best_model": "the metric that picks the best checkpoint (e.g. f1, accuracy, loss)",
    "greater_is_better": "whether a larger metric_for_best_model is better (default: by its name)",
    "seed": "seed of the shuffling, the dropout and the fresh head's initialisation",
    "optim": "the optimizer: adamw, adam, adam_weight_decay (Google's) or bert_adam",
    "dataloader_drop_last": "drop the last incomplete batch of an epoch",
    "label_names": "the batch keys holding the labels (comma-separated)",
    "layerwise_lr_decay": "multiply the learning rate by this per layer downwards (Sun et al. 2019)",
    "head_learning_rate": "the learning rate of the task head (default: learning_rate)",
    "early_stopping_patience": "stop after this many evaluations without improvement",
    "early_stopping_threshold": "the improvement that counts for early stopping",
    "plot": "draw training_curves.png (needs matplotlib)",
    "gradient_checkpointing": "keep each layer's input only and recompute its activations in the backward: "
                              "the same gradients, less memory, about one more forward per step",
    "overwrite_output_dir": "start over in an --output_dir that holds another run's checkpoints or model "
                            "(its checkpoints are removed)",
    "ignore_changed_args": "resume even though a flag that changes the result (seed, learning_rate, ...) "
                           "differs from the checkpoint's",
}


def add_training_arguments(parser, help_overrides=None, **defaults):
    """Every TrainingArguments field as `--name value` (transformers' HfArgumentParser style),
    with `defaults` replacing the dataclass defaults; output_dir is left to the command.
    `help_overrides`: {field: help text} where a command says more (e.g. per-task defaults)."""
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
        text = (help_overrides or {}).get(f.name) or TRAINING_HELP.get(f.name, f"TrainingArguments.{f.name}")
        group.add_argument(f"--{f.name}", type=kind, default=default, metavar=f.name.upper(), help=text, **extra)


def training_arguments(args, output_dir, **overrides):
    """TrainingArguments from the parsed `--name value` flags; bad values are a CliError."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainingArguments)
              if f.name != "output_dir" and hasattr(args, f.name)}
    for name in ("logging_steps", "eval_steps", "save_steps"):
        if values.get(name) is not None and float(values[name]).is_integer():
            values[name] = int(values[name])
    values.update(overrides)
    try:
        return TrainingArguments(output_dir=output_dir, **values)
    except ValueError as e:
        raise UsageError(str(e)) from None


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
    try:
        with RunLock(output_dir, command=" ".join(["npbert"] + sys.argv[1:])):
            prepare_output_dir(output_dir, overwrite_output_dir, resume_from_checkpoint)
            yield resume_command(command)
    except TrainingInterrupted as e:
        raise CliError(str(e), status=e.exit_status) from None
    except KeyboardInterrupt:
        raise CliError(f"interrupted (Ctrl-C) outside the training loop; {describe_last_checkpoint(output_dir)}",
                       status=130) from None
    except (RunError, CheckpointError, FloatingPointError, DistributedError) as e:   # (every rank, under mpiexec)
        raise CliError(str(e)) from None
    except OSError as e:
        if e.errno is None:
            raise
        raise CliError(f"{e.strerror or e} (errno {e.errno}){': ' + str(e.filename) if e.filename else ''}") from None


# ---- checkpoints -------------------------------------------------------------------------------
CHECKPOINT_HOLDS = "a checkpoint directory holds config.json, the weights and vocab.txt"


def check_checkpoint_dir(path, flag="--model", weights=True, vocabulary=False):
    """A UsageError when `path` is not a checkpoint directory: missing, a file, or without a
    config (or weights file, or vocabulary, when asked): the flag names the wrong thing.  A
    checkpoint whose files are there but wrong is the loaders' to report (a failure, status 1)."""
    if not os.path.isdir(path):
        why = "no such directory" if not os.path.exists(path) else "not a directory"
        raise UsageError(f"{flag} {path}: {why} ({CHECKPOINT_HOLDS})")
    if not any(os.path.isfile(os.path.join(path, n)) for n in ("config.json", "bert_config.json")):
        raise UsageError(f"{flag} {path}: not a checkpoint directory: no config.json in it ({CHECKPOINT_HOLDS})")
    if weights:
        try:
            find_weights_file(path)
        except CheckpointError:
            raise UsageError(f"{flag} {path}: not a checkpoint directory: no weights file in it (model.safetensors, "
                             f"pytorch_model.bin, tf_model.h5, ...; {CHECKPOINT_HOLDS})") from None
    if vocabulary and not any(os.path.isfile(os.path.join(path, n)) for n in ("vocab.txt", "tokenizer.json")):
        raise UsageError(f"{flag} {path}: no vocab.txt (or tokenizer.json) in it to tokenize the text with")


def read_model_config(path, flag="--model"):
    """The BertConfig of a checkpoint directory; a UsageError naming the flag when there is none,
    a CliError when it cannot be read."""
    check_checkpoint_dir(path, flag, weights=False)
    try:
        return BertConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CliError(f"{flag} {path}: {e}") from None


def resolve_max_seq_length(value, config, flag="--max_seq_length", default=128, where=""):
    """The sequence length to use.  Given (`value` not None): it must fit the model's
    max_position_embeddings, else a CliError.  Not given: min(default, the model's limit), as
    transformers' run_glue.py does, with a note when the model's limit is the smaller."""
    limit = int(config.max_position_embeddings)
    if value is not None:
        if value > limit:
            raise UsageError(f"{flag} {value} is more than the model{where} takes: its max_position_embeddings is "
                             f"{limit}; use {flag} {limit} or less")
        return value
    if default > limit:
        print(f"note: the model{where} takes at most {limit} tokens (max_position_embeddings): using "
              f"{flag} {limit} instead of the default {default}", file=sys.stderr)
        return limit
    return default


def load_checkpoint(model_class, path, flag="--model", dtype=None, require_trained=None, what=None, **overrides):
    """`model_class.from_pretrained(path)`, its warnings ("not used", "newly initialized")
    printed as notes, its errors a CliError naming the flag.  `require_trained`: a key prefix
    (e.g. "cls.predictions.") that must come from the checkpoint, not be initialized fresh:
    `what` then says what the command cannot do with a random one."""
    check_checkpoint_dir(path, flag)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = model_class.from_pretrained(path, dtype=np.float32 if dtype is None else dtype, **overrides)
    except (OSError, ValueError, KeyError, TypeError, MemoryError) as e:
        raise CliError(f"{flag} {path}: {e}") from None
    if require_trained:
        fresh = [k for k in missing_keys(model, path) if k.startswith(require_trained)]
        if fresh:
            raise UsageError(f"{flag} {path}: the checkpoint has no trained {what or require_trained} "
                             f"({', '.join(fresh[:3])}{' ...' if len(fresh) > 3 else ''} are not in it): its answers "
                             f"would come from a randomly initialised head. Use a checkpoint saved with that head")
    for w in caught:
        print(f"note: {one_line(w.message, limit=400)}", file=sys.stderr)
    return model


def missing_keys(model, path):
    """The parameters of `model` that the checkpoint at `path` does not hold (so were initialised
    fresh when it was loaded), by npbert.io's name matching."""
    weights_file = io.find_weights_file(path)
    expected = {name: tuple(p.shape) for name, p in model.named_parameters()}      # a tied weight once
    result = io.match_state_dict(io.read_state_dict(weights_file), expected,
                                 base_model_prefix=type(model).base_model_prefix)
    return list(result.missing)


def load_tokenizer(path, flag="--model", **kwargs):
    """BertTokenizer.from_pretrained(path), its errors a CliError naming the flag; its size checked
    against the vocab_size of path's config.json when there is one (check_vocabulary)."""
    if not os.path.exists(path):
        raise UsageError(f"{flag} {path}: no such directory ({CHECKPOINT_HOLDS})")
    if os.path.isdir(path) and not any(os.path.isfile(os.path.join(path, n)) for n in ("vocab.txt", "tokenizer.json")):
        raise UsageError(f"{flag} {path}: no vocab.txt (or tokenizer.json) in it to tokenize the text with")
    try:
        tokenizer = npbert.BertTokenizer.from_pretrained(path, **kwargs)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CliError(f"{flag} {path}: {e}") from None
    if os.path.isdir(path) and any(os.path.isfile(os.path.join(path, n)) for n in ("config.json", "bert_config.json")):
        try:
            vocab_size = int(BertConfig.from_pretrained(path).vocab_size)
        except (OSError, ValueError, KeyError, TypeError):
            return tokenizer                   # the model's loader reports a bad config
        check_vocabulary(len(tokenizer), vocab_size, f"{flag} {path}")
    return tokenizer


VOCAB_SLACK = 128     # rows a vocab_size rounded up (to a multiple of 8, 64 or 128) leaves unused


def check_vocabulary(n_tokens, vocab_size, where):
    """The tokenizer's `n_tokens` ids must index the model's `vocab_size` embedding rows: more is
    a CliError (an id past the table); far fewer (more than VOCAB_SLACK rows unused) a warning
    naming both sizes: the vocabulary is likely another model's, and every text is cut into the
    wrong tokens without any error."""
    if n_tokens > vocab_size:
        raise CliError(f"{where}: the tokenizer has {n_tokens} tokens but the model's vocab_size is {vocab_size}: "
                       f"ids {vocab_size}..{n_tokens - 1} have no embedding row. The vocab.txt does not belong to "
                       "this model; use the one it was trained with")
    if vocab_size - n_tokens > VOCAB_SLACK:
        print(f"warning: {where}: the tokenizer has {n_tokens} tokens but the model's vocab_size is {vocab_size} "
              f"({vocab_size - n_tokens} embedding rows no token reaches): the vocab.txt is probably not the one "
              "the model was trained with, and its ids would mean other tokens to the model", file=sys.stderr)
