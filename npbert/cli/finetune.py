"""`npbert finetune`: fine-tune a checkpoint on a task, evaluate, predict, save.

    npbert finetune --task sequence-classification --model_name_or_path DIR \
        --train_file train.csv --validation_file dev.csv [--test_file test.csv] --output_dir out

Tasks (a module each in npbert/tasks/, with add_arguments(parser) and load_task(args, tokenizer)):
sequence-classification, token-classification, multiple-choice, question-answering.  Writes
config.json, model.safetensors, vocab.txt, tokenizer_config.json, trainer_state.json,
eval_results.json and the test predictions; every TrainingArguments field is a flag.
"""
import importlib
import json
import os
import sys
import warnings

from npbert.cli.common import CliError, add_training_arguments, non_negative_int, positive_int, training_arguments

TASKS = {"sequence-classification": "sequence_classification", "token-classification": "token_classification",
         "multiple-choice": "multiple_choice", "question-answering": "question_answering"}
PREDICTIONS = {"sequence-classification": "predictions.jsonl", "token-classification": "predictions.conll",
               "multiple-choice": "predictions.jsonl", "question-answering": "predictions.json"}


def add_parser(commands):
    p = commands.add_parser("finetune", help="fine-tune a checkpoint on classification, NER, multiple choice or QA",
                            description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=list(TASKS), required=True)
    p.add_argument("--model_name_or_path", required=True, metavar="DIR", help="a checkpoint directory with vocab.txt")
    p.add_argument("--train_file")
    p.add_argument("--validation_file")
    p.add_argument("--test_file", help="predictions are written for it (labels by name, tags per word, answers by id)")
    p.add_argument("--output_dir", required=True)
    p.add_argument("--max_seq_length", type=positive_int, default=128)
    p.add_argument("--text_column_name")
    p.add_argument("--text_pair_column_name")
    p.add_argument("--label_column_name")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--resume_from_checkpoint", nargs="?", const=True, default=None, metavar="DIR")
    for module in TASKS.values():
        importlib.import_module(f"npbert.tasks.{module}").add_arguments(p)
    add_training_arguments(p, learning_rate=5e-5, eval_strategy="epoch", save_strategy="epoch", logging_steps=10,
                           per_device_train_batch_size=16, per_device_eval_batch_size=32)
    p.set_defaults(run=run)


def run(args):
    """The run lock, the output directory's check, resume / signal / disk-full messages
    (cli.common.training_run) around _run; --max_seq_length checked against the model first."""
    from npbert.cli.common import training_run
    _check_max_seq_length(args)
    training = bool(args.train_file)          # predicting only: the directory's model is not replaced
    with training_run("finetune", args.output_dir, args.overwrite_output_dir,
                      args.resume_from_checkpoint if training else True) as resume_command:
        args.resume_command = resume_command
        return _run(args)


def _check_max_seq_length(args):
    """As transformers' run_glue.py: a --max_seq_length beyond the model's positions is lowered
    to max_position_embeddings, with a note."""
    import npbert
    from npbert.config import check_max_seq_length
    try:
        config = npbert.BertConfig.from_pretrained(args.model_name_or_path)
    except (OSError, ValueError) as e:
        raise CliError(f"--model_name_or_path {args.model_name_or_path}: {e}") from None
    try:
        check_max_seq_length(args.max_seq_length, config, "--max_seq_length")
    except ValueError as e:
        args.max_seq_length = config.max_position_embeddings
        print(f"note: {e}; using --max_seq_length {args.max_seq_length}", file=sys.stderr)


def _run(args):
    import numpy as np

    import npbert
    from npbert.io._atomic import atomic_write
    from npbert.training import Trainer
    if not os.path.isdir(args.model_name_or_path):
        raise CliError(f"--model_name_or_path {args.model_name_or_path}: not a directory")
    if not args.train_file and not args.resume_from_checkpoint and not args.test_file:
        raise CliError("nothing to do: give --train_file (and --validation_file / --test_file)")
    try:
        tokenizer = npbert.BertTokenizer.from_pretrained(args.model_name_or_path)
    except (OSError, ValueError) as e:
        raise CliError(f"--model_name_or_path {args.model_name_or_path}: {e}") from None
    module = importlib.import_module(f"npbert.tasks.{TASKS[args.task]}")
    try:
        task = module.load_task(args, tokenizer)
    except ValueError as e:
        raise CliError(str(e)) from None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = task.model_class.from_pretrained(args.model_name_or_path, dtype=np.dtype(args.dtype).type,
                                                     **task.config_overrides)
        for w in caught:
            print(f"note: {w.message}", file=sys.stderr)
    except (OSError, ValueError, KeyError) as e:
        raise CliError(f"--model_name_or_path {args.model_name_or_path}: {e}") from None
    has_eval = task.eval_dataset is not None
    targs = training_arguments(args, args.output_dir, **({} if has_eval else
                                                         {"eval_strategy": "no", "load_best_model_at_end": False,
                                                          "early_stopping_patience": None}))
    if len(tokenizer) > model.config.vocab_size:
        raise CliError(f"--model_name_or_path {args.model_name_or_path}: vocab.txt has {len(tokenizer)} tokens, "
                       f"more than the model's vocab_size {model.config.vocab_size}")
    trainer = Trainer(model, targs, train_dataset=task.train_dataset, eval_dataset=task.eval_dataset,
                      data_collator=task.data_collator, compute_metrics=task.compute_metrics, processing_class=tokenizer)
    trainer.resume_command = getattr(args, "resume_command", None)
    os.makedirs(args.output_dir, exist_ok=True)
    if task.train_dataset is not None:
        print(f"fine-tuning {type(model).__name__} on {len(task.train_dataset)} examples"
              + (f", evaluating on {len(task.eval_dataset)}" if has_eval else ""), file=sys.stderr)
        trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
        trainer.save_model(args.output_dir)
    if has_eval:
        metrics = trainer.evaluate()
        metrics["epoch"] = trainer.state.epoch
        with atomic_write(os.path.join(args.output_dir, "eval_results.json"), "w") as f:
            json.dump(metrics, f, indent=2)
        shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()
                          if isinstance(v, float) and not k.endswith(("_runtime", "_per_second")))
        print(f"eval: {shown}")
    if task.test_dataset is not None and task.write_predictions is not None:
        out = trainer.predict(task.test_dataset)
        path = os.path.join(args.output_dir, PREDICTIONS[args.task])
        task.write_predictions(out, path)
        print(f"predictions for {len(task.test_dataset)} test examples: {path}")
    print(f"saved to {args.output_dir}")
    return 0
