"""Every public name and keyword of the transformers / torch classes npbert mirrors, classified.

The names come from the installed transformers and torch (surface.py); this file says, for each,
    SUPPORTED        same meaning in npbert; the test named exercises it
    REFUSED          npbert raises a one-line error naming it and saying what to do instead
                     (test_conformance triggers every one; docs/compatibility.md quotes the messages)
    NOT_APPLICABLE   a GPU, hub, distributed backend, torch internal, ... npbert does not have: why
Entries are keys as surface.py writes them ("Trainer.train(resume_from_checkpoint)") or fnmatch
patterns over them ("*push_to_hub*"); a key takes its exact entry, else the pattern with the most
literal characters.  TrainingArguments' keywords are classified where npbert decides what to do
with them at run time (npbert/training/offline_args.py), read below, not copied.
"""
from npbert.training.offline_args import IGNORED, REFUSED as ARGS_REFUSED

T = "tests/conformance/test_surface_behaviour.py::"
TRAINER = "tests/training/test_trainer.py::"
TOK = "tests/api/test_tokenizer_api.py::"

SUPPORTED = {
    # -- Trainer
    TRAINER + "test_resume_is_bit_identical_to_an_uninterrupted_run": [
        "Trainer(model)", "Trainer(args)", "Trainer(data_collator)", "Trainer(train_dataset)", "Trainer.train",
        "Trainer.train(resume_from_checkpoint)", "TrainingArguments(max_steps)",
        "TrainingArguments(per_device_train_batch_size)", "TrainingArguments(gradient_accumulation_steps)",
        "TrainingArguments(output_dir)"],
    TRAINER + "test_evaluation_metrics_early_stopping_and_best_model": [
        "Trainer(eval_dataset)", "Trainer(compute_metrics)", "Trainer.evaluate", "Trainer.evaluate(eval_dataset)",
        "Trainer.evaluate(metric_key_prefix)", "Trainer.predict", "Trainer.predict(test_dataset)",
        "Trainer.predict(metric_key_prefix)", "TrainingArguments(eval_strategy)", "TrainingArguments(eval_steps)",
        "TrainingArguments(save_total_limit)", "TrainingArguments(load_best_model_at_end)",
        "TrainingArguments(metric_for_best_model)", "TrainingArguments(greater_is_better)",
        "TrainingArguments(per_device_eval_batch_size)"],
    TRAINER + "test_checkpoint_model_loads_in_transformers": ["Trainer.save_model", "Trainer.save_model(output_dir)"],
    "tests/tasks/test_tasks_with_trainer.py": ["Trainer(preprocess_logits_for_metrics)"],
    T + "test_trainer_takes_tokenizer_as_processing_class_with_the_futurewarning": ["Trainer(processing_class)"],
    T + "test_ignore_keys_leave_outputs_out_of_the_predictions": [
        "Trainer.evaluate(ignore_keys)", "Trainer.predict(ignore_keys)", "Trainer.train(ignore_keys_for_eval)"],
    T + "test_the_trainers_small_methods": [
        "Trainer.create_optimizer", "Trainer.create_scheduler", "Trainer.create_scheduler(*)",
        "Trainer.create_optimizer_and_scheduler", "Trainer.create_optimizer_and_scheduler(num_training_steps)",
        "Trainer.get_learning_rates", "Trainer.get_num_trainable_parameters", "Trainer.is_*_process_zero",
        "Trainer.log", "Trainer.log(logs)", "Trainer.log(start_time)", "Trainer.log_metrics", "Trainer.log_metrics(*)",
        "Trainer.metrics_format", "Trainer.metrics_format(metrics)", "Trainer.save_metrics", "Trainer.save_metrics(*)",
        "Trainer.save_state"],
    # -- TrainingArguments: npbert's own fields (offline_args' lists are read below)
    TRAINER + "test_accumulated_update_equals_one_big_batch": [
        "TrainingArguments(save_strategy)", "TrainingArguments(num_train_epochs)"],
    "tests/api/test_custom_head.py::test_the_trainer_trains_it_and_resumes_bit_for_bit": [
        "TrainingArguments(save_steps)", "TrainingArguments(logging_steps)"],
    TRAINER + "test_bad_inputs_raise_clear_errors": ["TrainingArguments(optim)"],
    "tests/distributed/test_single_process.py::test_one_rank_makes_the_trainers_batches": [
        "TrainingArguments(dataloader_drop_last)", "TrainingArguments(seed)"],
    "tests/training/test_gradient_checkpointing.py::"
    "test_the_trainer_with_gradient_checkpointing_ends_where_it_ends_without": ["TrainingArguments(gradient_checkpointing)"],
    T + "test_activation_checkpointing_is_gradient_checkpointing": ["TrainingArguments(activation_checkpointing)"],
    T + "test_training_arguments_reach_the_optimizer_schedule_and_log": [
        "TrainingArguments(learning_rate)", "TrainingArguments(adam_*)", "TrainingArguments(weight_decay)",
        "TrainingArguments(lr_scheduler_*)", "TrainingArguments(warmup_*)", "TrainingArguments(logging_first_step)",
        "TrainingArguments(save_only_model)", "TrainingArguments(max_grad_norm)"],
    T + "test_remove_unused_columns_before_the_collator": [
        "TrainingArguments(remove_unused_columns)", "TrainingArguments(label_names)"],
    T + "test_logging_strategy": ["TrainingArguments(logging_strategy)"],
    # -- collators
    "tests/training/test_collators.py::test_same_structure_as_transformers_collators": [
        "DataCollator*(tokenizer)", "DataCollator*(padding)", "DataCollator*(max_length)",
        "DataCollator*(pad_to_multiple_of)", "DataCollator*(label_pad_token_id)", "DataCollator*(mlm)",
        "DataCollator*(mlm_probability)", "DataCollator*(seed)", "DataCollator*(return_tensors)",
        "default_data_collator", "default_data_collator(*)"],
    T + "test_collators_take_a_dict_of_columns_as_transformers_pads_it": ["DataCollator*.__call__"],
    T + "test_mask_replace_probabilities": ["DataCollatorForLanguageModeling(*_replace_prob)"],
    # -- optimization
    "tests/optim/test_optim_vs_torch.py::test_every_schedule_equals_transformers": [
        "get_*schedule*", "SchedulerType.*"],
    "tests/optim/test_optim_vs_torch.py::test_adam_family_equals_torch_with_groups_clipping_and_schedule": [
        "AdamW", "Adam", "AdamW(params)", "AdamW(lr)", "AdamW(betas)", "AdamW(eps)", "AdamW(weight_decay)",
        "Adam(params)", "Adam(lr)", "Adam(betas)", "Adam(eps)", "Adam(weight_decay)"],
    T + "test_adam_decoupled_weight_decay_and_step_closure": ["Adam(decoupled_weight_decay)", "Optimizer.step(closure)"],
    "tests/optim/test_optim_api.py::test_state_dict_round_trip_continues_bit_identically": [
        "Optimizer.state_dict", "Optimizer.load_state_dict", "Optimizer.load_state_dict(state_dict)",
        "Optimizer.step"],
    "tests/api/test_parameters.py::test_zero_grad_set_to_none_false_and_clip_norm": [
        "Optimizer.zero_grad", "Optimizer.zero_grad(set_to_none)", "Module.zero_grad", "Module.zero_grad(*)"],
    "tests/api/test_parameters.py::test_optimizer_on_parameters_equals_the_dict_form": [
        "Optimizer.add_param_group", "Optimizer.add_param_group(param_group)", "Trainer(optimizers)"],
    # -- tokenizer
    "tests/tokenization/test_reference.py": [
        "BertTokenizer(*)", "PreTrainedTokenizerBase.tokenize", "PreTrainedTokenizerBase.tokenize(*)",
        "PreTrainedTokenizerBase.encode", "PreTrainedTokenizerBase.encode(*)",
        "PreTrainedTokenizerBase.convert_*", "PreTrainedTokenizerBase.convert_*(*)",
        "PreTrainedTokenizerBase.get_vocab", "PreTrainedTokenizerBase.vocab_size", "BertTokenizer.vocab",
        "PreTrainedTokenizerBase.max_len_*", "PreTrainedTokenizerBase.num_special_tokens_to_add",
        "BertTokenizer.is_fast",
        "PreTrainedTokenizerBase.num_special_tokens_to_add(pair)", "PreTrainedTokenizerBase.get_special_tokens_mask",
        "PreTrainedTokenizerBase.get_special_tokens_mask(*)", "PreTrainedTokenizerBase.model_input_names",
        "PreTrainedTokenizerBase.padding_side", "PreTrainedTokenizerBase.truncation_side",
        "PreTrainedTokenizerBase.pad_token_type_id", "PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES",
        "PreTrainedTokenizerBase.vocab_files_names"],
    "tests/tokenization/test_decoding.py": [
        "PreTrainedTokenizerBase.decode", "PreTrainedTokenizerBase.decode(*)", "PreTrainedTokenizerBase.batch_decode",
        "PreTrainedTokenizerBase.batch_decode(*)", "PreTrainedTokenizerBase.clean_up_tokenization",
        "PreTrainedTokenizerBase.clean_up_tokenization(text)"],
    TOK + "test_pad_as_transformers": ["PreTrainedTokenizerBase.pad", "PreTrainedTokenizerBase.pad(*)"],
    TOK + "test_encode_plus_and_batch_encode_plus_are_the_call": [
        "PreTrainedTokenizerBase.__call__", "PreTrainedTokenizerBase.__call__(*)"],
    "tests/tokenization/test_peer_api.py::test_special_token_and_id_setters": [
        "PreTrainedTokenizerBase.*_token", "PreTrainedTokenizerBase.*_token_id", "PreTrainedTokenizerBase.all_special_*",
        "PreTrainedTokenizerBase.special_tokens_map", "PreTrainedTokenizerBase.*special_tokens*"],
    "tests/tokenization/test_added_tokens.py::test_added_tokens_equal_transformers": [
        "PreTrainedTokenizerBase.add_tokens", "PreTrainedTokenizerBase.add_tokens(*)",
        "PreTrainedTokenizerBase.add_special_tokens", "PreTrainedTokenizerBase.add_special_tokens(special_tokens_dict)",
        "PreTrainedTokenizerBase.added_tokens_decoder", "BertTokenizer.added_tokens_encoder",
        "BertTokenizer.get_added_vocab"],
    "tests/tokenization/test_added_tokens.py::test_save_and_reload_keep_every_setting": [
        "PreTrainedTokenizerBase.from_pretrained", "PreTrainedTokenizerBase.from_pretrained(pretrained_model_name_or_path)",
        "PreTrainedTokenizerBase.save_pretrained", "PreTrainedTokenizerBase.save_pretrained(save_directory)",
        "PreTrainedTokenizerBase.save_pretrained(filename_prefix)", "PreTrainedTokenizerBase.save_pretrained(legacy_format)"],
    "tests/tokenization/test_files.py::test_save_vocabulary": [
        "PreTrainedTokenizerBase.save_vocabulary", "PreTrainedTokenizerBase.save_vocabulary(*)"],
    "tests/tokenization/test_fast_api.py::test_alignment_methods_equal_the_rust_tokenizers": [
        "BatchEncoding.*", "BatchEncoding.*(*)"],
    "tests/tokenization/test_fast_api.py::test_to_device": ["BatchEncoding.to", "BatchEncoding.to(*)"],
    # -- models
    "tests/api/test_auto_and_loading.py::test_auto_model_classes_load_the_bert_class": [
        "AutoModel", "AutoModelFor*", "AutoModel.from_pretrained*", "AutoModel.from_config*"],
    "tests/api/test_auto_and_loading.py::test_auto_config_and_tokenizer": [
        "AutoConfig", "AutoTokenizer", "AutoConfig.from_pretrained*", "AutoConfig.for_model*",
        "AutoTokenizer.from_pretrained*"],
    "tests/api/test_loading_and_errors.py::test_from_pretrained_with_a_config_object": [
        "PreTrainedModel.from_pretrained", "PreTrainedModel.from_pretrained(pretrained_model_name_or_path)",
        "PreTrainedModel.save_pretrained", "PreTrainedModel.save_pretrained(save_directory)",
        "PreTrainedModel.from_pretrained(config)", "PreTrainedModel.post_init",
        "PreTrainedModel.base_model*"],
    "tests/api/test_torch_api.py::test_get_input_embeddings_is_the_models_array": [
        "PreTrainedModel.get_input_embeddings", "PreTrainedModel.get_output_embeddings"],
    "tests/api/test_torch_api.py::test_get_output_embeddings_as_transformers": ["PreTrainedModel.tie_weights"],
    "tests/api/test_torch_api.py::test_resize_token_embeddings": [
        "PreTrainedModel.resize_token_embeddings", "PreTrainedModel.resize_token_embeddings(*)"],
    "tests/training/test_gradient_checkpointing.py::test_the_gradients_are_the_same_bit_for_bit": [
        "PreTrainedModel.gradient_checkpointing_*", "PreTrainedModel.is_gradient_checkpointing",
        "PreTrainedModel.supports_gradient_checkpointing"],
    T + "test_transformers_4_loading_and_saving_keywords": ["PreTrainedModel.from_pretrained(ignore_mismatched_sizes)"],
    T + "test_the_models_small_attributes": [
        "PreTrainedModel.device", "PreTrainedModel.main_input_name", "PreTrainedModel.get_memory_footprint",
        "PreTrainedModel.get_memory_footprint(return_buffers)", "Module.get_parameter", "Module.get_parameter(target)",
        "Module.apply", "Module.apply(fn)", "PreTrainedModel.*activation_checkpointing*",
        "PreTrainedModel.activation_checkpointing_enable(activation_checkpointing_kwargs)",
        "PreTrainedModel.num_parameters", "PreTrainedModel.num_parameters(*)", "PreTrainedModel.dtype",
        "PreTrainedModel.config_class"],
    "tests/api/test_torch_api.py::test_named_modules_are_torchs": [
        "Module.named_modules", "Module.named_modules(*)", "Module.modules", "Module.children",
        "Module.named_children", "Module.get_submodule", "Module.get_submodule(target)", "Module.extra_repr",
        "Module.forward"],
    "tests/api/test_parameters.py::test_parameters_are_the_models_own_arrays": [
        "Module.parameters", "Module.parameters(*)", "Module.named_parameters", "Module.named_parameters(*)",
        "Module.state_dict", "Module.load_state_dict", "Module.load_state_dict(state_dict)",
        "Module.load_state_dict(strict)"],
    "tests/api/test_parameters.py::test_requires_grad_is_freeze": ["Module.requires_grad_", "Module.requires_grad_(*)"],
    "tests/modeling/test_model_behaviour.py": ["Module.train", "Module.train(mode)", "Module.eval"],
    "tests/api/test_device_and_dtype.py::test_a_dtype_converts_every_parameter_and_the_numbers_follow": [
        "Module.to", "Module.cpu", "Module.double", "Module.float", "Module.cuda", "Module.cuda(device)",
        "Module.half"],
    # -- pipelines
    "tests/pipelines/test_pipelines_vs_transformers.py::test_fill_mask": [
        "pipeline", "pipeline(task)", "pipeline(model)", "pipeline(tokenizer)", "pipeline('fill-mask')(*)"],
    "tests/pipelines/test_pipelines_vs_transformers.py::test_text_classification": ["pipeline('text-classification')(*)"],
    "tests/pipelines/test_pipelines_vs_transformers.py::test_token_classification_every_aggregation": [
        "pipeline('token-classification')(*)"],
    "tests/pipelines/test_pipelines_vs_transformers.py::test_feature_extraction": ["pipeline('feature-extraction')(*)"],
    "tests/pipelines/test_batching.py::test_device_cpu_runs_and_a_gpu_is_refused": ["pipeline(device)", "pipeline(dtype)"],
}

