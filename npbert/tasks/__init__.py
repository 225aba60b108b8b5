"""Fine-tuning tasks: data readers, features, metrics and the task modules `npbert finetune` runs.

SQuAD as google-research/bert's run_squad.py (npbert/tasks/squad.py, squad_predictions.py), the
official SQuAD scores (squad_metrics.py), long texts (long_text.py); the task modules
(question_answering.py, multiple_choice.py, ...) give `add_arguments(parser)` and
`load_task(args, tokenizer) -> TaskData` (base.py).
"""
from npbert.tasks.long_text import BertForChunkedSequenceClassification, chunk_tokens, truncate_tokens
from npbert.tasks.squad import (InputFeatures, RawResult, SquadExample, convert_examples_to_features,
                                read_squad_examples, write_predictions)
from npbert.tasks.squad_metrics import squad_evaluate

__all__ = ["BertForChunkedSequenceClassification", "InputFeatures", "RawResult", "SquadExample",
           "chunk_tokens", "convert_examples_to_features", "read_squad_examples", "squad_evaluate",
           "truncate_tokens", "write_predictions"]
