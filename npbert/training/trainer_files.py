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
from .state import TrainerState


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

    def _save_checkpoint(self, is_best=False):
        st, a = self.state, self.args
        path = os.path.join(a.output_dir, f"{ckpt.PREFIX}-{st.global_step}")
        if is_best:
            st.best_model_checkpoint = path
        st.stateful_callbacks = {"EarlyStoppingCallback": {
            "args": {"early_stopping_patience": a.early_stopping_patience,
                     "early_stopping_threshold": a.early_stopping_threshold},
            "attributes": {"early_stopping_patience_counter": self._patience}}}
        dist.check_same_parameters(self.model, self.world)   # rank 0 writes its copy: every rank's must agree
        self.world.run_on_main(ckpt.save_checkpoint, path, self.model, self.optimizer, self.lr_scheduler,
                               self._rng_states(), st.to_dict(), a, what=f"writing {path}")
        self._last_saved = path
        self.world.run_on_main(ckpt.rotate_checkpoints, a.output_dir, a.save_total_limit, st.best_model_checkpoint,
                               what="removing old checkpoints")
        return path

    # ---- SIGINT / SIGTERM (the messages: signals.py) --------------------------------------------
    def _announce(self, message):
        if self.progress is not None:
            self.progress.message(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def _stop_after_step(self, saved):
        """The first signal came during this step: save (unless just saved) and stop."""
        path = self._last_saved if saved else self._save_checkpoint()
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