REFUSED = [
    "Trainer(model_init)", "Trainer(compute_loss_func)", "Trainer(callbacks)", "Trainer(optimizer_cls_and_kwargs)",
    "Trainer.train(trial)", "Trainer.*callback*", "Trainer.compute_loss*", "Trainer.training_step*",
    "Trainer.prediction_step*", "Trainer.evaluation_loop*", "Trainer.get_*_dataloader*", "Trainer.num_examples*",
    "Trainer.hyperparameter_search*", "Trainer.call_model_init*", "Trainer.get_decay_parameter_names*",
    "Trainer.get_optimizer_cls_and_kwargs*", "Trainer.get_optimizer_group*",
    "DataCollatorForLanguageModeling(whole_word_mask)",
    "AdamW(amsgrad)", "AdamW(maximize)", "Adam(amsgrad)", "Adam(maximize)",
    "Module.register_*", "Module.add_module*", "Module.set_submodule*", "Module.bfloat16",
    "PreTrainedModel.init_weights", "PreTrainedModel.initialize_weights", "PreTrainedModel.set_*_embeddings*",
    "PreTrainedModel.*position_embeddings*", "PreTrainedModel.*able_input_require_grads",
    "PreTrainedModel.activation_checkpointing_enable(every_n_layers)",
    "PreTrainedModel.activation_checkpointing_enable(offload)",
    "BertTokenizer.train_new_from_iterator*", "PreTrainedTokenizerBase.save_pretrained(push_to_hub)",
]

