"""`npbert finetune`: fine-tune a checkpoint on a task, evaluate it, predict with it.

    npbert finetune --task sequence-classification --model_name_or_path DIR \\
        --train_file train.csv --validation_file dev.csv [--test_file test.csv] --output_dir out

What runs: --do_train, --do_eval, --do_predict, as transformers' example scripts; without any
of them, whatever the files given call for.  Without training, the label set is the fine-tuned
model's own (its config.json), so `--do_predict --test_file F` predicts with a saved model.

Tasks: text-classification (also named sequence-classification or sentiment-analysis),
token-classification (or ner), multiple-choice, question-answering: the names of npbert predict
and npbert.pipeline too.  Files and the columns read (the first present of each list; or name
them with --text_column_name / --text_pair_column_name / --label_column_name):
  text-classification       .csv / .tsv (a header row), .json / .jsonl (an object a line, or a list)
      text: sentence, text, sentence1, question, content, title
      pair: sentence2 (after sentence1), sentence (after question), text_pair (after text),
            hypothesis (after premise)
      label: label, labels, label_desc, category  (a list of labels: multi-label; every label a
            number and one with a decimal point: regression; --problem_type to say which)
      id (in the predictions): id, idx, guid; else the line number
  token-classification      CoNLL: `word<TAB or space>tag` a line, a blank line between sentences,
                            BIO / IOB2 tags (B-X, I-X, O); -DOCSTART- lines skipped
  multiple-choice           .json / .jsonl: SWAG {sent1, sent2, ending0..ending3, label} (also .csv)
                            or CHID {candidates, content with #idiom#, answer}
  question-answering        SQuAD v1.1 / v2.0 JSON (data > paragraphs > context, qas > id, question,
                            answers / is_impossible); --version_2_with_negative for v2.0

Writes to --output_dir: config.json, model.safetensors, vocab.txt, tokenizer_config.json,
trainer_state.json, training_curves.png, eval_results.json, predictions.jsonl (a record per
test example: its id, the label, its score and the top scores; spans for NER), and
predictions.conll (NER) or predictions.json + nbest_predictions.json (QA).  Per-task defaults
(learning rate, epochs, batch size, max_seq_length) are listed below and in docs/finetuning.md.
"""
import argparse
import importlib
import json
import os
import sys

import numpy as np

from npbert.cli.common import (CliError, UsageError, add_task_argument, add_training_arguments, load_checkpoint,
                               load_tokenizer, positive_int, read_model_config, resolve_max_seq_length,
                               training_arguments, training_run)
from npbert.cli.outputs import TRAINING_RUN_ENTRIES, refuse_overwriting_inputs
from npbert.io._atomic import atomic_write
from npbert.training import Trainer

# The tasks finetune trains (their names and aliases: npbert/task_names.py, as every command) and
# the module of each under npbert/tasks/.
TASKS = {"text-classification": "sequence_classification", "token-classification": "token_classification",
         "multiple-choice": "multiple_choice", "question-answering": "question_answering"}
PREDICTIONS = "predictions.jsonl"

# Defaults per task, used when the flag is not given.  Measured with all-MiniLM-L6-v2 on the
# shipped data (docs/finetuning.md has the commands and the figures).
TASK_DEFAULTS = {
    "text-classification": dict(learning_rate=1e-4, num_train_epochs=5.0, per_device_train_batch_size=16,
                                    max_seq_length=128),
    "token-classification": dict(learning_rate=3e-4, num_train_epochs=3.0, per_device_train_batch_size=16,
                                 max_seq_length=128),
    "multiple-choice": dict(learning_rate=5e-5, num_train_epochs=3.0, per_device_train_batch_size=8,
                            max_seq_length=128),
    "question-answering": dict(learning_rate=1e-4, num_train_epochs=2.0, per_device_train_batch_size=12,
                               max_seq_length=384),
}


def _per_task(name):
    return "per task: " + ", ".join(f"{task} {d[name]:g}" for task, d in TASK_DEFAULTS.items())


