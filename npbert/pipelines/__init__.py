"""npbert.pipeline(task, model=DIR): use a checkpoint the way transformers' pipelines do.

    fill-mask                                      FillMaskPipeline            BertForMaskedLM
    text-classification  (sentiment-analysis)      TextClassificationPipeline  BertForSequenceClassification
                         (sequence-classification)
    token-classification (ner)                     TokenClassificationPipeline BertForTokenClassification
    question-answering                             QuestionAnsweringPipeline   BertForQuestionAnswering
    feature-extraction                             FeatureExtractionPipeline   BertModel

The same inputs, keywords and results as transformers' pipelines of those names (QA as
transformers 4.57, the last release that has it), on the same checkpoint directory.  `task`
None takes it from the checkpoint's config.json (`architectures`).  The names and aliases are
those of every npbert command (npbert/task_names.py).  docs/inference.md.
"""
import os

from npbert.config import BertConfig
from npbert.task_names import TASKS, canonical_task, describe_tasks
from npbert.pipelines.architectures import check_model_for_task
from npbert.pipelines.base import ARCHITECTURE_TASKS, TASK_ALIASES, Pipeline, task_of_config
from npbert.pipelines.feature_extraction import FeatureExtractionPipeline
from npbert.pipelines.fill_mask import FillMaskPipeline
from npbert.pipelines.question_answering import QuestionAnsweringPipeline
from npbert.pipelines.text_classification import TextClassificationPipeline
from npbert.pipelines.token_classification import TokenClassificationPipeline

SUPPORTED_TASKS = {
    "fill-mask": FillMaskPipeline,
    "text-classification": TextClassificationPipeline,
    "token-classification": TokenClassificationPipeline,
    "question-answering": QuestionAnsweringPipeline,
    "feature-extraction": FeatureExtractionPipeline,
}


def pipeline(task=None, model=None, tokenizer=None, **kwargs):
    """A pipeline for `task` on `model` (a checkpoint directory, or an npbert model with
    `tokenizer`).  A head trained for another task (config.json's `architectures`) is refused
    unless ignore_architectures=True (npbert/pipelines/architectures.py).  Other keywords are
    the pipeline's defaults for every call (e.g. aggregation_strategy="simple", top_k=3),
    `batch_size` (sequences per model call, padded; default 1), `device` (-1 or "cpu": npbert
    runs on the CPU only) or `dtype` (np.float32 or np.float64).  A keyword no pipeline of the
    task takes is a TypeError naming the closest."""
    if model is None:
        raise ValueError("npbert.pipeline needs model= (a checkpoint directory): npbert downloads nothing")
    if task is None:
        if not isinstance(model, (str, os.PathLike)):
            task = task_of_config(model.config)
        else:
            task = task_of_config(BertConfig.from_pretrained(os.fspath(model)))
        if task is None:
            raise ValueError(f"pipeline(task=None): the config of {model} names no architecture a pipeline "
                             f"serves ({sorted(ARCHITECTURE_TASKS)}); give the task")
    task = canonical_task(task)
    if task not in SUPPORTED_TASKS:
        elsewhere = " (transformers has no such pipeline; `npbert predict --task multiple-choice` runs it)" \
            if task == "multiple-choice" else ""
        raise KeyError(f"Unknown task {task!r}{elsewhere}: npbert's pipelines are "
                       f"{describe_tasks(t for t in TASKS if t in SUPPORTED_TASKS)}")
    check_model_for_task(task, model, kwargs.pop("ignore_architectures", False))   # (architectures.py)
    return SUPPORTED_TASKS[task](model, tokenizer, **kwargs)


__all__ = ["pipeline", "Pipeline", "SUPPORTED_TASKS", "TASK_ALIASES", "FillMaskPipeline",
           "TextClassificationPipeline", "TokenClassificationPipeline", "QuestionAnsweringPipeline",
           "FeatureExtractionPipeline", "task_of_config"]
