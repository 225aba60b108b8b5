"""transformers' TrainingArguments keywords that npbert's trainer does not use, and what a
TrainingArguments(...) call does with each.

npbert trains in one process, in NumPy, on the CPU, offline: trackers (report_to, logging_dir,
run_name, ...), the Hub (push_to_hub, hub_*), devices and mixed precision (fp16, use_cpu, ...),
distributed training (ddp_*, fsdp, deepspeed, ...) and data loader workers mean nothing here.
Tutorials pass them all the same, so TrainingArguments accepts every field of transformers 5's
(tests/training/test_arguments_keywords.py checks the list against the installed transformers):

    IGNORED       accepted and kept as an attribute (args.report_to), with a line saying why
                  logged at INFO (logger "npbert.training.offline_args"); the values other than
                  transformers' default (requests npbert does not carry out: fp16=True,
                  logging_dir="logs") are listed in one UserWarning per call
    REFUSED       the value changes the trained model and npbert does not implement it:
                  anything but transformers' default is a ValueError (push_to_hub=True too)
    RENAMED       transformers 4's old name, taken as the new one with a FutureWarning
    ALIASES       transformers 5's new name of a field npbert keeps under its old name

A keyword in none of these nor among TrainingArguments' fields is a TypeError naming the
closest field (difflib), as a misspelling usually is.
"""
import difflib
import logging
import warnings

logger = logging.getLogger(__name__)

_TRACKER = "npbert reports to no tracker: its log is the console and output_dir/trainer_state.json"
_DEVICE = "npbert trains on the CPU in the model's dtype (float32 unless loaded as float64)"
_PARALLEL = ("npbert's Trainer runs data-parallel over MPI when started under mpiexec (docs/data_parallel.md); "
             "torch.distributed's settings do not apply")
_LOADER = "npbert's Trainer batches in the main process, with no DataLoader workers"
_MEMORY = "npbert's Trainer keeps no torch memory to manage or compile"
_EVAL = "npbert's Trainer evaluates as eval_strategy / eval_steps say, gathering every batch"
_RUN = "used by transformers' example scripts, not by its Trainer; npbert's Trainer does not read it"
_HUB = "npbert uploads nothing (no network): save with trainer.save_model(dir)"

# name: (transformers 5's default, why npbert does not use it)
IGNORED = {
    "report_to": ("none", _TRACKER), "logging_dir": (None, _TRACKER), "run_name": (None, _TRACKER),
    "project": ("huggingface", _TRACKER), "trackio_space_id": (None, _TRACKER),
    "trackio_bucket_id": (None, _TRACKER), "trackio_static_space_id": (None, _TRACKER),
    "disable_tqdm": (None, "npbert prints its own progress line (npbert/training/progress.py), no tqdm bar"),
    "logging_nan_inf_filter": (True, "npbert logs the loss as it is"),
    "log_level": ("passive", _TRACKER), "log_level_replica": ("warning", _PARALLEL),
    "log_on_each_node": (True, _PARALLEL), "include_num_input_tokens_seen": ("no", _TRACKER),
    "skip_memory_metrics": (True, _MEMORY), "debug": ("", _MEMORY),
    "push_to_hub": (False, _HUB), "hub_token": (None, _HUB), "hub_private_repo": (None, _HUB),
    "hub_model_id": (None, _HUB), "hub_strategy": ("every_save", _HUB), "hub_always_push": (False, _HUB),
    "hub_revision": (None, _HUB),
    "use_cpu": (False, _DEVICE), "fp16": (False, _DEVICE), "bf16": (False, _DEVICE),
    "fp16_full_eval": (False, _DEVICE), "bf16_full_eval": (False, _DEVICE), "tf32": (None, _DEVICE),
    "torch_compile": (False, _MEMORY), "torch_compile_backend": (None, _MEMORY),
    "torch_compile_mode": (None, _MEMORY), "torch_empty_cache_steps": (None, _MEMORY),
    "use_liger_kernel": (False, _MEMORY), "liger_kernel_config": (None, _MEMORY),
    "gradient_checkpointing_kwargs": (None, _MEMORY),
"activation_checkpointing_kwargs": (None, _MEMORY),
    "auto_find_batch_size": (False, _MEMORY), "use_cache": (False, _MEMORY),
    "enable_jit_checkpoint": (False, _MEMORY),
    "local_rank": (-1, _PARALLEL), "ddp_find_unused_parameters": (None, _PARALLEL),
    "ddp_bucket_cap_mb": (None, _PARALLEL), "ddp_broadcast_buffers": (None, _PARALLEL),
    "ddp_static_graph": (None, _PARALLEL), "ddp_backend": (None, _PARALLEL), "ddp_timeout": (1800, _PARALLEL),
    "fsdp": (None, _PARALLEL), "fsdp_config": (None, _PARALLEL), "deepspeed": (None, _PARALLEL),
    "accelerator_config": (None, _PARALLEL), "parallelism_config": (None, _PARALLEL),
    "average_tokens_across_devices": (True, _PARALLEL), "save_on_each_node": (False, _PARALLEL),
    "dataloader_num_workers": (0, _LOADER), "dataloader_pin_memory": (True, _LOADER),
    "dataloader_persistent_workers": (False, _LOADER), "dataloader_prefetch_factor": (None, _LOADER),
    "dataloader_multiprocessing_context": (None, _LOADER), "dataloader_in_order": (True, _LOADER),
    "length_column_name": ("length", "npbert does not group batches by length"),
    "eval_use_gather_object": (False, _EVAL), "eval_accumulation_steps": (None, _EVAL),
    "restore_callback_states_from_checkpoint": (False, "npbert's Trainer has no callbacks"),
    "full_determinism": (False, "npbert's training is deterministic for a given seed"),
    "do_train": (False, _RUN), "do_eval": (False, _RUN), "do_predict": (False, _RUN),
    "resume_from_checkpoint": (None, _RUN + " (pass it to trainer.train(resume_from_checkpoint=...))"),
}

