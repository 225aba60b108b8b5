"""Checkpoints of a training run: `output_dir/checkpoint-<step>/`.

    model.safetensors, config.json   the model, as save_pretrained writes it (transformers loads it)
    optimizer.safetensors            the optimizer's arrays (Adam's moments), "state/<param>/<key>"
    optimizer.json                   the optimizer's numbers and parameter groups
    scheduler.json                   the scheduler's step count and rates
    rng_state.json                   the generators: dropout (model.state.rng), the collator's
                                     (masking), as bit_generator.state dicts
    trainer_state.json               global_step, epoch, log_history, best metric, ... (transformers' keys)
    training_args.json               the TrainingArguments

Everything is written into a hidden temporary directory next to the final one and renamed
into place only when complete, so a run killed while saving leaves the previous checkpoint
intact.  Nothing is pickled: arrays in safetensors, the rest in JSON.
"""
import json
import os
import re
import shutil

import numpy as np

from npbert.io._atomic import _fsync_directory, atomic_write

PREFIX = "checkpoint"
_CHECKPOINT_RE = re.compile(rf"^{PREFIX}-(\d+)$")


class CheckpointError(ValueError):
    """A checkpoint directory is missing a file, corrupt, or from another model."""


def _write_json(path, obj):
    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; {os.path.dirname(path)} is not a complete npbert checkpoint") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None


def _plain(x):
    """JSON-able copy: tuples to lists, NumPy scalars to Python numbers."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def save_checkpoint(directory, model, optimizer, scheduler, rng_states, trainer_state, args):
    """Write the checkpoint `directory` atomically (replacing one of the same name)."""
    from npbert.io import write_safetensors

    parent, name = os.path.split(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        model.save_pretrained(tmp)
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
                    _plain({"class": type(optimizer).__name__, "scalars": scalars,
                            "param_groups": opt["param_groups"]}))
        _write_json(os.path.join(tmp, "scheduler.json"), _plain(scheduler.state_dict()) if scheduler else {})
        _write_json(os.path.join(tmp, "rng_state.json"), _plain(rng_states))
        _write_json(os.path.join(tmp, "trainer_state.json"), _plain(trainer_state))
        _write_json(os.path.join(tmp, "training_args.json"), _plain(args.to_dict()))
        old = None
        if os.path.exists(directory):
            old = os.path.join(parent, f".old-{name}-{os.getpid()}")
            os.rename(directory, old)
        os.rename(tmp, directory)
        _fsync_directory(parent)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_checkpoint(directory, model, optimizer, scheduler):
    """Restore model, optimizer and scheduler in place from `directory`; return
    (rng_states, trainer_state)."""
    from npbert.io import read_safetensors

    if not os.path.isdir(directory):
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    weights = os.path.join(directory, "model.safetensors")
    if not os.path.exists(weights):
        raise CheckpointError(f"{weights}: missing; {directory} is not a complete npbert checkpoint")
    try:
        state_dict = read_safetensors(weights)
        model.load_state_dict(state_dict, strict=True)
    except (KeyError, ValueError, TypeError) as e:
        raise CheckpointError(f"{directory}: its model does not fit this {type(model).__name__}: {e}") from None
    opt_meta = _read_json(os.path.join(directory, "optimizer.json"))
    if opt_meta.get("class") != type(optimizer).__name__:
        raise CheckpointError(f"{directory}: the optimizer is {opt_meta.get('class')}, this run uses "
                              f"{type(optimizer).__name__} (TrainingArguments.optim)")
    try:
        arrays = read_safetensors(os.path.join(directory, "optimizer.safetensors"))
    except FileNotFoundError:
        raise CheckpointError(f"{directory}/optimizer.safetensors: missing") from None
    state = {}
    for key, value in arrays.items():
        _, pname, k = key.split("/", 2)
        state.setdefault(pname, {})[k] = value
    for pname, values in opt_meta["scalars"].items():
        state.setdefault(pname, {}).update(values)
    try:
        optimizer.load_state_dict({"state": state, "param_groups": opt_meta["param_groups"]})
        if scheduler is not None:
            scheduler.load_state_dict(_read_json(os.path.join(directory, "scheduler.json")))
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{directory}: the optimizer state does not fit this run: {e}") from None
    rng_states = _read_json(os.path.join(directory, "rng_state.json"))
    trainer_state = _read_json(os.path.join(directory, "trainer_state.json"))
    return rng_states, trainer_state


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
