"""What a task module gives `npbert finetune` (contract between the task modules and the command).

Each task module (`npbert/tasks/<task>.py`) has `add_arguments(parser)` and
`load_task(args, tokenizer) -> TaskData`.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


@dataclass
class TaskData:
    """model_class: the BertFor* class to fine-tune; config_overrides: config fields the task sets
    (num_labels, id2label, label2id, problem_type, ...); train/eval/test_dataset: lists of example
    dicts (or None); data_collator: list of examples -> dict of arrays (None: the Trainer's default);
    compute_metrics: EvalPrediction -> dict (or None); write_predictions: (PredictionOutput,
    output_path) -> None, writes the test predictions (or None); num_examples: {"train", "eval",
    "test": how many examples the files hold} in `unit`s (questions, sentences), when a dataset
    holds more rows than that (QA windows, long sentences' windows); notes: lines the command
    prints about the data."""
    model_class: Any
    config_overrides: dict = field(default_factory=dict)
    train_dataset: Optional[list] = None
    eval_dataset: Optional[list] = None
    test_dataset: Optional[list] = None
    data_collator: Optional[Callable] = None
    compute_metrics: Optional[Callable] = None
    write_predictions: Optional[Callable] = None
    num_examples: Optional[dict] = None
    unit: str = "examples"
    notes: list = field(default_factory=list)
