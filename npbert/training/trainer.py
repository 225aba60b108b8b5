"""Trainer: the training loop of the tutorials, written out (read it like nanoGPT's train.py).

    for each update step:
        for each of the gradient_accumulation_steps micro-batches:
            out = model(**batch)                           # out.loss: the batch's mean loss
            grads += model.backward(loss=1 / n_micro)      # d (loss / n_micro) / d params
        grads = allreduce_gradients(grads)                 # the sum over the ranks (one process: as is)
        norm = clip_grad_norm_(grads, max_grad_norm)       # one global norm over every gradient
        optimizer.step(grads)                              # the model's arrays, in place
        lr_scheduler.step()
        log / evaluate / save a checkpoint, when due

Summing the micro-batches' gradients of loss / n_micro gives the gradient of the mean of
their losses: with equal-sized micro-batches and a per-example mean loss, exactly the
gradient of one batch n_micro times larger (docs/training.md).

One step for one process and for N: the Trainer runs in its world (npbert.distributed: MPI
ranks under mpiexec / srun, else SingleProcess, where every collective returns its input).
Each rank computes its share of every micro-batch (npbert.distributed.batches) and scales each
term of the loss by its share of the term's items over all ranks (model.backward(loss_scales=),
npbert.distributed.loss): on one process that is loss=1 / n_micro, as above.  Rank 0 alone
writes and prints; a failure on one rank stops every rank with its message (docs/data_parallel.md).

Batches: the examples of epoch e in the order np.random.default_rng([seed, e]).permutation(n),
cut into per_device_train_batch_size; the permutation depends on (seed, epoch) only, so a
resumed run finds its place by counting.  Dropout draws from model.state.rng and masking
collators from their own `rng`: both generators' states go into every checkpoint, so a run
stopped and resumed ends bit-identical to one that never stopped.

Around the loop (npbert.training.runs, .signals, .checkpoint): the output directory's lock is
held for the whole of train(), a directory holding another run's files is refused unless
overwrite_output_dir or resuming, SIGINT / SIGTERM stop at the end of a step with a checkpoint
(TrainingInterrupted), and a resume checks the checkpoint and the arguments it was saved with.
"""
import inspect
import math
import os
import time
import warnings

from npbert import distributed as dist
from npbert import optim, unsupported

from . import checkpoint as ckpt
from . import trainer_api as api
from . import runs
from .trainer_files import Checkpointing
from .arguments import TrainingArguments
from .collators import DataCollatorWithPadding, default_data_collator
from .evaluation import Evaluation
from .progress import ProgressLine, SilentProgress
from .signals import StopOnSignal
from .trainer_state import TrainerState, TrainOutput

_LABEL_NAMES = ("labels", "next_sentence_label", "start_positions", "end_positions")
# TrainingArguments.optim -> the class; each builds itself from the arguments (Optimizer.for_training)
_OPTIMIZERS = {"adamw": optim.AdamW, "adam": optim.Adam, "adam_weight_decay": optim.AdamWeightDecay,
               "bert_adam": optim.BertAdam}


