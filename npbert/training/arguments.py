"""TrainingArguments: transformers' field names and defaults for the fields npbert uses.

Only what a single-process NumPy trainer needs; every field keeps transformers' meaning.
npbert adds `layerwise_lr_decay`, `head_learning_rate` (seed 004's rates),
`early_stopping_patience` / `early_stopping_threshold` (transformers' EarlyStoppingCallback
arguments), `plot` (training_curves.png when matplotlib is installed) and
`ignore_changed_args` (resume even though an argument in RESULT_FIELDS changed).

Every other field of transformers 5's TrainingArguments is accepted too (report_to, logging_dir,
push_to_hub=False, hub_*, run_name, disable_tqdm, fp16, ...): npbert has no use for them
offline, in one process on the CPU, so each is kept as an attribute and noted in one line
(npbert/training/offline_args.py: which, and why); push_to_hub=True and the few that would change
the trained model (label_smoothing_factor, ...) are refused; a keyword that is no field at all
is a TypeError naming the closest one.

`overwrite_output_dir` is transformers' field: a run into a directory holding another run's
checkpoints or model is refused unless it is set (the old checkpoints are then removed) or
the run resumes (see npbert.training.runs).
"""
import dataclasses
import functools
import json
import math
from dataclasses import dataclass, field

from npbert.optim.schedules import SCHEDULER_NAMES
from npbert.training.offline_args import sort_keywords

# The fields whose change alters a run's result: resuming a checkpoint with any of them
# different from the saved training_args.json is refused (listing each change) unless
# ignore_changed_args.  num_train_epochs counts only when max_steps is not set.
RESULT_FIELDS = ("seed", "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
                 "max_grad_norm", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_ratio", "warmup_steps",
                 "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps", "num_train_epochs",
                 "optim", "dataloader_drop_last", "layerwise_lr_decay", "head_learning_rate", "label_names",
                 "early_stopping_patience", "early_stopping_threshold", "metric_for_best_model",
                 "greater_is_better")

OPTIMIZERS = ("adamw", "adam", "adam_weight_decay", "bert_adam")
STRATEGIES = ("no", "steps", "epoch")


@dataclass
class TrainingArguments:
    output_dir: str = "trainer_output"
    num_train_epochs: float = 3.0
    max_steps: int = -1
    per_device_train_batch_size: int = 8
    per_device_eval_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    lr_scheduler_type: str = "linear"
    lr_scheduler_kwargs: dict = field(default_factory=dict)
    warmup_ratio: float = 0.0
    warmup_steps: int = 0
    logging_steps: float = 500
    logging_first_step: bool = False
    logging_strategy: str = "steps"
    eval_strategy: str = "no"
    eval_steps: float = None
    save_strategy: str = "steps"
    save_steps: float = 500
    save_total_limit: int = None
    save_only_model: bool = False
    load_best_model_at_end: bool = False
    metric_for_best_model: str = None
    greater_is_better: bool = None
    seed: int = 42
    optim: str = "adamw"
    dataloader_drop_last: bool = False
    label_names: list = None
    remove_unused_columns: bool = True
    layerwise_lr_decay: float = None
    head_learning_rate: float = None
    early_stopping_patience: int = None
    early_stopping_threshold: float = 0.0
    plot: bool = True
    gradient_checkpointing: bool = False
    overwrite_output_dir: bool = False
    ignore_changed_args: bool = False

    def __post_init__(self):
        def bad(msg):
            raise ValueError(f"TrainingArguments: {msg}")
        for name in ("eval_strategy", "save_strategy", "logging_strategy"):
            value = getattr(self, name)
            value = getattr(value, "value", value)
            if value not in STRATEGIES:
                bad(f"{name} must be one of {STRATEGIES}, got {value!r}")
            setattr(self, name, value)
        if self.optim not in OPTIMIZERS:
            bad(f"optim must be one of {OPTIMIZERS}, got {self.optim!r}")
        if self.lr_scheduler_type not in SCHEDULER_NAMES:
            bad(f"lr_scheduler_type must be one of {SCHEDULER_NAMES}, got {self.lr_scheduler_type!r}")
        if self.max_steps is None or (self.max_steps <= 0 and not self.num_train_epochs > 0):
            bad("set max_steps > 0 or num_train_epochs > 0: nothing to train otherwise")
        for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                bad(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0.0 <= self.warmup_ratio <= 1.0:
            bad(f"warmup_ratio must be in [0, 1], got {self.warmup_ratio}")
        if self.warmup_steps < 0:
            bad(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.eval_steps is None:
            self.eval_steps = self.logging_steps            # as transformers
        for name in ("logging_steps", "eval_steps", "save_steps"):
            if not getattr(self, name) > 0:
                bad(f"{name} must be > 0, got {getattr(self, name)}")
        if self.save_total_limit is not None and self.save_total_limit < 1:
            bad(f"save_total_limit must be >= 1 or None, got {self.save_total_limit}")
        if self.load_best_model_at_end or self.early_stopping_patience is not None:
            if self.eval_strategy == "no":
                bad("load_best_model_at_end and early stopping need evaluations: set eval_strategy")
            if self.metric_for_best_model is None:
                self.metric_for_best_model = "loss"
        if self.load_best_model_at_end:
            if self.save_strategy != self.eval_strategy:
                bad(f"load_best_model_at_end requires the save and eval strategy to match, got "
                    f"save_strategy={self.save_strategy!r}, eval_strategy={self.eval_strategy!r}")
            if self.save_strategy == "steps" and self.save_steps % self.eval_steps != 0:
                bad(f"load_best_model_at_end requires save_steps ({self.save_steps}) to be a multiple of "
                    f"eval_steps ({self.eval_steps})")
        if self.metric_for_best_model is not None and self.greater_is_better is None:
            self.greater_is_better = not self.metric_for_best_model.endswith("loss")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            bad(f"early_stopping_patience must be >= 1, got {self.early_stopping_patience}")

    def steps(self, value, total):
        """A *_steps value below 1 is a fraction of the total steps (transformers)."""
        return max(1, math.ceil(value * total)) if value < 1 else int(value)

    def get_warmup_steps(self, num_training_steps):
        """warmup_steps if > 0, else ceil(warmup_ratio * num_training_steps)."""
        return self.warmup_steps if self.warmup_steps > 0 else math.ceil(num_training_steps * self.warmup_ratio)

    def changed_result_args(self, saved):
        """[(field, saved value, this value)] for the RESULT_FIELDS that differ from `saved` (a
        dict, as training_args.json holds it); fields `saved` does not have are not compared."""
        mine = json.loads(json.dumps(self.to_dict()))          # the same JSON types as `saved`
        changes = []
        for name in RESULT_FIELDS:
            if name not in saved or name not in mine:
                continue
            if name == "num_train_epochs" and (mine["max_steps"] > 0 and saved.get("max_steps", -1) > 0):
                continue
            if saved[name] != mine[name]:
                changes.append((name, saved[name], mine[name]))
        return changes

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# The dataclass's own __init__ takes npbert's fields; a call goes through this one first, which
# sorts transformers' other keywords out (offline_args.sort_keywords) and keeps them as attributes.
_fields_init = TrainingArguments.__init__


@functools.wraps(_fields_init)
def _init(self, *args, **kwargs):
    kwargs, ignored = sort_keywords(kwargs, [f.name for f in dataclasses.fields(TrainingArguments)])
    _fields_init(self, *args, **kwargs)
    self.ignored_args = ignored                     # {name: value}, not a field: not in to_dict()
    for name, value in ignored.items():
        setattr(self, name, value)


TrainingArguments.__init__ = _init
