"""Checkpoints of a training run: `output_dir/checkpoint-<step>/`.

    model.safetensors, config.json   the model, as save_pretrained writes it (transformers loads it)
    optimizer.safetensors            the optimizer's arrays (Adam's moments), "state/<param>/<key>"
    optimizer.json                   the optimizer's numbers and parameter groups
    scheduler.json                   the scheduler's step count and rates
    rng_state.json                   the generators: dropout (model.state.rng), the collator's
                                     (masking), as bit_generator.state dicts
    trainer_state.json               global_step, epoch, log_history, best metric, ... (transformers' keys)
    training_args.json               the TrainingArguments
    manifest.json                    every file's size and SHA-256 (npbert.io.manifest), written last

With save_only_model (transformers' field) a checkpoint holds the model, trainer_state.json,
training_args.json and the manifest only: a third of the size with Adam, and no resuming from it
(load_checkpoint says so).  A stop on a signal saves the whole state anyway (Trainer).

Everything is written into a hidden temporary directory next to the final one
(`.tmp-checkpoint-<step>-<pid>`) and renamed into place only when complete, so a run killed
while saving leaves the previous checkpoint intact.  Replacing a checkpoint of the same step
takes two renames (the old one to `.old-checkpoint-<step>-<pid>`, the new one into place); a
kill between them is repaired by `recover_interrupted_saves` when the next run starts.
Nothing is pickled: arrays in safetensors, the rest in JSON.

Loading checks before it changes anything: the manifest (a flipped bit, a truncated or
swapped file), the JSON files' fields, the step counters (the directory's name, global_step,
the scheduler's and the optimizer's step counts must agree), the optimizer state (moments for
every parameter), and that every array is finite.  Each failure is a CheckpointError naming
the file and what disagrees.
"""
import json
import os
import re
import shutil
import warnings

import numpy as np

from npbert.io import read_safetensors, write_safetensors
from npbert.io._atomic import _fsync_directory, atomic_write
from npbert.io.atomic_dir import find_leftovers, pid_alive
from npbert.io.checks import check_finite
from npbert.io.errors import CheckpointError as _IOCheckpointError
from npbert.io.errors import SaveError
from npbert.io.manifest import verify_manifest, write_manifest

from .trainer_state import TrainerState

PREFIX = "checkpoint"
_CHECKPOINT_RE = re.compile(rf"^{PREFIX}-(\d+)$")


class CheckpointError(_IOCheckpointError):
    """A checkpoint directory is missing a file, corrupt, inconsistent, or from another model or run."""


def _write_json(path, obj):
    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def _read_json(path, kind=dict):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; {os.path.dirname(path)} is not a complete npbert checkpoint") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None
    if kind is not None and not isinstance(value, kind):
        raise CheckpointError(f"{path}: expected a JSON {kind.__name__}, got {type(value).__name__}")
    return value


def _plain(x):
    """JSON-able copy: tuples to lists, NumPy scalars to Python numbers."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def save_checkpoint(directory, model, optimizer, scheduler, rng_states, trainer_state, args, only_model=False):
    """Write the checkpoint `directory` atomically (replacing one of the same name); `only_model`:
    without the optimizer, scheduler and generator states (save_only_model).  A failed write (a
    full disk) is a SaveError naming the file and the step; nothing is left behind."""
    parent, name = os.path.split(os.path.abspath(directory))
    tmp = os.path.join(parent, f".tmp-{name}-{os.getpid()}")
    try:
        os.makedirs(parent, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        _write_files(tmp, model, optimizer, scheduler, rng_states, trainer_state, args, only_model)
        write_manifest(tmp)                       # last: a directory with a manifest is complete
        old = None
        if os.path.exists(directory):
            old = os.path.join(parent, f".old-{name}-{os.getpid()}")
            os.rename(directory, old)
        os.rename(tmp, directory)                 # (a kill between these two: recover_interrupted_saves)
        _fsync_directory(parent)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        step = trainer_state.get("global_step") if isinstance(trainer_state, dict) else None
        raise save_error(f"the checkpoint {directory}", step, e, parent) from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def save_error(what, step, error, output_dir):
    """The SaveError for an OSError `error` raised saving `what` at `step`: the file, the reason,
    and a true sentence about the last checkpoint in output_dir."""
    if isinstance(error, SaveError):
        return error
    reason = error.strerror or str(error)
    return SaveError(f"saving {what} at step {step} failed: {reason} (errno {error.errno}) writing "
                     f"{error.filename or what}; {describe_last_checkpoint(output_dir)}", error.errno, error.filename)


def _write_files(tmp, model, optimizer, scheduler, rng_states, trainer_state, args, only_model=False):
    model.save_pretrained(tmp, manifest=False)          # the checkpoint's own manifest, listing every file, comes last
    _write_json(os.path.join(tmp, "trainer_state.json"), _plain(trainer_state))
    _write_json(os.path.join(tmp, "training_args.json"), _plain({**args.to_dict(), "save_only_model": only_model}))
    if only_model:
        return
    opt = optimizer.state_dict()
    arrays, scalars = {}, {}
    for pname, state in opt["state"].items():
        for key, value in state.items():
            if isinstance(value, np.ndarray):
                arrays[f"state/{pname}/{key}"] = value
            else:
                scalars.setdefault(pname, {})[key] = value
    write_safetensors(os.path.join(tmp, "optimizer.safetensors"), arrays, {"format": "npbert-optimizer"})
    _write_json(os.path.join(tmp, "optimizer.json"),
                _plain({"class": type(optimizer).__name__, "scalars": scalars, "param_groups": opt["param_groups"]}))
    _write_json(os.path.join(tmp, "scheduler.json"), _plain(scheduler.state_dict()) if scheduler else {})
    _write_json(os.path.join(tmp, "rng_state.json"), _plain(rng_states))


def optimizer_state_bytes(optimizer):
    """The bytes of the optimizer's arrays (Adam's two moments: twice the model's), as saved."""
    return sum(v.nbytes for state in optimizer.state_dict()["state"].values() for v in state.values()
               if isinstance(v, np.ndarray))


