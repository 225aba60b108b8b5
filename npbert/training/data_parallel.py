"""The Trainer on N MPI ranks (started by mpiexec / srun; nothing to switch on): what changes
against one process, all of it here so that trainer.py only asks `self._dp`.

One process with the global batch is the reference.  With W ranks, per_device_train_batch_size
P and A accumulation steps, the one process it equals uses micro-batches of W x P rows (the
same epoch permutation, cut the same way) and A of them per optimizer step:

    for each micro-step idx (W x P dataset indices; the last one shorter):
        full  = collate(idx)                   # every rank collates the WHOLE micro-step: a
                                               # collator's generator (dynamic masking) stays in step
        N_c   = count_loss_items(model, full)  # the micro-step's items (masked tokens, labels) over all ranks
        mine  = rows [o, o + m) of full        # shard_global_batch: this rank's contiguous share
        with model.batch_offset(o):            # dropout masks keyed by the micro-step's row o + i,
            out = model(**mine)                # as one process keys its forward of `full`
        grads += backward_global_mean(..., N_c x A)      # d (n_c / N_c * m_c / A) / d params
    allreduce_gradients(grads)                 # bucketed, in place: the sum is one process's gradient
    clip, optimizer.step, scheduler.step       # the same numbers on every rank

A rank whose share of a micro-step is empty (the short last one) adds nothing but still takes
the step seed a forward would draw (model.state.rng), so that every rank's dropout seeds stay
one process's.  Everything a rank computes alone runs inside world.guard: a NaN loss, a bad
example or a bug on one rank stops every rank at that step with its message.

Rank 0 alone writes (checkpoints, trainer_state.json, curves, the model; world.run_on_main:
the others wait and learn of a failure) and prints (the progress line); resuming, rank 0 reads
the checkpoint and broadcasts what it read.  Evaluation shards the eval batches over the ranks
and gathers them in order on every rank (each computes the same metrics, so early stopping
and the best model are decided alike).  A signal on any rank stops every rank at the same
step (world.all_max of the signal numbers, once per step).  docs/data_parallel.md.
"""
import math
import warnings

import numpy as np

from npbert import distributed as dist

from . import checkpoint as ckpt


class SilentProgress:
    """The progress line of ranks > 0: rank 0 alone prints."""

    def update(self, *args, **kwargs):
        pass

    def message(self, text):
        pass

    def close(self):
        pass


def world_of_trainer():
    """The world the Trainer runs in: npbert.distributed.init() (MPI under a launcher, else one process)."""
    return dist.init()


def rows(batch, start, stop, n_rows):
    """Rows [start, stop) of a collated batch of n_rows rows (values without that first axis are kept)."""
    return {k: (v[start:stop] if isinstance(v, np.ndarray) and v.ndim and len(v) == n_rows else v)
            for k, v in batch.items()}


def _n_rows(batch):
    for key in ("input_ids", "inputs_embeds"):
        if batch.get(key) is not None:
            return len(batch[key])
    raise KeyError(f"the batch has no input_ids / inputs_embeds (fields: {sorted(batch)})")