_HUB = "npbert reads and writes local directories only: no model hub, no upload, no download"
_GPU = "npbert computes in NumPy on the CPU, in float32 or float64: no GPU, accelerator or other dtype"
_PARALLEL = ("npbert's data parallelism is MPI (docs/data_parallel.md); torch.distributed, FSDP, DeepSpeed, "
             "tensor/pipeline/context parallel plans do not apply")
_RUST = "the Rust tokenizers' objects: npbert's tokenizer is Python (its offsets and word ids are computed)"
_CHAT = "chat templates and response parsing are for generative models; BERT has none"
_TORCH = "torch's internals (hooks on optimizers, profiling, compiled graphs, extra state, type aliases)"
_LOADING = "transformers' loading and initialisation internals; npbert's from_pretrained does its own"
_PEFT = "PEFT adapters are a torch library; freeze parameters with requires_grad_ (docs/training.md)"
_KERNELS = ("attention and kernel implementations: npbert chooses its path with npbert.set_path "
            "('reference' | 'fast'), the same numbers either way")
_OTHER_MODALITIES = "an Auto class for a model family or modality other than BERT's text encoder"
_GENERATE = "text generation: BERT is an encoder, it does not generate"
_TRAINER_INTERNALS = ("the internals of transformers' torch loop (accelerate, autocast, FLOP counting, "
                      "model cards, batch sampling); npbert's loop is written out in trainer.py")