def verify_checkpoint(directory):
    """Raise CheckpointError unless `directory` is a checkpoint whose manifest verifies.  A
    checkpoint written before manifests existed passes with a warning (it cannot be checked)."""
    if not os.path.isdir(directory):
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    if verify_manifest(directory, required=False) is None:
        if not os.path.exists(os.path.join(directory, "trainer_state.json")):
            raise CheckpointError(f"{directory}: no manifest.json and no trainer_state.json: not a complete checkpoint")
        warnings.warn(f"{directory} has no manifest.json (written by an older npbert): its files cannot be "
                      "verified", stacklevel=3)


def is_intact(directory):
    """True when `directory`'s manifest is there and verifies (an unverifiable one is not)."""
    try:
        return verify_manifest(directory, required=True) is not None
    except (CheckpointError, _IOCheckpointError, OSError):
        return False


def newest_intact_checkpoint(output_dir, exclude=()):
    """The newest checkpoint in output_dir whose manifest verifies (not one of `exclude`), or None."""
    skip = {os.path.abspath(p) for p in exclude}
    for path in reversed(sorted_checkpoints(output_dir)):
        if os.path.abspath(path) not in skip and is_intact(path):
            return path
    return None


def describe_last_checkpoint(output_dir):
    """A true sentence about the last checkpoint in output_dir, for messages after a failure."""
    checkpoints = sorted_checkpoints(output_dir)
    if not checkpoints:
        return f"no checkpoint was saved in {output_dir}"
    last = checkpoints[-1]
    if is_intact(last):
        return f"the last checkpoint, {last}, is intact (manifest verified)"
    intact = newest_intact_checkpoint(output_dir)
    return (f"the last checkpoint, {last}, fails its manifest check; "
            + (f"the newest intact one is {intact}" if intact else "no checkpoint there is intact"))


def recover_interrupted_saves(output_dir, log=None):
    """Put back `checkpoint-<step>` when a killed writer left it only as `.tmp-` (complete: its
    manifest verifies; preferred, it is the newer) or `.old-` (the one being replaced).  Dead
    writers only.  Returns the checkpoints recovered."""
    found = {}
    for path, kind, step, pid in find_leftovers(output_dir):
        if kind in ("tmp-checkpoint", "old-checkpoint") and not pid_alive(pid):
            found.setdefault(step, {})[kind] = path
    recovered = []
    for step, paths in sorted(found.items()):
        final = os.path.join(output_dir, f"{PREFIX}-{step}")
        if os.path.exists(final):
            continue
        for kind in ("tmp-checkpoint", "old-checkpoint"):
            if kind in paths and is_intact(paths[kind]):
                os.rename(paths[kind], final)
                recovered.append(final)
                break
    if recovered:
        _fsync_directory(output_dir)
    return recovered


