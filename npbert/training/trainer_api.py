"""The rest of transformers' Trainer surface: the small methods scripts call around train(),
the 4.x `tokenizer=` keyword, and what npbert's Trainer refuses by name (its loop is written
out in trainer.py: no callbacks, no overridable step hooks, no torch DataLoader)."""
import difflib
import json
import os
import warnings

from npbert import unsupported

_NO_CALLBACKS = ("npbert's Trainer has no callbacks; early stopping is TrainingArguments(early_stopping_patience=, "
                 "early_stopping_threshold=), logging is trainer.state.log_history")
_NO_HOOKS = ("npbert's Trainer has no overridable step hooks: a model computes its loss in its forward "
             "(docs/custom_heads.md), and the loop is trainer.py's _update")
_NO_LOADER = ("npbert's Trainer has no torch DataLoader: it batches the dataset itself (data_collator on lists of "
              "examples); for a loop of your own, index the dataset and call the data collator")
_NO_SEARCH = "npbert has no hyperparameter search: build one Trainer per setting (a model built inside your loop)"

REFUSED_KEYWORDS = {
    "model_init": _NO_SEARCH,
    "compute_loss_func": "a model computes its loss in its forward; write a head of your own (docs/custom_heads.md)",
    "callbacks": _NO_CALLBACKS,
    "optimizer_cls_and_kwargs": "pass optimizers=(npbert.optim.AdamW(model.parameters(), ...), None)",
    "trial": _NO_SEARCH,
}
REFUSED_METHODS = {
    "add_callback": _NO_CALLBACKS, "pop_callback": _NO_CALLBACKS, "remove_callback": _NO_CALLBACKS,
    "compute_loss": _NO_HOOKS, "training_step": _NO_HOOKS, "prediction_step": _NO_HOOKS,
    "evaluation_loop": "call trainer.evaluate(eval_dataset) or trainer.predict(test_dataset)",
    "get_train_dataloader": _NO_LOADER, "get_eval_dataloader": _NO_LOADER, "get_test_dataloader": _NO_LOADER,
    "num_examples": "len(dataset): npbert's Trainer has no DataLoader",
    "hyperparameter_search": _NO_SEARCH, "call_model_init": _NO_SEARCH,
    "get_decay_parameter_names": "npbert.optim.optimizer_grouped_parameters(model, weight_decay) names the groups "
                                 "(no decay on bias and LayerNorm.weight)",
    "get_optimizer_cls_and_kwargs": "TrainingArguments(optim=...) picks one of npbert.optim's optimizers",
    "get_optimizer_group": "read trainer.optimizer.param_groups",
}


def renamed_tokenizer(kwargs, processing_class):
    """transformers 4's Trainer(tokenizer=): taken as processing_class, with transformers' FutureWarning."""
    if "tokenizer" not in kwargs:
        return processing_class
    tokenizer = kwargs.pop("tokenizer")
    if processing_class is not None:
        raise ValueError("Trainer(): both `tokenizer` and `processing_class` given; give processing_class only")
    warnings.warn("`tokenizer` is deprecated and will be removed in version 5.0.0 for `Trainer.__init__`. "
                  "Use `processing_class` instead.", FutureWarning, stacklevel=3)
    return tokenizer


def unexpected_keyword(name, known):
    """Trainer()'s error for a keyword it does not take, naming the closest one."""
    close = difflib.get_close_matches(name, [k for k in known if k not in ("self", "kwargs")], n=1)
    return (f"Trainer() got an unexpected keyword argument {name!r}"
            + (f": did you mean {close[0]!r}?" if close else " (docs/compatibility.md lists transformers' keywords)"))


class TrainerAPI:
    """Mixed into Trainer: transformers' small Trainer methods."""

    @property
    def tokenizer(self):
        """transformers 4's name of processing_class (read with its FutureWarning)."""
        warnings.warn("Trainer.tokenizer is now deprecated. You should use Trainer.processing_class instead.",
                      FutureWarning, stacklevel=2)
        return self.processing_class

    def is_world_process_zero(self):
        return self.world.is_main_process

    def is_local_process_zero(self):
        return self.world.is_main_process

    def create_optimizer(self):
        """The optimizer TrainingArguments ask for (create_optimizer_and_scheduler's first half)."""
        if self.optimizer is None:
            self._build_optimizer(None)
        return self.optimizer

    def create_scheduler(self, num_training_steps, optimizer=None):
        if optimizer is not None:
            self.optimizer = optimizer
        self.create_optimizer_and_scheduler(num_training_steps)
        return self.lr_scheduler

    def get_learning_rates(self):
        if self.optimizer is None:
            raise ValueError("Trainer.get_learning_rates(): no optimizer yet (call train() or create_optimizer())")
        return [group["lr"] for group in self.optimizer.param_groups]

    def get_num_trainable_parameters(self):
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def log(self, logs, start_time=None):
        """Append `logs` (with epoch and step) to state.log_history, as transformers."""
        entry = {**logs, "epoch": round(self.state.epoch, 4), "step": self.state.global_step}
        self.state.log_history.append(entry)

    @staticmethod
    def metrics_format(metrics):
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()}

    def log_metrics(self, split, metrics):
        if not self.is_world_process_zero():
            return
        print(f"***** {split} metrics *****")
        shown = self.metrics_format(metrics)
        width = max((len(k) for k in shown), default=0)
        for key in sorted(shown):
            print(f"  {key:<{width}} = {shown[key]:>9}")

    def save_metrics(self, split, metrics, combined=True):
        """{split}_results.json in output_dir (and all_results.json, merged, when combined)."""
        if not self.is_world_process_zero():
            return
        os.makedirs(self.args.output_dir, exist_ok=True)
        with open(os.path.join(self.args.output_dir, f"{split}_results.json"), "w") as f:
            json.dump(metrics, f, indent=4, sort_keys=True)
        if combined:
            path = os.path.join(self.args.output_dir, "all_results.json")
            merged = {}
            if os.path.exists(path):
                with open(path) as f:
                    merged = json.load(f)
            merged.update(metrics)
            with open(path, "w") as f:
                json.dump(merged, f, indent=4, sort_keys=True)


unsupported.install(TrainerAPI, REFUSED_METHODS)