class Trainer(api.TrainerAPI, Evaluation, Checkpointing):
    """transformers' Trainer: train() below; evaluate() / predict() in evaluation.py,
    checkpoints, resume and saving in trainer_files.py."""

    def __init__(self, model, args=None, data_collator=None, train_dataset=None, eval_dataset=None,
                 processing_class=None, model_init=None, compute_loss_func=None, compute_metrics=None, callbacks=None,
                 optimizers=(None, None), optimizer_cls_and_kwargs=None, preprocess_logits_for_metrics=None, **kwargs):
        # transformers 4's `tokenizer=` (renamed processing_class in 4.46), with its FutureWarning
        processing_class = api.renamed_tokenizer(kwargs, processing_class)
        unsupported.refuse_keywords("Trainer()", dict(model_init=model_init, compute_loss_func=compute_loss_func,
                                                      callbacks=callbacks or None,
                                                      optimizer_cls_and_kwargs=optimizer_cls_and_kwargs),
                                    api.REFUSED_KEYWORDS)
        if kwargs:
            raise TypeError(api.unexpected_keyword(next(iter(kwargs)), inspect.signature(Trainer.__init__).parameters))
        hooks = unsupported.overridden(self, Trainer, api.REFUSED_METHODS)
        if hooks:
            raise TypeError(f"{type(self).__name__} overrides {hooks}, which npbert's Trainer never calls: "
                            f"{api.REFUSED_METHODS[hooks[0]]}")
        self.model = model
        self.args = args if args is not None else TrainingArguments()
        if not isinstance(self.args, TrainingArguments):
            raise TypeError(f"args must be npbert.training.TrainingArguments, got {type(self.args).__name__}")
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        if data_collator is not None and not callable(data_collator):
            raise TypeError(f"Trainer(): data_collator must be callable, got {type(data_collator).__name__}; the "
                            "third argument is data_collator, as in transformers: pass train_dataset= by name")
        if data_collator is None:       # as transformers: a tokenizer given, its padding collator
            data_collator = (DataCollatorWithPadding(processing_class) if getattr(processing_class, "pad_token_id", None)
                             is not None else default_data_collator)
        self.data_collator = data_collator
        self.compute_metrics = compute_metrics
        self.preprocess_logits_for_metrics = preprocess_logits_for_metrics
        self.processing_class = processing_class
        self.optimizer, self.lr_scheduler = optimizers
        self.state = TrainerState()
        self._inputs = set(inspect.signature(model.forward).parameters)
        self.label_names = self.args.label_names or [n for n in _LABEL_NAMES if n in self._inputs]
        # remove_unused_columns: the columns the collator sees (transformers' _signature_columns)
        self._signature_columns = self._inputs | {"label", "label_ids"} | set(self.label_names)
        self._warned_columns = set()
        self._patience = 0
        self.progress = None
        # the command that resumes this run, for the message after SIGINT/SIGTERM ({checkpoint}
        # is replaced by the path); the CLI sets it, a library user gets the Python call
        self.resume_command = None
        self._stop, self._last_saved, self._resumed_from = None, None, None
        self._ignore_keys_for_eval = None
        # under mpiexec / srun: N ranks, each a share of every batch; else one process (SingleProcess)
        self.world = dist.init()

    # ---- optimizer and schedule -------------------------------------------------------------
    def create_optimizer_and_scheduler(self, num_training_steps):
        a = self.args
        if self.optimizer is None:
            self._build_optimizer(num_training_steps)
        if self.lr_scheduler is None:
            if self.optimizer.schedules_itself:          # (BertAdam): lr stays the base rate its step schedules
                self.lr_scheduler = optim.get_constant_schedule(self.optimizer)
            else:
                self.lr_scheduler = optim.get_scheduler(a.lr_scheduler_type, self.optimizer,
                                                        a.get_warmup_steps(num_training_steps), num_training_steps,
                                                        a.lr_scheduler_kwargs)

    def _build_optimizer(self, num_training_steps):
        a = self.args
        groups = optim.optimizer_grouped_parameters(self.model, weight_decay=a.weight_decay, lr=a.learning_rate,
                                                    layerwise_lr_decay=a.layerwise_lr_decay,
                                                    head_lr=a.head_learning_rate)
        warmup = None if num_training_steps is None else a.get_warmup_steps(num_training_steps)
        self.optimizer = _OPTIMIZERS[a.optim].for_training(
            groups, lr=a.learning_rate, betas=(a.adam_beta1, a.adam_beta2), eps=a.adam_epsilon,
            max_grad_norm=a.max_grad_norm, num_warmup_steps=warmup, num_training_steps=num_training_steps,
            lr_scheduler_type=a.lr_scheduler_type)

    # ---- batches ----------------------------------------------------------------------------
    def _collate(self, dataset, indices, what):
        examples = []
        for i in indices:
            ex = dataset[int(i)]
            if not isinstance(ex, dict):                # (a datasets.Dataset row is a dict too)
                raise TypeError(f"{what} example {int(i)} is a {type(ex).__name__}; a dataset is a sequence of dicts")
            examples.append(ex)
        if self.args.remove_unused_columns:
            # as transformers: the columns model.forward does not take (text, ids, ...) are removed
            # before the collator, so a collator of one's own meets the model's columns only
            unused = sorted(k for k in examples[0] if k not in self._signature_columns)
            if unused:
                self._note_columns(unused, what, "removed before the data collator")
                examples = [{k: v for k, v in ex.items() if k in self._signature_columns} for ex in examples]
        batch = self.data_collator(examples)
        unused = sorted(k for k in batch if k not in self._inputs)
        if unused:
            self._note_columns(unused, what, "ignored")
        batch = {k: v for k, v in batch.items() if k in self._inputs}
        if "input_ids" not in batch and "inputs_embeds" not in batch:
            raise KeyError(f"{what} examples {int(indices[0])}..{int(indices[-1])} have no 'input_ids' field "
                           f"(fields: {sorted(examples[0])})")
        return batch

    def _note_columns(self, unused, what, done):
        if (what, done) not in self._warned_columns:
            warnings.warn(f"The following fields of the {what} examples are not arguments of "
                          f"{type(self.model).__name__}.forward and are {done}: {unused}", stacklevel=4)
            self._warned_columns.add((what, done))

    def _epoch_batches(self, epoch, n):
        """Epoch `epoch`'s global batches, one per optimizer step (arrays of dataset indices): the
        permutation np.random.default_rng([seed, epoch]) of the n examples cut into batches of
        world_size x per_device_train_batch_size x gradient_accumulation_steps
        (npbert.distributed.global_batches), so a resumed run finds its place by counting."""
        a = self.args
        return dist.global_batches(n, a.per_device_train_batch_size, self.world.world_size,
                                   a.gradient_accumulation_steps, a.seed, epoch, a.dataloader_drop_last)

    def _plan(self):
        """(examples, updates per epoch, total updates, epochs); every rank checks it holds the same."""
        a = self.args
        if self.train_dataset is None:
            raise ValueError("Trainer.train() needs a train_dataset")
        n = len(self.train_dataset)
        plan = dist.plan_training(n, a.per_device_train_batch_size, a.gradient_accumulation_steps, self.world,
                                  drop_last=a.dataloader_drop_last)
        updates_per_epoch = plan["updates_per_epoch"]
        if a.max_steps > 0:
            total, epochs = a.max_steps, math.ceil(a.max_steps / updates_per_epoch)
        else:
            total, epochs = math.ceil(a.num_train_epochs * updates_per_epoch), math.ceil(a.num_train_epochs)
        return n, updates_per_epoch, total, epochs

    # ---- the loop -----------------------------------------------------------------------------
    def train(self, resume_from_checkpoint=None, trial=None, ignore_keys_for_eval=None):
        """Train, holding output_dir's run lock; see the module docstring.  Raises RunError when
        the directory is taken or holds another run's files, CheckpointError when a resume is
        refused, TrainingInterrupted after SIGINT / SIGTERM."""
        unsupported.refuse_keywords("Trainer.train()", {"trial": trial}, api.REFUSED_KEYWORDS)
        self._ignore_keys_for_eval = ignore_keys_for_eval
        a = self.args
        lock = runs.RunLock(a.output_dir)
        # (under mpiexec rank 0 alone locks and checks; a refusal stops every rank with its message)
        self.world.run_on_main(lock.acquire, what="locking output_dir")
        try:
            self.world.run_on_main(runs.prepare_output_dir, a.output_dir, a.overwrite_output_dir,
                                   resume_from_checkpoint, what="checking output_dir")
            self._last_saved, self._resumed_from = None, None
            with StopOnSignal(self._announce, self._interrupted_at_once) as self._stop:
                try:
                    return self._train(resume_from_checkpoint)
                finally:
                    self._stop = None
        finally:
            lock.release()

    def _train(self, resume_from_checkpoint):
        a, model = self.args, self.model
        n, updates_per_epoch, total, epochs = self._plan()
        self.create_optimizer_and_scheduler(total)
        if a.gradient_checkpointing:                          # the same gradients, less memory (encoder.py)
            model.gradient_checkpointing_enable()
        self.state = TrainerState(max_steps=total, num_train_epochs=epochs, train_batch_size=a.per_device_train_batch_size,
                                  logging_steps=a.steps(a.logging_steps, total), eval_steps=a.steps(a.eval_steps, total),
                                  save_steps=a.steps(a.save_steps, total))
        self._patience = 0
        dist.broadcast_parameters(model, self.world)          # every rank starts from rank 0's weights
        if resume_from_checkpoint:
            self._resume_on_every_rank(resume_from_checkpoint, total)    # rank 0 reads, every rank gets it
        st = self.state
        start_step = st.global_step
        self.progress = (ProgressLine(total, start_step, every=st.logging_steps) if self.world.is_main_process
                         else SilentProgress())
        if self.world.world_size > 1:      # data-parallel: rank 0 says, once, what the ranks compute (all gather)
            self.progress.message(dist.describe_world(self.world, a.per_device_train_batch_size,
                                                      a.gradient_accumulation_steps))
        model.train()
        loss_since_log, steps_since_log, train_loss_sum = 0.0, 0, 0.0
        t0 = time.perf_counter()
        stop = start_step >= total
        for epoch in range(start_step // updates_per_epoch, epochs):
            if stop:
                break
            batches = self._epoch_batches(epoch, n)
            first = start_step - epoch * updates_per_epoch if epoch == start_step // updates_per_epoch else 0
            for u in range(first, updates_per_epoch):
                loss, norm = self._update(batches[u], epoch)
                st.global_step += 1
                st.epoch = epoch + (u + 1) / updates_per_epoch
                loss_since_log += loss
                steps_since_log += 1
                train_loss_sum += loss
                lr = self._last_lr
                self.progress.update(st.global_step, st.epoch, loss, lr, norm)
                epoch_end = u == updates_per_epoch - 1
                log_first = a.logging_first_step and st.global_step == 1
                if self._due(a.logging_strategy, st.logging_steps, epoch_end) or log_first:
                    entry = {"loss": round(loss_since_log / steps_since_log, 4), "learning_rate": lr,
                             "epoch": round(st.epoch, 4), "step": st.global_step}
                    if norm is not None:
                        entry["grad_norm"] = norm
                    st.log_history.append(entry)
                    loss_since_log, steps_since_log = 0.0, 0
                is_best = False
                if self._due(a.eval_strategy, st.eval_steps, epoch_end):
                    metrics = self.evaluate(ignore_keys=self._ignore_keys_for_eval)
                    is_best, stop_early = self._track_best(metrics)
                    stop = stop or stop_early
                saved = self._due(a.save_strategy, st.save_steps, epoch_end)
                if saved:
                    self._save_checkpoint(is_best)
                if self._stop is not None and self._stop_requested():
                    self._stop_after_step(saved)
                if st.global_step >= total:
                    stop = True
                if stop:
                    break
        self.progress.close()
        runtime = time.perf_counter() - t0
        done = st.global_step - start_step
        if a.load_best_model_at_end and st.best_model_checkpoint:
            self.world.run_on_main(self._load_best, st.best_model_checkpoint,
                                   what=f"loading the best model from {st.best_model_checkpoint}")
            dist.broadcast_parameters(model, self.world)
            self.progress.message(f"loaded the best model ({a.metric_for_best_model} = {st.best_metric:.4g}) from "
                                  f"{st.best_model_checkpoint}")
        train_loss = train_loss_sum / max(done, 1)
        metrics = {"train_runtime": round(runtime, 4),
                   "train_samples_per_second": round(done * a.per_device_train_batch_size * self.world.world_size *
                                                     a.gradient_accumulation_steps / max(runtime, 1e-9), 3),
                   "train_steps_per_second": round(done / max(runtime, 1e-9), 3),
                   "total_flos": 0.0, "train_loss": train_loss}
        st.log_history.append({**metrics, "epoch": round(st.epoch, 4), "step": st.global_step})
        self.world.run_on_main(self._save_final_state, what="writing trainer_state.json")
        self.world.run_on_main(self._plot, what="drawing training_curves.png")
        return TrainOutput(st.global_step, train_loss, metrics)

    def _save_final_state(self):
        a, st = self.args, self.state
        os.makedirs(a.output_dir, exist_ok=True)
        try:
            st.save_to_json(os.path.join(a.output_dir, "trainer_state.json"))
        except OSError as e:
            raise ckpt.save_error(os.path.join(a.output_dir, "trainer_state.json"), st.global_step, e,
                                  a.output_dir) from e

    def _due(self, strategy, every, epoch_end):
        return strategy == "steps" and self.state.global_step % every == 0 or strategy == "epoch" and epoch_end

    def _update(self, global_batch, epoch):
        """One optimizer step over `global_batch` (dataset indices: its micro-batches of every
        rank); returns (the loss of the global batch, the gradient norm), the same on every rank.

        Each micro-batch is collated whole on every rank (a collator that draws random numbers,
        dynamic masking, then stays in step on every rank) and each rank keeps its rows; its
        dropout masks are keyed by their rows in the micro-batch (model.batch_offset), so N ranks
        compute what one process computes."""
        a, model, world = self.args, self.model, self.world
        step = self.state.global_step + 1
        shares = dist.shard_global_batch(global_batch, a.per_device_train_batch_size, world.world_size, world.rank)
        n_micro = len(shares)
        grads, loss = None, 0.0
        with world.guard(f"step {step}"):               # a rank that raises stops every rank
            for s in shares:
                full = self._collate(self.train_dataset, s.micro, "train")
                try:
                    totals = dist.count_loss_items(model, full)   # each loss term's items, over every rank
                except KeyError as e:
                    raise KeyError(f"{type(model).__name__} cannot compute its loss on train examples "
                                   f"{s.micro.tolist()[:8]}: the examples need the label field(s) "
                                   f"{self.label_names} ({e.args[0]})") from None
                empty = [c for c, n in totals.items() if n == 0]
                if empty and world.is_main_process:
                    warnings.warn(f"train examples {s.micro.tolist()[:8]}: no item for the loss term(s) {empty} "
                                  "(every label -100); this batch adds nothing to them", stacklevel=2)
                if len(empty) == len(totals) or len(s.indices) == 0:
                    if model.training:
                        model.state.rng.bit_generator.random_raw()     # the step seed its forward would draw
                    continue
                # one process averages its micro-batches' means, 1 / n_micro each: a term's N_c x n_micro
                scaled = {c: n * n_micro for c, n in totals.items()}
                batch = dist.rows_of_batch(full, s.offset, s.offset + len(s.indices))
                local = dist.count_loss_items(model, batch)
                with model.batch_offset(s.offset):
                    out = model(**batch)
                if out.get("loss") is None:
                    raise KeyError(f"{type(model).__name__} computed no loss for train examples "
                                   f"{s.indices.tolist()[:8]}: the examples need the label field(s) {self.label_names}")
                part = dist.loss_share(model, out, batch, scaled, local=local)
                if not math.isfinite(part):
                    where = f" on rank {world.rank}" if world.world_size > 1 else ""
                    raise FloatingPointError(
                        f"the loss is {float(out['loss'])} at step {step} (epoch {epoch}, train examples "
                        f"{s.indices.tolist()[:8]}{'...' if len(s.indices) > 8 else ''}{where}): training stopped; "
                        f"{ckpt.describe_last_checkpoint(a.output_dir)}. Lower the learning rate or check the inputs.")
                g = dist.backward_global_mean(model, out, batch, scaled, local=local)
                if grads is None:
                    grads = g
                else:
                    for k, v in g.items():
                        grads[k] += v
                loss += part
        grads = dist.allreduce_gradients(grads, model, world)     # the sum over the ranks, in place
        return world.all_sum(loss), self._optimizer_step(grads)

    def _optimizer_step(self, grads):
        """Clip (the global norm, returned; None when not clipped), step the optimizer and the schedule."""
        a = self.args
        norm = None
        if a.max_grad_norm and a.max_grad_norm > 0 and not self.optimizer.clips_itself:
            norm = optim.clip_grad_norm_(grads, a.max_grad_norm)
            if not math.isfinite(norm):
                raise FloatingPointError(f"the gradient norm is {norm} at step {self.state.global_step + 1}: "
                                         f"training stopped; {ckpt.describe_last_checkpoint(a.output_dir)}")
        self._last_lr = self.lr_scheduler.get_last_lr()[0]
        self.optimizer.step(grads)
        self.lr_scheduler.step()
        return norm