# name: (the one value npbert does, what to do instead)
REFUSED = {
    "push_to_hub": (False, "npbert uploads nothing (no network); save with trainer.save_model(dir) and "
                           "upload that directory yourself"),
    "label_smoothing_factor": (0.0, "npbert's losses have no label smoothing; leave it at 0.0"),
    "neftune_noise_alpha": (None, "npbert adds no NEFTune noise to the embeddings; leave it None"),
    "optim_args": (None, "give the optimizer's settings as adam_beta1, adam_beta2, adam_epsilon, weight_decay"),
    "optim_target_modules": (None, "npbert's optimizers take every trainable parameter"),
    "train_sampling_strategy": ("random", "npbert's Trainer shuffles the training set each epoch (seed)"),
    "data_seed": (None, "npbert's data order follows `seed`; set seed instead"),
    "eval_delay": (0, "npbert evaluates from the first eval_steps on; leave it 0"),
    "eval_on_start": (False, "call trainer.evaluate() before trainer.train()"),
    "prediction_loss_only": (False, "read eval_loss from trainer.evaluate(); predictions are always gathered"),
    "eval_do_concat_batches": (True, "npbert's evaluation concatenates the batches' predictions"),
    "batch_eval_metrics": (False, "compute_metrics is called once on the whole evaluation set"),
    "include_for_metrics": ([], "EvalPrediction holds predictions and label_ids only"),
    "ignore_data_skip": (False, "npbert resumes the data order exactly where the checkpoint left it"),
}

RENAMED = {"evaluation_strategy": "eval_strategy"}
# transformers 5's new names of npbert's fields (their old names, npbert's, stay without a warning)
ALIASES = {"activation_checkpointing": "gradient_checkpointing"}


def _same(value, default):
    try:
        return bool(value == default)
    except Exception:                 # (an array or an object without a plain ==)
        return False


def sort_keywords(kwargs, fields, where="TrainingArguments"):
    """kwargs of a TrainingArguments(...) call -> (those of npbert's fields, the ignored ones).
    Renames, notes and warns, and refuses as the module docstring says."""
    kept, ignored, requested = {}, {}, []
    for name, value in kwargs.items():
        if name in ALIASES:
            if value is None:                      # (transformers' default: asks for nothing)
                continue
            if ALIASES[name] in kwargs and kwargs[ALIASES[name]] != value:
                raise ValueError(f"{where}: both `{name}` and `{ALIASES[name]}` given, with different values; "
                                 f"give one of them")
            name = ALIASES[name]
        if name in RENAMED:
            new = RENAMED[name]
            warnings.warn(f"{where}: `{name}` is transformers 4's old name of `{new}`; taken as {new}={value!r}",
                          FutureWarning, stacklevel=3)
            if new in kwargs:
                raise ValueError(f"{where}: both `{name}` and `{new}` given; give `{new}` only")
            name = new
        if name in fields:
            kept[name] = value
            continue
        if name in REFUSED and not _same(value, REFUSED[name][0]):
            raise ValueError(f"{where}({name}={value!r}): not supported: {REFUSED[name][1]}")
        if name in IGNORED or name in REFUSED:
            default, why = IGNORED[name] if name in IGNORED else REFUSED[name]
            ignored[name] = value
            logger.info(f"{where}: `{name}` ({name}={value!r}) is not used: {why}")
            if not any(_same(value, nothing) for nothing in (default, None, False, "none", "no", [], "")):
                requested.append(f"{name}={value!r}")
            continue
        close = difflib.get_close_matches(name, list(fields) + list(IGNORED) + list(REFUSED), n=1)
        hint = f"did you mean {close[0]!r}?" if close else "see docs/training.md for the fields"
        raise TypeError(f"{where} got an unexpected keyword argument {name!r}: {hint}")
    if requested:                                   # one line for all: what was asked and not done
        warnings.warn(f"{where}: ignored (npbert trains offline, in one process, on the CPU; "
                      f"docs/training.md): {', '.join(requested)}", UserWarning, stacklevel=3)
    return kept, ignored
