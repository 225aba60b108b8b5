"""A command must not write over what it reads (issue 48): one check, called by every command
that writes a file before it does any work.

    refuse_overwriting_inputs(outputs=[("--html", args.html)], inputs=[("--model", args.model)])

An output is `(flag, path)`, a file the command writes, or `(flag, folder, entries)`, a folder
the command writes `entries` into (glob patterns of the names at its top: the files it writes,
the checkpoint-N folders it saves and removes).  An input is `(flag, path)`: a file the command
reads, or a folder (a model folder), every file inside which it may read.  A path of None is
skipped (a flag not given).

Refused, with a UsageError (exit status 2) naming the flag, the path and what to do:
  - an output file that is an input file (the same path, a symlink to it, a relative path to it,
    or a hard link: os.path.samefile);
  - an output file inside an input folder, or the same file as one in it;
  - an output folder that is an input folder, lies inside one, or is an input file;
  - an input inside an output folder, under one of the entries the command writes there.
Paths are compared resolved (os.path.realpath), and each existing folder above an output is
compared with os.path.samefile, so a folder reached by another name (a bind mount, a
case-insensitive file system) is still the same folder.
"""
import fnmatch
import os

from npbert.cli.common import UsageError

# What a training run (npbert pretrain / finetune, the Trainer) writes or removes at the top of
# its --output_dir: the saved model and tokenizer (save_pretrained), the run's state and
# pictures, the task's results and predictions, and its checkpoint-N folders (saved, rotated,
# removed by --overwrite_output_dir).
TRAINING_RUN_ENTRIES = (
    "config.json", "model.safetensors", "model.safetensors.index.json", "model-*.safetensors", "pytorch_model.bin",
    "tf_model.h5", "npbert_model.h5", "manifest.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json", "trainer_state.json", "training_args.json",
    "training_curves.png", "eval_results.json", "all_results.json", "predictions.jsonl", "predictions.json",
    "nbest_predictions.json", "null_odds.json", "checkpoint-*", ".npbert-*")


def _real(path):
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _same(a, b):
    """Whether a and b name one file or folder: os.path.samefile when both exist (hard links,
    bind mounts, another case on a case-insensitive file system), else the resolved paths."""
    if os.path.exists(a) and os.path.exists(b):
        try:
            return os.path.samefile(a, b)
        except OSError:
            pass
    return _real(a) == _real(b)


def place_in(path, folder):
    """Where `path` is in `folder`: "." for the folder itself, a relative path for something
    below it, None when it is not there."""
    real = _real(path)
    here = real
    while True:
        if _same(here, folder):
            return os.path.relpath(real, here)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _same_as_one_inside(path, folder):
    """The file in `folder` (at any depth) that `path` is another name of (a hard link), or None."""
    if not os.path.isfile(path):
        return None
    stat = os.stat(path)
    if stat.st_nlink < 2:                       # no other name anywhere: nothing to look for
        return None
    for top, _, names in os.walk(folder):
        for name in names:
            candidate = os.path.join(top, name)
            try:
                other = os.stat(candidate)
            except OSError:
                continue
            if (other.st_ino, other.st_dev) == (stat.st_ino, stat.st_dev):
                return candidate
    return None


def _file_against(flag, path, in_flag, in_path):
    """The message refusing output file `path` against input `in_path`, or None."""
    if os.path.isdir(in_path):
        where = place_in(path, in_path)
        if where == ".":
            return f"{flag} {path} is the {in_flag} folder itself; give a file outside it to write"
        twin = None if where is not None else _same_as_one_inside(path, in_path)
        if where is not None or twin:
            what = f"inside the {in_flag} folder {in_path}" if where is not None else \
                f"the same file as {twin} in the {in_flag} folder"
            link = os.path.realpath(path) != os.path.abspath(path)
            what = f"(a link to {os.path.realpath(path)}) {what}" if link and where is not None else what
            return (f"{flag} {path} is {what}, which the command reads: writing there could replace the "
                    f"model's files; write to a path outside {in_path}")
        return None
    if _same(path, in_path):
        alias = "" if _real(path) == _real(in_path) and os.fspath(path) == os.fspath(in_path) else \
            f" (the same file as {in_path})"
        return (f"{flag} {path} is the {in_flag} file{alias}: writing it would replace what the command reads; "
                f"write to another file")
    return None


def _folder_against(flag, folder, entries, in_flag, in_path):
    """The message refusing output folder `folder` against input `in_path`, or None."""
    if os.path.isdir(in_path):
        where = place_in(folder, in_path)
        if where == ".":
            return (f"{flag} {folder} is the {in_flag} folder: the command would write its files over the ones it "
                    f"reads; give another {flag}")
        if where is not None:
            return (f"{flag} {folder} is inside the {in_flag} folder {in_path}, which the command reads; give a "
                    f"{flag} outside it")
    elif _same(folder, in_path):
        return f"{flag} {folder} is the {in_flag} file; give a folder to write into"
    where = place_in(in_path, folder)
    if where is not None and where != ".":
        top = where.split(os.sep)[0]
        hit = next((p for p in entries if fnmatch.fnmatch(top, p)), None)
        if hit is not None:
            return (f"{in_flag} {in_path} is inside {flag} {folder}, where the command writes (or removes) {top}: "
                    f"it would be replaced; move it out of {folder} or give another {flag}")
    return None


def refuse_overwriting_inputs(outputs, inputs):
    """Raise a UsageError when an output would write over an input (see the module docstring).
    outputs: [(flag, file) or (flag, folder, entries)]; inputs: [(flag, file or folder)].
    Inputs that do not exist are left to the command's own checks."""
    inputs = [(f, p) for f, p in inputs if p is not None and os.path.exists(p)]
    for output in outputs:
        flag, path = output[0], output[1]
        if path is None:
            continue
        for in_flag, in_path in inputs:
            if len(output) == 3:
                message = _folder_against(flag, path, output[2], in_flag, in_path)
            else:
                message = _file_against(flag, path, in_flag, in_path)
            if message:
                raise UsageError(message)