def refuse_model_only(directory):
    """A CheckpointError for a checkpoint saved with save_only_model: nothing to resume from."""
    if (read_training_args(directory) or {}).get("save_only_model") and \
            not os.path.exists(os.path.join(directory, "optimizer.json")):
        raise CheckpointError(f"{directory} was saved with save_only_model: it holds the model but not the optimizer's "
                              "state, so training cannot resume from it (as in transformers). Start a new run from its "
                              "weights (--model_name_or_path), or resume from a checkpoint saved without save_only_model")


def read_training_args(directory):
    """The TrainingArguments dict a checkpoint was saved with (None for a checkpoint without one)."""
    path = os.path.join(directory, "training_args.json")
    return _read_json(path) if os.path.exists(path) else None


def load_checkpoint(directory, model, optimizer, scheduler, keep_hyperparameters=False):
    """Restore model, optimizer and scheduler in place from `directory`; return
    (rng_states, trainer_state).  Everything is read and checked before anything changes.

    keep_hyperparameters: take only the optimizer's per-parameter state (moments, step counts)
    and the scheduler's step from the checkpoint, keeping this run's parameter groups, options
    and base rates (resuming with ignore_changed_args)."""
    verify_checkpoint(directory)
    join = lambda name: os.path.join(directory, name)           # noqa: E731
    refuse_model_only(directory)
    trainer_state = _read_json(join("trainer_state.json"))
    TrainerState.from_dict(trainer_state, source=join("trainer_state.json"))      # field types checked
    opt_meta = _read_json(join("optimizer.json"))
    scheduler_state = _read_json(join("scheduler.json")) if scheduler is not None else None
    rng_states = _read_json(join("rng_state.json"))
    _check_generator_states(join("rng_state.json"), rng_states)
    if not os.path.exists(join("model.safetensors")):
        raise CheckpointError(f"{join('model.safetensors')}: missing; {directory} is not a complete npbert checkpoint")
    state_dict = read_safetensors(join("model.safetensors"))
    check_finite(state_dict, join("model.safetensors"), "weight")
    if opt_meta.get("class") != type(optimizer).__name__:
        raise CheckpointError(f"{directory}: the optimizer is {opt_meta.get('class')}, this run uses "
                              f"{type(optimizer).__name__} (TrainingArguments.optim)")
    if not os.path.exists(join("optimizer.safetensors")):
        raise CheckpointError(f"{join('optimizer.safetensors')}: missing")
    arrays = read_safetensors(join("optimizer.safetensors"))
    check_finite(arrays, join("optimizer.safetensors"), "optimizer array")
    state = _optimizer_state(directory, arrays, opt_meta)
    _check_steps(directory, trainer_state, scheduler_state, opt_meta, state)
    try:
        model.load_state_dict(state_dict, strict=True)
    except (KeyError, ValueError, TypeError) as e:
        raise CheckpointError(f"{directory}: its model does not fit this {type(model).__name__}: {e}") from None
    try:
        if keep_hyperparameters:
            _load_state_only(directory, optimizer, scheduler, state, scheduler_state)
        else:
            optimizer.load_state_dict({"state": state, "param_groups": opt_meta["param_groups"]})
            if scheduler is not None:
                scheduler.load_state_dict(scheduler_state)
    except (KeyError, ValueError, TypeError) as e:
        raise CheckpointError(f"{directory}: the optimizer state does not fit this run: {e}") from None
    return rng_states, trainer_state


def _load_state_only(directory, optimizer, scheduler, state, scheduler_state):
    groups = optimizer.state_dict()["param_groups"]
    mine = sorted(n for g in groups for n in g["params"])
    if sorted(state) != mine:
        raise ValueError(f"the checkpoint's optimizer holds other parameters than this run's "
                         f"(first difference: {sorted(set(state) ^ set(mine))[:1]})")
    optimizer.load_state_dict({"state": state, "param_groups": groups})
    if scheduler is not None and scheduler_state and hasattr(scheduler, "get_lr"):
        scheduler.last_epoch = int(scheduler_state["last_epoch"])
        scheduler._last_lr = scheduler.get_lr()
        for group, lr in zip(optimizer.param_groups, scheduler._last_lr):
            group["lr"] = lr


def _check_generator_states(source, rng_states):
    """Every saved generator state must be one a PCG64 generator accepts (checked on a throwaway one)."""
    for name in ("dropout", "collator"):
        if name == "dropout" or name in rng_states:
            try:
                np.random.default_rng().bit_generator.state = rng_states[name]
            except (KeyError, TypeError, ValueError) as e:
                raise CheckpointError(f"{source}: {name!r} is not a generator state this run can use "
                                      f"({type(e).__name__}: {e})") from None