NOT_APPLICABLE = {
    _HUB: ["*push_to_hub*", "*hub_*", "*register_for_auto_class*", "*.from_pretrained(cache_dir)",
           "*.from_pretrained(force_download)", "*.from_pretrained(local_files_only)", "*.from_pretrained(token)",
           "*.from_pretrained(revision)", "*.from_pretrained(trust_remote_code)", "pipeline(revision)",
           "pipeline(token)", "pipeline(trust_remote_code)", "Trainer.init_hf_repo*", "Trainer.create_model_card*",
           "PreTrainedModel.is_remote_code", "PreTrainedModel.is_custom_code", "PreTrainedModel.*model_tags*",
           "PreTrainedModel.save_pretrained(token)", "PreTrainedModel.save_pretrained(variant)",
           "PreTrainedTokenizerBase.pretrained_vocab_files_map"],
    _GPU: ["Module.ipu*", "Module.xpu*", "Module.mtia*", "Module.to_empty*", "Module.type*", "Module.share_memory",
           "pipeline(device_map)", "PreTrainedModel.dequantize*", "AdamW(fused)", "Adam(fused)",
           "AdamW(capturable)", "Adam(capturable)", "AdamW(foreach)", "Adam(foreach)", "AdamW(differentiable)",
           "Adam(differentiable)"],
    _PARALLEL: ["PreTrainedModel.*_plan*", "PreTrainedModel.*tp_size*", "PreTrainedModel.fsdp_*",
                "PreTrainedModel.*distribute*", "PreTrainedModel.*gather_sharded*", "PreTrainedModel.barrier_*",
                "PreTrainedModel.should_save_on_this_rank*", "PreTrainedModel.supports_context_parallel",
                "PreTrainedModel.save_pretrained(is_main_process)", "PreTrainedModel.save_pretrained(max_shard_size)",
                "PreTrainedModel.save_pretrained(distributed_checkpoint)", "Trainer.get_*p_size"],
    _RUST: ["BertTokenizer.backend_tokenizer", "BertTokenizer.decoder", "BertTokenizer.model",
            "BertTokenizer.set_truncation_and_padding*", "BertTokenizer.update_post_processor",
            "BertTokenizer.can_save_slow_tokenizer", "PreTrainedTokenizerBase.slow_tokenizer_class",
            "BertTokenizer.add_bos_token", "BertTokenizer.add_eos_token", "BatchEncoding.encodings",
            "PreTrainedTokenizerBase.convert_to_native_format", "PreTrainedTokenizerBase.convert_added_tokens*",
            "PreTrainedTokenizerBase.add_special_tokens(replace_extra_special_tokens)",
            "pipeline(use_fast)", "BertTokenizer(vocab)", "pipeline('token-classification')(offset_mapping)"],
    ("a head's loss is stated once, in its loss_terms(batch), and computed by the model's call "
     "(docs/custom_heads.md); transformers' loss functions (ForCausalLMLoss, ...) are not a model attribute here"):
        ["PreTrainedModel.loss_function"],
    "BatchEncoding.convert_to_tensors: return_tensors='np' at the call gives NumPy arrays; npbert has no torch tensors":
        ["BatchEncoding.convert_to_tensors*"],
    _CHAT: ["*chat_template*", "*parse_response*", "*response_parser*", "*encode_message_with_chat_template*"],
    _TORCH: ["Optimizer.register_*", "Optimizer.profile_hook_step*", "Optimizer.Optimizer*Hook", "Module.T_destination",
             "Module.call_super_init", "Module.dump_patches", "Module.*_extra_state*", "Module.compile",
             "PreTrainedModel.get_compiled_call*", "Module.state_dict(destination)", "Module.state_dict(keep_vars)",
             "Module.state_dict(prefix)", "Module.load_state_dict(assign)", "Module.modules(remove_duplicate)"],
    "npbert's models keep no buffers (position ids are computed at each call)": [
        "Module.*buffers*", "Module.get_buffer*", "PreTrainedModel.named_non_persistent_buffers*",
        "PreTrainedModel.get_parameter_or_buffer*"],
    _LOADING: ["PreTrainedModel.tie_weights(*)", "PreTrainedModel.mark_tied_weights_as_initialized*", "PreTrainedModel.get_expanded_tied_weights_keys*",
               "PreTrainedModel.get_correct_*", "PreTrainedModel.is_distributed_loading_by_transformers",
               "PreTrainedModel.get_init_context*", "PreTrainedModel.can_record_outputs",
               "PreTrainedModel.retrieve_modules_from_names*", "PreTrainedModel.warn_if_padding_and_no_attention_mask*",
               "PreTrainedModel.input_modalities", "PreTrainedModel.dummy_inputs",
               "PreTrainedModel.from_pretrained(use_safetensors)", "PreTrainedModel.from_pretrained(weights_only)",
               "PreTrainedModel.from_pretrained(fusion_config)", "PreTrainedModel.from_pretrained(disable_mmap)",
               "PreTrainedModel.save_pretrained(state_dict)", "PreTrainedModel.save_pretrained(save_*_format)",
               "PreTrainedModel.is_backend_compatible", 
               "pipeline(config)", "pipeline(model_kwargs)", "pipeline(pipeline_class)"],
    _PEFT: ["PreTrainedModel.*adapter*", "PreTrainedModel.enable_peft_hotswap*"],
    _KERNELS: ["PreTrainedModel.*kernel*", "PreTrainedModel.*experts*", "PreTrainedModel.*attn_implementation*"],
    _OTHER_MODALITIES: ["AutoModelForAudio*", "AutoModelForCTC", "AutoModelForDecision", "AutoModelFor*Estimation",
                        "AutoModelForDocumentQuestionAnswering", "AutoModelForImage*", "AutoModelFor*Segmentation",
                        "AutoModelForKeypoint*", "AutoModelForMask*Generation", "AutoModelForMaskedImageModeling",
                        "AutoModelForMultimodalLM", "AutoModelForObjectDetection", "AutoModelForRNNT",
                        "AutoModelForSeq2SeqLM", "AutoModelForSpeechSeq2Seq", "AutoModelForTDT",
                        "AutoModelForTable*", "AutoModelForTextEncoding", "AutoModelForTextRecognition",
                        "AutoModelForTextTo*", "AutoModelForTimeSeriesPrediction", "AutoModelForVideoClassification",
                        "AutoModelForVisualQuestionAnswering", "AutoModelForZeroShot*",
                        "pipeline(feature_extractor)", "pipeline(image_processor)", "pipeline(video_processor)",
                        "pipeline(processor)"],
    "npbert's Auto classes map BERT checkpoints to npbert's BERT classes; there is no registry of other "
    "model families to add to": ["Auto*.register*"],
    _GENERATE: ["PreTrainedTokenizerBase.__call__(text*_target)", "PreTrainedModel.can_generate", "PreTrainedModel.generation_config_class",
                "PreTrainedModel.*_decoder*", "PreTrainedModel.*_encoder*"],
    _TRAINER_INTERNALS: ["Trainer.autocast_smart_context_manager*", "Trainer.compute_loss_context_manager",
                         "Trainer.create_accelerator_and_postprocess", "Trainer.end", "Trainer.floating_point_ops*",
                         "Trainer.get_batch_samples*", "Trainer.get_total_train_batch_size*",
                         "Trainer.loss_is_scaled_for_ga", "Trainer.set_initial_training_values*", "Trainer.store_flos",
                         "Trainer.save_model(_internal_call)", "Trainer.create_optimizer(model)"],
    "transformers 5 builds its collators' random generator from `seed`; npbert's is the collator's `rng`": [
        "DataCollatorForLanguageModeling.create_rng", "DataCollatorForLanguageModeling.get_generator"],
    "transformers' collators' per-framework entry points; npbert's __call__ is the NumPy one": [
        "DataCollator*.numpy_call", "DataCollator*.torch_call", "DataCollator*.*_mask_tokens"],
}