def add_parser(commands):
    p = commands.add_parser("finetune", help="fine-tune a checkpoint on classification, NER, multiple choice or QA; "
                                             "evaluate; predict", description=__doc__.split("\n", 1)[1])
    add_run_arguments(p)
    for module in TASKS.values():
        importlib.import_module(f"npbert.tasks.{module}").add_arguments(p)
    add_training_arguments(
        p, help_overrides={"learning_rate": "the peak learning rate (default " + _per_task("learning_rate") + ")",
                           "num_train_epochs": "passes over the training data (default "
                                               + _per_task("num_train_epochs") + ")",
                           "per_device_train_batch_size": "training examples per step (default "
                                                          + _per_task("per_device_train_batch_size") + ")",
                           "save_total_limit": "keep at most this many checkpoint-N directories, the newest (and "
                                               "the best with load_best_model_at_end); a MiniLM checkpoint with its "
                                               "optimizer state is about 270 MB",
                           "save_strategy": "when to save a checkpoint-N directory: no, steps (every --save_steps) or "
                                            "epoch (default: steps, as transformers' Trainer, so a run shorter than "
                                            "--save_steps keeps the final model only; with --load_best_model_at_end, "
                                            "when it evaluates)"},
        learning_rate=None, num_train_epochs=None, per_device_train_batch_size=None, eval_strategy="epoch",
        save_strategy=None, save_total_limit=1, logging_steps=10, per_device_eval_batch_size=32)
    p.set_defaults(run=run)


def add_run_arguments(p):
    """The task, the model, the files, what to run (the flags before the task-specific ones)."""
    add_task_argument(p, "finetune", tuple(TASKS), required=True, help="what to fine-tune for")
    p.add_argument("--model_name_or_path", required=True, metavar="DIR",
                   help="a checkpoint directory (config.json, weights, vocab.txt); a pre-trained encoder for "
                        "training, or a fine-tuned model for --do_eval / --do_predict alone")
    p.add_argument("--output_dir", required=True, help="where the model, checkpoints, results and predictions go")
    p.add_argument("--train_file", help="the training data (formats above); its labels define the label set")
    p.add_argument("--validation_file", help="evaluated after training (and during it, see --eval_strategy)")
    p.add_argument("--test_file", help="predicted: predictions.jsonl in --output_dir (labels are not needed)")
    p.add_argument("--do_train", action="store_true", help="train on --train_file")
    p.add_argument("--do_eval", action="store_true", help="evaluate on --validation_file")
    p.add_argument("--do_predict", action="store_true", help="predict --test_file")
    p.add_argument("--max_seq_length", type=positive_int, default=None,
                   help="tokens per sequence, [CLS] and [SEP] included (default: " + _per_task("max_seq_length")
                        + "; never more than the model's max_position_embeddings)")
    p.add_argument("--text_column_name", help="the column holding the text (default: found by name, see above)")
    p.add_argument("--text_pair_column_name", help="the column holding the second text of a pair")
    p.add_argument("--label_column_name", help="the column holding the label")
    p.add_argument("--top_k", type=positive_int, default=5, help="scores kept per prediction in predictions.jsonl")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="the dtype to train in")
    p.add_argument("--resume_from_checkpoint", nargs="?", const=True, default=None, metavar="DIR",
                   help="continue training from DIR, or (no DIR) from the newest checkpoint-N in --output_dir")


# ---- the steps of a run -------------------------------------------------------------------------
def actions(args):
    """(train, eval, predict) from --do_* or, without them, from the files given; the files a
    chosen action needs must be there."""
    explicit = args.do_train or args.do_eval or args.do_predict
    do = (args.do_train, args.do_eval, args.do_predict) if explicit else (
        bool(args.train_file), bool(args.validation_file), bool(args.test_file))
    for wanted, flag, file_flag, value in zip(do, ("--do_train", "--do_eval", "--do_predict"),
                                              ("--train_file", "--validation_file", "--test_file"),
                                              (args.train_file, args.validation_file, args.test_file)):
        if wanted and not value:
            raise UsageError(f"{flag} needs {file_flag}")
        if wanted and not os.path.isfile(value):
            raise UsageError(f"{file_flag} {value}: {'not a file' if os.path.exists(value) else 'no such file'}")
        if value and not wanted:
            print(f"note: {file_flag} {value} is not used: {flag} was not given", file=sys.stderr)
    if not any(do):
        raise UsageError("nothing to do: give --train_file (and --validation_file / --test_file), or --do_eval / "
                         "--do_predict with a fine-tuned model")
    if args.resume_from_checkpoint and not do[0]:
        raise UsageError("--resume_from_checkpoint continues a training run: it needs --do_train / --train_file")
    return do