def _optimizer_state(directory, arrays, opt_meta):
    """{param: {key: value}} from optimizer.safetensors and optimizer.json; every parameter of
    the groups must have the same keys (no missing moments) once a step was taken."""
    source = os.path.join(directory, "optimizer.safetensors")
    state = {}
    for key, value in arrays.items():
        parts = key.split("/", 2)
        if len(parts) != 3 or parts[0] != "state":
            raise CheckpointError(f"{source}: tensor {key!r} is not named state/<parameter>/<key>")
        state.setdefault(parts[1], {})[parts[2]] = value
    try:
        for pname, values in (opt_meta.get("scalars") or {}).items():
            state.setdefault(pname, {}).update(values)
        params = [n for g in opt_meta["param_groups"] for n in g["params"]]
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise CheckpointError(f"{os.path.join(directory, 'optimizer.json')}: malformed ({type(e).__name__}: {e})") \
            from None
    unknown = sorted(set(state) - set(params))
    if unknown:
        raise CheckpointError(f"{source}: state for {unknown[0]!r}, which no parameter group holds")
    keys = set().union(*state.values()) if state else set()
    lacking = [p for p in params if set(state.get(p, ())) != keys]
    if not arrays:        # every optimizer here keeps moments (arrays) for every parameter it stepped
        raise CheckpointError(f"{source}: holds no optimizer state (no moments for any of the {len(params)} "
                              "parameters): resuming would restart the optimizer, not continue the run")
    if lacking:
        p = lacking[0]
        raise CheckpointError(f"{source}: the optimizer state of {len(lacking)} of {len(params)} parameters is "
                              f"incomplete, e.g. {p!r} has {sorted(state.get(p, ()))}, the others {sorted(keys)}")
    return state


def _check_steps(directory, trainer_state, scheduler_state, opt_meta, state):
    """The directory's step, trainer_state's global_step, the scheduler's last_epoch and the
    optimizer's per-parameter step count must all be the same number."""
    step = trainer_state.get("global_step")
    named = checkpoint_step(directory)
    if named is not None and named != step:
        raise CheckpointError(f"{os.path.join(directory, 'trainer_state.json')}: global_step is {step}, but the "
                              f"directory is {PREFIX}-{named}")
    if scheduler_state:
        last = scheduler_state.get("last_epoch")
        if type(last) is not int:
            raise CheckpointError(f"{os.path.join(directory, 'scheduler.json')}: field 'last_epoch' must be an "
                                  f"integer, got {last!r}")
        if last != step:
            raise CheckpointError(f"{os.path.join(directory, 'scheduler.json')}: the scheduler is at step {last}, "
                                  f"trainer_state.json at global_step {step}")
    counts = {s["step"] for s in state.values() if "step" in s}
    if counts and counts != {step}:
        bad = sorted(counts - {step}, key=repr)[0]
        raise CheckpointError(f"{os.path.join(directory, 'optimizer.json')}: the optimizer's step count is {bad!r}, "
                              f"trainer_state.json's global_step {step}")


def checkpoint_step(path):
    m = _CHECKPOINT_RE.match(os.path.basename(os.path.normpath(path)))
    return int(m.group(1)) if m else None


def sorted_checkpoints(output_dir):
    """checkpoint-<step> directories in output_dir, oldest (lowest step) first."""
    if not os.path.isdir(output_dir):
        return []
    found = [(checkpoint_step(n), os.path.join(output_dir, n)) for n in os.listdir(output_dir)
             if checkpoint_step(n) is not None and os.path.isdir(os.path.join(output_dir, n))]
    return [p for _, p in sorted(found)]


def get_last_checkpoint(output_dir):
    checkpoints = sorted_checkpoints(output_dir)
    return checkpoints[-1] if checkpoints else None


def rotate_checkpoints(output_dir, save_total_limit, best_checkpoint=None):
    """Delete the oldest checkpoints beyond save_total_limit, never the best one (as transformers)."""
    if not save_total_limit:
        return
    checkpoints = sorted_checkpoints(output_dir)
    if best_checkpoint is not None:
        best = os.path.abspath(best_checkpoint)
        keep_best = [c for c in checkpoints if os.path.abspath(c) == best]
        checkpoints = [c for c in checkpoints if os.path.abspath(c) != best] + keep_best
    # transformers keeps one more when the limit is 1 and the best is not the latest
    limit = save_total_limit
    if limit == 1 and best_checkpoint is not None and checkpoints and os.path.abspath(checkpoints[-1]) != os.path.abspath(best_checkpoint):
        limit = 2
    for path in checkpoints[:max(0, len(checkpoints) - limit)]:
        shutil.rmtree(path, ignore_errors=True)
