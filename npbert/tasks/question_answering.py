"""The task module for `npbert finetune --task question-answering` (SQuAD v1.1 / v2.0 JSON files).

    N = number of features (windows), T = max_seq_length

    load_task(args, tokenizer) -> TaskData:
      train file       read_squad_examples(is_training=True) -> convert_examples_to_features ->
                       [{"input_ids", "attention_mask", "token_type_ids": (T,), "start_positions",
                         "end_positions": int}]                              (labels: 0 = [CLS] when
                                                                              the window has no answer)
      validation file  the same windows, with the labels when every question has its answer in
                       the text (so the Trainer reports eval_loss); compute_metrics turns the
                       (start_logits, end_logits) (N, T) of its windows, in order, into answers
                       with write_predictions and scores them with squad_evaluate:
                       v1.1 -> exact_match, f1; v2.0 -> exact, f1, HasAns_*, NoAns_* (the keys
                       transformers' run_qa.py reports, with the eval_ prefix added by the Trainer)
      test file        the windows without labels; write_predictions writes predictions.jsonl (a
                       record per question: id, the answer as "label", its probability and the
                       n-best answers; npbert/tasks/records.py), predictions.json {question id:
                       answer} for the official evaluation script, nbest_predictions.json (and
                       null_odds.json for v2.0) beside it

Counts are of questions: the windows are an implementation detail (TaskData.num_examples).
The metrics exclude the official script's counts (total, HasAns_total, NoAns_total), which
would be drawn as curves; the number of questions is in eval_results.json as eval_samples.

Flags (Google's and run_qa.py's names): --doc_stride, --max_query_length, --n_best_size,
--max_answer_length, --version_2_with_negative, --null_score_diff_threshold.
"""
import json
import logging
import os

import numpy as np

from npbert.io._atomic import atomic_write
from npbert.modeling import BertForQuestionAnswering
from npbert.tasks.base import TaskData
from npbert.tasks.squad import (RawResult, _load_squad_json, convert_examples_to_features, read_squad_examples,
                                write_predictions)
from npbert.tasks.records import TOP_K, write_records
from npbert.tasks.squad_metrics import squad_evaluate

logger = logging.getLogger(__name__)


def add_arguments(parser):
    group = parser.add_argument_group("question answering (SQuAD)")
    group.add_argument("--doc_stride", type=int, default=128,
                       help="how far each window of a long paragraph starts after the previous one, in tokens")
    group.add_argument("--max_query_length", type=int, default=64, help="questions are cut to this many tokens")
    group.add_argument("--n_best_size", type=int, default=20, help="start and end candidates kept per window")
    group.add_argument("--max_answer_length", type=int, default=30, help="the longest answer predicted, in tokens")
    group.add_argument("--version_2_with_negative", action="store_true",
                       help="SQuAD v2.0: some questions have no answer")
    group.add_argument("--null_score_diff_threshold", type=float, default=0.0,
                       help='v2.0: predict "" when null score - best span score exceeds this')
    return parser


def _arg(args, name, default):
    value = getattr(args, name, None)
    return default if value is None else value


def features_to_dataset(features, with_labels):
    """InputFeatures -> the Trainer's examples: int64 arrays (T,) named as BertForQuestionAnswering's inputs."""
    dataset = []
    for f in features:
        example = {"input_ids": np.asarray(f.input_ids, dtype=np.int64),
                   "attention_mask": np.asarray(f.input_mask, dtype=np.int64),
                   "token_type_ids": np.asarray(f.segment_ids, dtype=np.int64)}
        if with_labels:
            example["start_positions"] = int(f.start_position)
            example["end_positions"] = int(f.end_position)
        dataset.append(example)
    return dataset


def collate_features(examples):
    """Stack the fixed-length windows: {name: (B, T) or (B,)} int64."""
    return {k: np.stack([np.asarray(e[k], dtype=np.int64) for e in examples]) for k in examples[0]}


def _labelled_eval_dataset(path, features, tokenizer, options, version_2):
    """The validation windows with their labels, read as a training file would be; without
    labels (and a log line saying why) when the file cannot be read so."""
    try:
        labelled_examples = read_squad_examples(path, is_training=True, version_2_with_negative=version_2)
        labelled = convert_examples_to_features(labelled_examples, tokenizer, is_training=True, **options)
    except ValueError as e:
        logger.warning("%s: the validation windows get no labels, so no eval_loss (and the Trainer, which "
                       "scores only labelled data, no eval metrics): the file does not give every question a "
                       "usable answer (%s)", path, e)
        return features_to_dataset(features, with_labels=False)
    if [f.unique_id for f in labelled] != [f.unique_id for f in features]:
        logger.warning("%s: the validation windows get no labels (no eval_loss, no eval metrics from the "
                       "Trainer): some answers could not be mapped to words", path)
        return features_to_dataset(features, with_labels=False)
    return features_to_dataset(labelled, with_labels=True)