class DataParallel:
    """What the Trainer does differently on more than one rank (see the module docstring)."""

    def __init__(self, world):
        self.world = world

    # ---- the plan ---------------------------------------------------------------------------
    def check_plan(self, trainer, n_examples):
        """Every rank holds the same number of examples and the same batch arguments, at least
        one example per rank (plan_training's checks, a message on every rank)."""
        a = trainer.args
        dist.plan_training(n_examples, a.per_device_train_batch_size, a.gradient_accumulation_steps, self.world,
                           drop_last=a.dataloader_drop_last)

    def start(self, trainer):
        """Every rank starts from rank 0's parameters and dropout generator."""
        dist.broadcast_parameters(trainer.model, self.world)

    # ---- one optimizer step ------------------------------------------------------------------
    def update(self, trainer, micro, epoch):
        """One optimizer step over the micro-steps `micro` (arrays of W x P dataset indices);
        returns (the global loss, the gradient norm), the same on every rank."""
        a, model, world = trainer.args, trainer.model, self.world
        step = trainer.state.global_step + 1
        n_micro = len(micro)
        grads, share = None, 0.0
        with world.guard(f"step {step}"):
            for idx in micro:
                full = trainer._collate(trainer.train_dataset, idx, "train")
                totals = dist.count_loss_items(model, full)            # this micro-step's items, every rank's
                if not any(totals.values()):
                    if world.is_main_process:
                        warnings.warn(f"train examples {idx.tolist()[:8]}: no position to predict (all labels "
                                      "-100); this batch adds nothing to the loss", stacklevel=2)
                    if model.training:
                        model.state.rng.bit_generator.random_raw()     # the forward one process still runs
                    continue
                # one process averages its micro-batches' means: 1 / n_micro each (trainer._update)
                scaled = {c: n * n_micro for c, n in totals.items()}
                s = dist.shard_global_batch(idx, a.per_device_train_batch_size, world.world_size, world.rank)[0]
                if len(s.indices) == 0:
                    if model.training:
                        model.state.rng.bit_generator.random_raw()     # the step seed this forward would draw
                    continue
                batch = rows(full, s.offset, s.offset + len(s.indices), _n_rows(full))
                local = dist.count_loss_items(model, batch)
                with model.batch_offset(s.offset):
                    out = model(**batch)
                if out.get("loss") is None:
                    raise KeyError(f"{type(model).__name__} computed no loss for train examples "
                                   f"{s.indices.tolist()[:8]}: the examples need the label field(s) {trainer.label_names}")
                part = dist.loss_share(model, out, batch, scaled, local=local)
                if not math.isfinite(part):
                    raise FloatingPointError(
                        f"the loss is {float(out['loss'])} at step {step} (epoch {epoch}, train examples "
                        f"{s.indices.tolist()[:8]}{'...' if len(s.indices) > 8 else ''} on rank {world.rank}): "
                        f"training stopped; {ckpt.describe_last_checkpoint(a.output_dir)}. Lower the learning rate "
                        f"or check the inputs.")
                g = dist.backward_global_mean(model, out, batch, scaled, local=local)
                if grads is None:
                    grads = g
                else:
                    for k, v in g.items():
                        grads[k] += v
                share += part
        grads = dist.allreduce_gradients(grads, model, world)
        loss = world.all_sum(share)
        return loss, trainer._optimizer_step(grads)         # the same numbers on every rank

    def stop_requested(self, stop):
        """The signal any rank received during this step (every rank gets the same number), or None."""
        signum = int(self.world.all_max(float(stop.requested or 0)))
        if signum and not stop.requested:
            stop.requested = signum
        return signum or None

    # ---- resuming: rank 0 reads, every rank gets it -------------------------------------------
    def resume(self, trainer, resume_from_checkpoint, total):
        world = self.world
        world.run_on_main(trainer._resume, resume_from_checkpoint, total, what="reading the checkpoint")
        dist.broadcast_parameters(trainer.model, world)                 # the weights and the dropout generator
        rng = getattr(trainer.data_collator, "rng", None)
        sent = world.broadcast_object({
            "optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.lr_scheduler.state_dict(),
            "collator": None if rng is None else rng.bit_generator.state, "state": trainer.state.to_dict(),
            "patience": trainer._patience, "resumed_from": trainer._resumed_from})
        if not world.is_main_process:
            from .state import TrainerState
            trainer.optimizer.load_state_dict(sent["optimizer"])
            trainer.lr_scheduler.load_state_dict(sent["scheduler"])
            if rng is not None:
                rng.bit_generator.state = sent["collator"]
            trainer.state = TrainerState.from_dict(sent["state"])
            trainer._patience, trainer._resumed_from = sent["patience"], sent["resumed_from"]

    def load_best(self, trainer, path):
        """Rank 0 reads the best checkpoint's weights; every rank gets them."""
        def read():
            from npbert.io import read_safetensors
            ckpt.verify_checkpoint(path)
            trainer.model.load_state_dict(read_safetensors(f"{path}/model.safetensors"))
        self.world.run_on_main(read, what=f"loading the best model from {path}")
        dist.broadcast_parameters(trainer.model, self.world)

    def before_save(self, trainer):
        """The ranks' parameters must be bit-identical before rank 0 writes its copy."""
        dist.check_same_parameters(trainer.model, self.world)

    # ---- evaluation ----------------------------------------------------------------------------
    def eval_batches(self, n_examples, batch_size):
        return dist.eval_batches(n_examples, batch_size, self.world.world_size, self.world.rank)

    def gather(self, parts):
        """Every rank's list of per-batch results, concatenated in the one-process order, on every rank."""
        return [p for part in self.world.all_gather_object(list(parts)) for p in part]
