"""Resuming a run: which checkpoint, is it intact, was it saved with the same arguments.

    resume_from_checkpoint=True    the newest checkpoint-<step> in output_dir ("no checkpoint yet"
                                   is an error that says so)
    resume_from_checkpoint=DIR     that checkpoint

Before anything is loaded, the checkpoint's manifest is verified and its training_args.json
compared with this run's TrainingArguments: a change in a field that alters the result
(arguments.RESULT_FIELDS: seed, learning rate, weight decay, schedule, batch size,
accumulation, max_steps, optimizer, ...) is refused with the list of changes, unless
`ignore_changed_args` (then the new values apply from the resumed step on: the optimizer's
moments and step counts are kept, its hyper-parameters and the schedule's base rates are this
run's).  A checkpoint that fails a check is named with the reason, and the newest intact
checkpoint in the directory is offered.
"""
import os
import sys

from npbert.io.errors import CheckpointError as AnyCheckpointError

from . import checkpoint as ckpt


def _fmt(value):
    return repr(value) if isinstance(value, str) else str(value)


def resolve_checkpoint(output_dir, resume_from_checkpoint):
    """The checkpoint directory `resume_from_checkpoint` (True or a path) means."""
    if resume_from_checkpoint is True:
        path = ckpt.get_last_checkpoint(output_dir)
        if path is None:
            raise ckpt.CheckpointError(f"--resume_from_checkpoint: {output_dir} holds no {ckpt.PREFIX}-<step> "
                                       "directory yet, so there is nothing to resume; start the run without "
                                       "--resume_from_checkpoint")
        return path
    path = os.fspath(resume_from_checkpoint)
    if not os.path.isdir(path):
        raise ckpt.CheckpointError(f"--resume_from_checkpoint {path}: no such checkpoint directory")
    return path


def _offer(path, output_dir, error):
    """The CheckpointError for a checkpoint that failed a check, offering an intact one."""
    intact = ckpt.newest_intact_checkpoint(output_dir, exclude=[path])
    if intact is None and os.path.dirname(os.path.abspath(path)) != os.path.abspath(output_dir):
        intact = ckpt.newest_intact_checkpoint(os.path.dirname(os.path.abspath(path)), exclude=[path])
    offer = (f"the newest intact checkpoint is {intact}: resume from it with --resume_from_checkpoint {intact}"
             if intact else "no other intact checkpoint was found")
    return ckpt.CheckpointError(f"cannot resume from {path}: {error}. {offer}")


def resume_checkpoint(trainer, resume_from_checkpoint, total):
    """Check and load the checkpoint into trainer's model, optimizer and scheduler.
    Returns (rng_states, trainer_state dict, path)."""
    a = trainer.args
    path = resolve_checkpoint(a.output_dir, resume_from_checkpoint)
    try:
        ckpt.verify_checkpoint(path)
        saved_args = ckpt.read_training_args(path)
        saved_total = _saved_max_steps(path)
    except AnyCheckpointError as e:
        raise _offer(path, a.output_dir, e) from None
    ckpt.refuse_model_only(path)                 # (intact, but holds no optimizer state)
    changes = a.changed_result_args(saved_args) if saved_args else []
    same_run_note = _ranks_change(trainer, path, saved_args, changes)
    if saved_total is not None and saved_total != total and not any(c[0] == "max_steps" for c in changes):
        changes.append(("total steps (max_steps, or epochs x batches)", saved_total, total))
    if changes and not a.ignore_changed_args:
        listed = "; ".join(f"{name}: {_fmt(old)} then, {_fmt(new)} now" for name, old, new in changes)
        ranks = next((c for c in changes if c[0] == RANKS), None)
        hint = "" if ranks is None else (
            f" (on {ranks[2]} rank{'s' if ranks[2] > 1 else ''}, --per_device_train_batch_size {ranks[1] * _saved_per_device(saved_args, a) // ranks[2]}"
            f" would keep the saved run's micro-steps and continue it unchanged)"
            if ranks[1] * _saved_per_device(saved_args, a) % ranks[2] == 0 else "")
        raise ckpt.CheckpointError(
            f"{path} was saved by a run with other arguments, and resuming would not continue that run: {listed}. "
            "Resume with the saved values" + hint + ", or pass --ignore_changed_args "
            "(TrainingArguments.ignore_changed_args=True) to continue with the new ones")
    if same_run_note:
        print(f"note: {same_run_note}", file=sys.stderr, flush=True)
    try:
        rng_states, saved = ckpt.load_checkpoint(path, trainer.model, trainer.optimizer, trainer.lr_scheduler,
                                                 keep_hyperparameters=bool(changes))
    except AnyCheckpointError as e:
        raise _offer(path, a.output_dir, e) from None
    if changes:
        print(f"note: resuming {path} with changed arguments (--ignore_changed_args): "
              + "; ".join(f"{n}: {_fmt(o)} -> {_fmt(v)}" for n, o, v in changes), file=sys.stderr, flush=True)
    return rng_states, saved, path


RANKS = "number of ranks (mpiexec -n)"


def _saved_per_device(saved_args, args):
    return int((saved_args or {}).get("per_device_train_batch_size", args.per_device_train_batch_size))


def _ranks_change(trainer, path, saved_args, changes):
    """A data-parallel run (Trainer._update, npbert/training/trainer.py) cuts each epoch into micro-steps of
    ranks x per_device_train_batch_size examples.  Resuming on another number of ranks with the
    same micro-step continues the same run (the batches, the dropout masks, the schedule: only
    the order of the gradient sum differs): the per-device change is then dropped from
    `changes` and a note returned.  Otherwise the number of ranks is added to `changes`, which
    refuses the resume unless ignore_changed_args."""
    a = trainer.args
    world = getattr(trainer, "world", None)
    W = world.world_size if world is not None else 1
    shuffle = ckpt._read_json(os.path.join(path, "rng_state.json")).get("shuffle", {})
    saved_W = shuffle.get("world_size", 1) if isinstance(shuffle, dict) else 1
    if type(saved_W) is not int or saved_W == W:
        return None
    P0, P = _saved_per_device(saved_args, a), a.per_device_train_batch_size
    if saved_W * P0 == W * P:
        changes[:] = [c for c in changes if c[0] != "per_device_train_batch_size"]
        return (f"{path} was saved by a run on {saved_W} rank{'s' if saved_W > 1 else ''} x {P0} examples, this run "
                f"has {W} x {P}: the same micro-steps of {W * P} examples, so the run continues unchanged (only the "
                f"order of the gradient sum differs)")
    changes.append((RANKS, saved_W, W))
    return None


def _saved_max_steps(path):
    state = ckpt._read_json(os.path.join(path, "trainer_state.json"))
    value = state.get("max_steps")
    return value if type(value) is int and value > 0 else None
