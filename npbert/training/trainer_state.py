"""TrainerState, EvalPrediction, PredictionOutput, TrainOutput: transformers' containers.

`trainer.state` (a TrainerState, saved as trainer_state.json) is the run's progress; a model's
`model.state` (npbert/modeling/module.py: ModelState) is what its modules share."""
import dataclasses
import json
from collections import namedtuple
from dataclasses import dataclass, field

from npbert.io._atomic import atomic_write
from npbert.io.errors import CheckpointError

TrainOutput = namedtuple("TrainOutput", ["global_step", "training_loss", "metrics"])
PredictionOutput = namedtuple("PredictionOutput", ["predictions", "label_ids", "metrics"])


class EvalPrediction:
    """What compute_metrics receives: `predictions` (the logits array, or a tuple of arrays for
    models with several logits outputs) and `label_ids`, in dataset order.  Unpacks as
    `predictions, labels = eval_pred`, as transformers'."""

    def __init__(self, predictions, label_ids, inputs=None):
        self.predictions, self.label_ids, self.inputs = predictions, label_ids, inputs

    def __iter__(self):
        return iter((self.predictions, self.label_ids))

    def __getitem__(self, i):
        return (self.predictions, self.label_ids)[i]


_FIELD_TYPES = {
    "epoch": (int, float), "global_step": (int,), "max_steps": (int,), "logging_steps": (int,),
    "eval_steps": (int,), "save_steps": (int,), "train_batch_size": (int, None), "num_train_epochs": (int,),
    "num_input_tokens_seen": (int,), "total_flos": (int, float), "log_history": (list,),
    "best_metric": (int, float, None), "best_global_step": (int, None), "best_model_checkpoint": (str, None),
    "stateful_callbacks": (dict, None),
}
_NON_NEGATIVE = ("epoch", "global_step", "max_steps", "num_train_epochs")


@dataclass
class TrainerState:
    """The fields of transformers' trainer_state.json."""
    epoch: float = 0.0
    global_step: int = 0
    max_steps: int = 0
    logging_steps: int = 500
    eval_steps: int = 500
    save_steps: int = 500
    train_batch_size: int = None
    num_train_epochs: int = 0
    num_input_tokens_seen: int = 0
    total_flos: float = 0
    log_history: list = field(default_factory=list)
    best_metric: float = None
    best_global_step: int = None
    best_model_checkpoint: str = None
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
    is_hyper_param_search: bool = False
    trial_name: str = None
    trial_params: dict = None
    stateful_callbacks: dict = field(default_factory=dict)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d, source="trainer_state.json"):
        """The state from a dict as save_to_json writes it; a field of the wrong type (a
        `"global_step": "200"`) is a CheckpointError naming `source` and the field."""
        if not isinstance(d, dict):
            raise CheckpointError(f"{source}: expected a JSON object, got {type(d).__name__}")
        for name, value in d.items():
            kinds = _FIELD_TYPES.get(name)
            if kinds is None:
                continue
            ok = (value is None and None in kinds) or any(
                k is not None and isinstance(value, k) and not (isinstance(value, bool) and k is not bool)
                for k in kinds)
            if ok and isinstance(value, (int, float)) and not isinstance(value, bool) and name in _NON_NEGATIVE:
                ok = value >= 0
            if not ok:
                wanted = " or ".join("null" if k is None else {int: "an integer", float: "a number", str: "a string",
                                                               list: "a list", dict: "an object", bool: "true/false"}[k]
                                     for k in kinds)
                raise CheckpointError(f"{source}: field {name!r} must be {wanted}"
                                      f"{' >= 0' if name in _NON_NEGATIVE else ''}, got {value!r}")
        for k, entry in enumerate(d.get("log_history") or []):
            if not isinstance(entry, dict):
                raise CheckpointError(f"{source}: log_history[{k}] must be an object, got {entry!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def save_to_json(self, path):
        with atomic_write(path, "w") as f:
            f.write(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
