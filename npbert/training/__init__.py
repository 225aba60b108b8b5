"""Training: TrainingArguments and Trainer with transformers' names, collators, checkpoints.

    args = TrainingArguments("out", num_train_epochs=3, learning_rate=2e-5, eval_strategy="epoch")
    trainer = Trainer(model, args, train_dataset=train, eval_dataset=dev, data_collator=collator,
                      compute_metrics=compute_metrics)
    trainer.train()                       # or train(resume_from_checkpoint=True)

See docs/training.md.
"""
from npbert.io.errors import RunError, SaveError

from .arguments import TrainingArguments
from .checkpoint import CheckpointError, get_last_checkpoint
from .collators import (DataCollatorForLanguageModeling, DataCollatorForTokenClassification,
                        DataCollatorForWholeWordMask, DataCollatorWithPadding, default_data_collator)
from .plots import plot_training_curves
from .runs import RunLock, prepare_output_dir
from .signals import TrainingInterrupted
from .trainer import Trainer
from .trainer_state import EvalPrediction, PredictionOutput, TrainerState, TrainOutput

__all__ = ["TrainingArguments", "Trainer", "TrainerState", "TrainOutput", "EvalPrediction", "PredictionOutput",
           "DataCollatorWithPadding", "DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask",
           "DataCollatorForTokenClassification", "default_data_collator", "CheckpointError", "get_last_checkpoint",
           "plot_training_curves", "RunError", "SaveError", "TrainingInterrupted", "RunLock", "prepare_output_dir"]
