"""The Trainer's files: checkpoints (written on rank 0, rotated), resuming from one, the
final model and trainer_state.json, the training curves, and what a signal does (stop at the
end of the step with a checkpoint; npbert.training.signals has the messages).  A mixin of
npbert.training.trainer.Trainer."""
import os
import sys

from npbert import distributed as dist
from npbert.io import read_safetensors

from . import checkpoint as ckpt
from .plots import have_matplotlib, plot_training_curves
from .resume import resume_checkpoint
from .signals import stopped_after_step, stopped_at_once
from .trainer_state import TrainerState


class Checkpointing:
    # ---- checkpoints ----------------------------------------------------------------------------
    def _rng_states(self):
        states = {"dropout": self.model.state.rng.bit_generator.state,
                  "shuffle": {"seed": self.args.seed, "epoch_permutation": "default_rng([seed, epoch])"}}
        if self.world.world_size > 1:   # the batches are cut into micro-steps of world_size x per_device rows
            states["shuffle"]["world_size"] = self.world.world_size
        rng = getattr(self.data_collator, "rng", None)
        if rng is not None:
            states["collator"] = rng.bit_generator.state
        return states

    def _save_checkpoint(self, is_best=False, full=False):
        """Save checkpoint-<step> (the model alone with save_only_model, unless `full`: a stop on a
        signal saves what resuming needs) and rotate; the first save of a run says what is kept."""
        st, a = self.state, self.args
        path = os.path.join(a.output_dir, f"{ckpt.PREFIX}-{st.global_step}")
        only_model = bool(a.save_only_model) and not full
        if not getattr(self, "_said_what_is_kept", False) and not full and self.progress is not None:
            self._said_what_is_kept = True                    # once per Trainer, at its first save
            self.progress.message(self._what_is_kept(only_model))
        if is_best:
            st.best_model_checkpoint = path
        st.stateful_callbacks = {"EarlyStoppingCallback": {
            "args": {"early_stopping_patience": a.early_stopping_patience,
                     "early_stopping_threshold": a.early_stopping_threshold},
            "attributes": {"early_stopping_patience_counter": self._patience}}}
        dist.check_same_parameters(self.model, self.world)   # rank 0 writes its copy: every rank's must agree
        self.world.run_on_main(ckpt.save_checkpoint, path, self.model, self.optimizer, self.lr_scheduler,
                               self._rng_states(), st.to_dict(), a, only_model, what=f"writing {path}")
        self._last_saved = path
        self.world.run_on_main(ckpt.rotate_checkpoints, a.output_dir, a.save_total_limit, st.best_model_checkpoint,
                               what="removing old checkpoints")
        return path

    def _what_is_kept(self, only_model):
        """The line a run prints when it first saves: what each checkpoint-N holds, how many are kept,
        about how many bytes that is, and the flags that keep less (transformers' names)."""
        a, st = self.args, self.state
        model_bytes = sum(p.nbytes for _, p in self.model.named_parameters())
        if only_model:
            each, holds = model_bytes, f"the model alone ({_mb(model_bytes)}; save_only_model: no resuming from it)"
        else:
            opt_bytes = ckpt.optimizer_state_bytes(self.optimizer)
            each = model_bytes + opt_bytes
            holds = f"the model ({_mb(model_bytes)}) and the optimizer's state ({_mb(opt_bytes)}) to resume from"
        planned = (st.max_steps // st.save_steps if a.save_strategy == "steps"
                   else int(st.num_train_epochs) if a.save_strategy == "epoch" else 1)
        kept = max(1, planned if not a.save_total_limit else min(planned, a.save_total_limit + bool(a.load_best_model_at_end)))
        limit = (f"the newest {a.save_total_limit} kept (save_total_limit{', and the best' if a.load_best_model_at_end else ''})"
                 if a.save_total_limit else "every one kept (no save_total_limit)")
        less = [] if only_model else ["--save_only_model (the model alone, no resuming)"]
        if not a.save_total_limit or a.save_total_limit > 1:
            less.append("--save_total_limit 1")
        less.append("--save_strategy no (none; a stop on a signal still saves)")
        return (f"checkpoints: each {a.output_dir}/checkpoint-N holds {holds}, about {_mb(each)}; {limit}: about "
                f"{_mb(kept * each)} on disk besides the final model. To keep less: {', or '.join(less)} "
                "(TrainingArguments' fields of those names)")

    # ---- SIGINT / SIGTERM (the messages: signals.py) --------------------------------------------
    def _announce(self, message):
        if self.progress is not None:
            self.progress.message(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def _stop_after_step(self, saved):
        """The first signal came during this step: save (unless just saved) and stop."""
        whole = saved and not self.args.save_only_model        # resuming needs the optimizer's state too
        path = self._last_saved if whole else self._save_checkpoint(full=True)
        self.progress.close()
        raise stopped_after_step(self._stop.requested, self.state, path, self.resume_command)

    def _interrupted_at_once(self, signum):
        return stopped_at_once(signum, self.state, self._last_saved or self._resumed_from, self.resume_command)

    def _stop_requested(self):
        """The signal any rank received during this step (every rank gets the same number), or None."""
        signum = int(self.world.all_max(float(self._stop.requested or 0)))
        if signum and not self._stop.requested:
            self._stop.requested = signum
        return signum or None

    def _resume_on_every_rank(self, resume_from_checkpoint, total):
        """Rank 0 reads the checkpoint (_resume); every other rank gets what it read."""
        world = self.world
        world.run_on_main(self._resume, resume_from_checkpoint, total, what="reading the checkpoint")
        dist.broadcast_parameters(self.model, world)               # the weights and the dropout generator
        rng = getattr(self.data_collator, "rng", None)
        sent = world.broadcast_object({
            "optimizer": self.optimizer.state_dict(), "scheduler": self.lr_scheduler.state_dict(),
            "collator": None if rng is None else rng.bit_generator.state, "state": self.state.to_dict(),
            "patience": self._patience, "resumed_from": self._resumed_from})
        if not world.is_main_process:
            self.optimizer.load_state_dict(sent["optimizer"])
            self.lr_scheduler.load_state_dict(sent["scheduler"])
            if rng is not None:
                rng.bit_generator.state = sent["collator"]
            self.state = TrainerState.from_dict(sent["state"])
            self._patience, self._resumed_from = sent["patience"], sent["resumed_from"]

    def _load_best(self, path):
        ckpt.verify_checkpoint(path)
        self.model.load_state_dict(read_safetensors(os.path.join(path, "model.safetensors")))

    def _resume(self, resume_from_checkpoint, total):
        rng_states, saved, path = resume_checkpoint(self, resume_from_checkpoint, total)
        self._resumed_from = path
        self.model.state.rng.bit_generator.state = rng_states["dropout"]      # (states checked by load)
        rng = getattr(self.data_collator, "rng", None)
        if rng is not None:
            if "collator" not in rng_states:
                raise ckpt.CheckpointError(f"{path} holds no collator generator state, but this run's collator "
                                           "draws random numbers")
            rng.bit_generator.state = rng_states["collator"]
        self.state = TrainerState.from_dict(saved)
        self._patience = (saved.get("stateful_callbacks", {}).get("EarlyStoppingCallback", {})
                          .get("attributes", {}).get("early_stopping_patience_counter", 0))

    # ---- saving ---------------------------------------------------------------------------------
    def save_model(self, output_dir=None):
        self.world.run_on_main(self._save_model, output_dir, what="saving the model")      # rank 0 writes

    def _save_model(self, output_dir=None):
        output_dir = output_dir or self.args.output_dir
        try:
            self.model.save_pretrained(output_dir)
            if self.processing_class is not None and hasattr(self.processing_class, "save_pretrained"):
                self.processing_class.save_pretrained(output_dir)
        except OSError as e:
            raise ckpt.save_error(f"the model to {output_dir}", self.state.global_step, e, self.args.output_dir) from e

    def save_state(self):
        if self.world.is_main_process:
            os.makedirs(self.args.output_dir, exist_ok=True)
            self.state.save_to_json(os.path.join(self.args.output_dir, "trainer_state.json"))

    def _plot(self):
        if not self.args.plot:
            return None
        path = os.path.join(self.args.output_dir, "training_curves.png")
        if not have_matplotlib():
            if self.progress is not None:
                self.progress.message("(training_curves.png not drawn: pip install matplotlib, or npbert[plot])")
            return None
        written = plot_training_curves(self.state.log_history, path, title=type(self.model).__name__)
        if written and self.progress is not None:
            self.progress.message(f"training curves: {written}")
        return written


def _mb(nbytes):
    """'347 MB', '1.3 GB', '12 KB': decimal units, as `ls -lh --si` and file managers show them."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{nbytes} bytes"