# TrainingArguments: what npbert/training/offline_args.py does with transformers' other fields
# (its lists hold names of several transformers versions: DERIVED entries need not all match)
DERIVED = {f"TrainingArguments({name})" for name in list(ARGS_REFUSED) + list(IGNORED)}
REFUSED += [f"TrainingArguments({name})" for name in ARGS_REFUSED]
for _name, (_default, _why) in IGNORED.items():
    if _name in ARGS_REFUSED:          # (push_to_hub: kept at False, refused when True)
        continue
    NOT_APPLICABLE.setdefault(f"TrainingArguments: {_why} (accepted; a value other than the default warns)",
                              []).append(f"TrainingArguments({_name})")

# What tutorials do with torch tensors and accelerate that cannot work on NumPy arrays, and the
# npbert way to do the same (docs/compatibility.md, first section).
ARRAYS = [
    ("`accelerator = Accelerator(); model, optimizer, loader = accelerator.prepare(...)`",
     "nothing to prepare: the model, optimizer and batches are used as they are; for data parallelism run "
     "the script under `mpiexec -n N` (docs/data_parallel.md)"),
    ("`accelerator.backward(loss)`", "`loss.backward()` (or `grads = model.backward()`)"),
    ("`accelerator.gather(t)`, `accelerator.gather_for_metrics(t)`, `accelerator.reduce(t)`",
     "under MPI, `npbert.distributed.init()` gives the world: `world.all_gather_object(x)`, "
     "`world.all_sum(x)`; one process: the arrays themselves. `Trainer.evaluate()` / `predict()` already "
     "gather every rank's predictions in dataset order"),
    ("`accelerator.device`, `batch.to(device)`, `tensor.cuda()`",
     "NumPy arrays live in memory: no move; `BatchEncoding.to('cpu')` and `model.to('cpu')` return "
     "themselves, a GPU device is an error"),
    ("`torch.utils.data.DataLoader(dataset, batch_size, shuffle, collate_fn=collator)`",
     "the Trainer batches itself; in a loop of your own, cut a permutation of the indices "
     "(`np.random.default_rng(seed).permutation(len(dataset))`) and call `collator([dataset[i] for i in idx])`"),
    ("`with torch.no_grad():`, `model.eval()`", "`with npbert.no_grad():` (the forward keeps no cache), "
     "`model.eval()` as torch"),
    ("`loss.item()`, `logits.detach().cpu().numpy()`, `torch.argmax(logits, dim=-1)`",
     "`loss.item()` and `loss.detach()` work (the loss is a NumPy scalar); outputs are already NumPy arrays: "
     "`logits.argmax(-1)`"),
    ("`torch.manual_seed(s)`, `set_seed(s)`", "models take `seed=` (`Model(config, seed=s)`), dropout draws "
     "from the model's generator, the Trainer from `TrainingArguments(seed=)`, collators from `seed=`"),
    ("`torch.save(model.state_dict(), path)`", "`model.save_pretrained(dir)` (safetensors that transformers "
     "loads), or `np.savez(path, **model.state_dict())`"),
    ("`nn.init.normal_(module.weight, std=...)` in a `model.apply(fn)`",
     "`model.apply(fn)` visits the modules as torch; write the arrays in place: "
     "`module.weight.data[...] = rng.normal(0, std, module.weight.shape)`"),
]