def apply_task_defaults(args, config):
    """Fill the flags left unset with the task's defaults; --max_seq_length checked against the model."""
    defaults = TASK_DEFAULTS[args.task]
    for name in ("learning_rate", "num_train_epochs", "per_device_train_batch_size"):
        if getattr(args, name, None) is None:
            setattr(args, name, defaults[name])
    if args.save_strategy is None:          # transformers' default; the best model needs a save at each evaluation
        args.save_strategy = args.eval_strategy if args.load_best_model_at_end else "steps"
        if args.load_best_model_at_end and args.eval_strategy == "steps":
            args.save_steps = args.eval_steps or args.logging_steps
    args.max_seq_length = resolve_max_seq_length(args.max_seq_length, config, default=defaults["max_seq_length"],
                                                 where=f" ({args.model_name_or_path})")
    if args.task == "question-answering":
        room = args.max_seq_length - args.max_query_length - 3          # the paragraph's tokens in a window
        if room < 1:
            raise UsageError(f"--max_seq_length {args.max_seq_length} leaves no room for the paragraph after a "
                             f"question of --max_query_length {args.max_query_length} tokens")
        if args.doc_stride > room:
            print(f"note: --doc_stride {args.doc_stride} is more than the {room} paragraph tokens of a window "
                  f"(max_seq_length {args.max_seq_length} - max_query_length {args.max_query_length} - 3): using "
                  f"{room // 2}, so that windows overlap", file=sys.stderr)
            args.doc_stride = room // 2


def load_task_data(args, tokenizer, config, do_train, do_eval, do_predict):
    """The task's datasets (only the files of the chosen actions are read)."""
    module = importlib.import_module(f"npbert.tasks.{TASKS[args.task]}")
    chosen = argparse_copy(args, train_file=args.train_file if do_train else None,
                           validation_file=args.validation_file if do_eval else None,
                           test_file=args.test_file if do_predict else None)
    try:
        return module.load_task(chosen, tokenizer, config=config)
    except (ValueError, KeyError) as e:
        raise CliError(str(e)) from None


def argparse_copy(args, **changes):
    values = dict(vars(args))
    values.update(changes)
    return argparse.Namespace(**values)


def describe(task, split, dataset):
    """"203 questions (289 windows)", "400 sentences", or "1185 examples"."""
    n = (task.num_examples or {}).get(split)
    if n and n != len(dataset):
        return f"{n} {task.unit} ({len(dataset)} windows)"
    return f"{len(dataset)} {task.unit}"


def train(args, trainer, task):
    print(f"fine-tuning {type(trainer.model).__name__} on {describe(task, 'train', task.train_dataset)}"
          + (f", evaluating on {describe(task, 'eval', task.eval_dataset)}" if task.eval_dataset is not None else "")
          + f"; learning rate {args.learning_rate:g}, {args.num_train_epochs:g} epochs, batch "
            f"{args.per_device_train_batch_size}, max_seq_length {args.max_seq_length}", file=sys.stderr)
    print(f"(the progress line's loss is the current batch's; trainer_state.json and training_curves.png hold the "
          f"mean over each {args.logging_steps:g} steps)", file=sys.stderr)
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)      # errors: cli.common.training_run
    trainer.save_model(args.output_dir)