def _results(features, predictions):
    """(start_logits, end_logits), each (N, T), in feature order -> [RawResult]."""
    if not isinstance(predictions, (tuple, list)) or len(predictions) != 2:
        raise ValueError("question answering predictions must be (start_logits, end_logits)")
    start_logits, end_logits = (np.asarray(p) for p in predictions)
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(f"{len(start_logits)} predictions for {len(features)} windows")
    return [RawResult(f.unique_id, start_logits[i][:len(f.input_ids)], end_logits[i][:len(f.input_ids)])
            for i, f in enumerate(features)]


def load_task(args, tokenizer, config=None):
    if not getattr(args, "train_file", None) and config is not None and \
            "BertForQuestionAnswering" not in (getattr(config, "architectures", None) or ()):
        raise ValueError(f"no --train_file, and the model is not fine-tuned for question answering (its config.json "
                         f"names architectures {getattr(config, 'architectures', None)}): its answers would come "
                         "from a random head. Give --train_file (and --do_train), or a model `npbert finetune` saved")
    version_2 = bool(_arg(args, "version_2_with_negative", False))
    options = dict(max_seq_length=_arg(args, "max_seq_length", 384), doc_stride=_arg(args, "doc_stride", 128),
                   max_query_length=_arg(args, "max_query_length", 64))
    decode = dict(n_best_size=_arg(args, "n_best_size", 20), max_answer_length=_arg(args, "max_answer_length", 30),
                  do_lower_case=bool(getattr(tokenizer, "do_lower_case", True)), version_2_with_negative=version_2,
                  null_score_diff_threshold=_arg(args, "null_score_diff_threshold", 0.0))

    train_dataset = eval_dataset = test_dataset = None
    compute_metrics = write_test_predictions = None
    counts = {}

    train_file = getattr(args, "train_file", None)
    if train_file:
        examples = read_squad_examples(train_file, is_training=True, version_2_with_negative=version_2)
        features = convert_examples_to_features(examples, tokenizer, is_training=True, **options)
        train_dataset = features_to_dataset(features, with_labels=True)
        counts["train"] = len(examples)
        logger.info("%s: %d questions -> %d windows", train_file, len(examples), len(features))

    eval_file = getattr(args, "validation_file", None)
    if eval_file:
        eval_examples = read_squad_examples(eval_file, is_training=False, version_2_with_negative=version_2)
        eval_features = convert_examples_to_features(eval_examples, tokenizer, is_training=False, **options)
        eval_dataset = _labelled_eval_dataset(eval_file, eval_features, tokenizer, options, version_2)
        gold = _load_squad_json(eval_file)
        counts["eval"] = len(eval_examples)

        def compute_metrics(eval_prediction):
            predictions, _, _ = write_predictions(eval_examples, eval_features,
                                                  _results(eval_features, eval_prediction.predictions), **decode)
            scores = squad_evaluate(gold, predictions, version_2_with_negative=version_2)
            return {k: v for k, v in scores.items() if not k.endswith("total")}     # counts are no metric

    test_file = getattr(args, "test_file", None)
    if test_file:
        test_examples = read_squad_examples(test_file, is_training=False, version_2_with_negative=version_2)
        test_features = convert_examples_to_features(test_examples, tokenizer, is_training=False, **options)
        test_dataset = features_to_dataset(test_features, with_labels=False)
        counts["test"] = len(test_examples)
        top_k = getattr(args, "top_k", None) or TOP_K

        def write_test_predictions(prediction_output, output_path):
            """predictions.jsonl at output_path; predictions.json, nbest_predictions.json (and
            null_odds.json) beside it."""
            directory = os.path.dirname(os.path.abspath(output_path))
            predictions, nbest, scores_diff = write_predictions(
                test_examples, test_features, _results(test_features, prediction_output.predictions), **decode)
            with atomic_write(output_path, "w") as f:
                write_records(f, ({"id": qid, "label": answer,
                                   "score": next((float(n["probability"]) for n in nbest[qid] if n["text"] == answer),
                                                 None),
                                   "answers": [{"answer": n["text"], "score": float(n["probability"])}
                                               for n in nbest[qid][:top_k]]}
                                  for qid, answer in predictions.items()))
            with atomic_write(os.path.join(directory, "predictions.json"), "w") as f:
                f.write(json.dumps(predictions, indent=4, ensure_ascii=False) + "\n")
            with atomic_write(os.path.join(directory, "nbest_predictions.json"), "w") as f:
                f.write(json.dumps(nbest, indent=4, ensure_ascii=False) + "\n")
            if version_2:
                with atomic_write(os.path.join(directory, "null_odds.json"), "w") as f:
                    f.write(json.dumps(scores_diff, indent=4) + "\n")

    return TaskData(model_class=BertForQuestionAnswering, config_overrides={}, train_dataset=train_dataset,
                    eval_dataset=eval_dataset, test_dataset=test_dataset, data_collator=collate_features,
                    compute_metrics=compute_metrics, write_predictions=write_test_predictions,
                    num_examples=counts, unit="questions")