def evaluate(args, trainer, task, trained):
    """eval_results.json; the evaluation that ended training is reused, not run and printed again."""
    state = trainer.state
    step = state.best_global_step if (args.load_best_model_at_end and getattr(state, "best_global_step", None)) \
        else state.global_step
    done = [e for e in state.log_history if e.get("step") == step and any(k.startswith("eval_") for k in e)] \
        if trained else []
    if done:
        metrics = {k: v for k, v in done[-1].items() if k.startswith("eval_")}
        said = f"the evaluation at step {step} above"
    else:
        progress, trainer.progress = getattr(trainer, "progress", None), None     # printed once, here
        try:
            metrics = trainer.evaluate()
        finally:
            trainer.progress = progress
        said = None
    metrics["epoch"] = state.epoch
    metrics["eval_samples"] = (task.num_examples or {}).get("eval") or len(task.eval_dataset)
    def write():
        with atomic_write(os.path.join(args.output_dir, "eval_results.json"), "w") as f:
            json.dump(metrics, f, indent=2)
    trainer.world.run_on_main(write, what="writing eval_results.json")        # under mpiexec: rank 0 writes
    if said:
        print(f"eval: {said} is the final one; saved to {os.path.join(args.output_dir, 'eval_results.json')}")
    else:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()
                          if isinstance(v, float) and k.startswith("eval_") and not k.endswith(("_runtime",
                                                                                              "_per_second")))
        print(f"eval on {describe(task, 'eval', task.eval_dataset)}: {shown}")


def predict(args, trainer, task):
    out = trainer.predict(task.test_dataset)
    path = os.path.join(args.output_dir, PREDICTIONS)
    trainer.world.run_on_main(task.write_predictions, out, path, what=f"writing {path}")   # rank 0 writes
    print(f"predictions for {describe(task, 'test', task.test_dataset)}: {path}")


def run(args):
    """The run lock, the output directory's check, resume / signal / disk-full messages
    (cli.common.training_run) around _run."""
    do = actions(args)
    refuse_overwriting_inputs([("--output_dir", args.output_dir, TRAINING_RUN_ENTRIES)],
                              [("--model_name_or_path", args.model_name_or_path), ("--train_file", args.train_file),
                               ("--validation_file", args.validation_file), ("--test_file", args.test_file)])
    with training_run("finetune", args.output_dir, args.overwrite_output_dir,      # predicting only: the
                      args.resume_from_checkpoint if do[0] else True) as resume_command:  # model is not replaced
        args.resume_command = resume_command
        return _run(args, *do)


def _run(args, do_train, do_eval, do_predict):
    config = read_model_config(args.model_name_or_path, "--model_name_or_path")
    apply_task_defaults(args, config)
    tokenizer = load_tokenizer(args.model_name_or_path, "--model_name_or_path")
    task = load_task_data(args, tokenizer, config, do_train, do_eval, do_predict)
    for note in task.notes:
        print(f"note: {note}", file=sys.stderr)
    model = load_checkpoint(task.model_class, args.model_name_or_path, "--model_name_or_path",
                            dtype=np.dtype(args.dtype).type, **task.config_overrides)
    evaluating_while_training = do_train and task.eval_dataset is not None
    targs = training_arguments(args, args.output_dir, **({} if evaluating_while_training else
                                                         {"eval_strategy": "no", "load_best_model_at_end": False,
                                                          "early_stopping_patience": None}))
    if len(tokenizer) > model.config.vocab_size:
        raise CliError(f"--model_name_or_path {args.model_name_or_path}: vocab.txt has {len(tokenizer)} tokens, "
                       f"more than the model's vocab_size {model.config.vocab_size}")
    trainer = Trainer(model, targs, train_dataset=task.train_dataset, eval_dataset=task.eval_dataset,
                      data_collator=task.data_collator, compute_metrics=task.compute_metrics, processing_class=tokenizer)
    trainer.resume_command = getattr(args, "resume_command", None)
    os.makedirs(args.output_dir, exist_ok=True)
    if do_train:
        train(args, trainer, task)
    if do_eval:
        evaluate(args, trainer, task, trained=do_train)
    if do_predict:
        if task.write_predictions is None:
            raise UsageError(f"--task {args.task} writes no predictions")
        predict(args, trainer, task)
    print(f"saved to {args.output_dir}" if do_train else f"results in {args.output_dir}")
    return 0
