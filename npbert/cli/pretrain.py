"""`npbert pretrain`: pre-train a BERT (masked LM + next sentence prediction) with the Trainer.

Input: a .h5 features file from `npbert create-pretraining-data` (static masks, as Google's
run_pretraining.py), or a text corpus (one sentence a line, blank lines between documents),
which is turned into instances here with the same algorithm.  --dynamic_masking draws new
masks every batch instead (DataCollatorForLanguageModeling, as RoBERTa / transformers'
run_mlm.py); the next-sentence pairs stay those of the instances.

The run holds --output_dir's lock from start to end; a directory holding another run's files
needs --overwrite_output_dir or --resume_from_checkpoint; Ctrl-C / SIGTERM save a checkpoint
and print the command that resumes (see docs/training.md, "Runs").
"""
import os
import sys

import numpy as np

import npbert
from npbert.cli.common import (CliError, UsageError, add_training_arguments, non_negative_int, training_arguments,
                               training_run)
from npbert.cli.create_pretraining_data import add_instance_arguments, make_features
from npbert.cli.outputs import TRAINING_RUN_ENTRIES, refuse_overwriting_inputs
from npbert.config import check_max_seq_length
from npbert.data import PretrainingDataset
from npbert.data.pretraining_eval import compute_pretraining_metrics, config_for_size, preprocess_logits_for_metrics
from npbert.training import DataCollatorForLanguageModeling, Trainer, default_data_collator


def add_parser(commands):
    p = commands.add_parser("pretrain", help="pre-train a BERT from scratch (MLM + NSP) on a corpus",
                            description=__doc__.split("\n\n")[0])
    p.add_argument("--train_file", required=True, help=".h5 features, or a text corpus")
    p.add_argument("--validation_file", help=".h5 features or a text corpus to evaluate MLM / NSP accuracy on")
    p.add_argument("--vocab_file", help="vocab.txt (needed for a text corpus; saved with the model)")
    p.add_argument("--output_dir", required=True, help="where the model, vocab.txt and checkpoints go")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--model_size", choices=("tiny", "mini", "small", "medium", "base"), default="tiny",
                      help="Google's sizes: tiny L2/H128, mini L4/H256, small L4/H512, medium L8/H512, base L12/H768")
    size.add_argument("--config", help="a config.json instead of --model_size")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="the dtype to train in")
    p.add_argument("--model_seed", type=non_negative_int, default=0, help="seed of the initial weights")
    p.add_argument("--dynamic_masking", action="store_true", help="new masks every batch (collator)")
    p.add_argument("--gather_masked_lm", type=lambda s: s.lower() in ("1", "true", "yes"), default=True,
                   help="compute the MLM head only at the masked positions while training, as Google's "
                        "gather_indexes (same loss and gradients, less work; default true)")
    p.add_argument("--resume_from_checkpoint", nargs="?", const=True, default=None, metavar="DIR",
                   help="continue from DIR, or from the latest checkpoint in --output_dir")
    data = p.add_argument_group("instances from a text corpus (create-pretraining-data's flags)")
    add_instance_arguments(data, dupe_factor=5)
    data.add_argument("--do_whole_word_mask", action="store_true",
                      help="mask all the WordPieces of a word together")
    add_training_arguments(p, per_device_train_batch_size=32, learning_rate=1e-4, weight_decay=0.01,
                           warmup_ratio=0.01, logging_steps=10, save_steps=500)
    p.set_defaults(run=run)


def _is_h5(path):
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"\x89HDF\r\n\x1a\n"
    except OSError:
        return False


def load_dataset(path, tokenizer, args, seed_offset=0):
    """A PretrainingDataset from a .h5 features file or a text corpus."""
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    if _is_h5(path):
        try:
            ds = PretrainingDataset(path)
        except ValueError as e:
            raise CliError(str(e)) from None
        if tokenizer is not None and ds.vocab_size != len(tokenizer):
            raise UsageError(f"{path} was made with a vocabulary of {ds.vocab_size} tokens; --vocab_file has "
                             f"{len(tokenizer)}")
        return ds
    if tokenizer is None:
        raise UsageError(f"{path} is a text corpus: --vocab_file is needed to tokenize it")
    feats, _ = make_features([path], tokenizer, args, rng_seed=args.random_seed + seed_offset)
    return PretrainingDataset(feats)


class DynamicMasking:
    """The instances with their original tokens back (no static masks), for a masking collator."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        ex = dict(self.dataset[i])
        labels = ex.pop("labels")
        ids = ex["input_ids"].copy()
        ids[labels != -100] = labels[labels != -100]
        n = int(ex["attention_mask"].sum())
        return {"input_ids": ids[:n], "token_type_ids": ex["token_type_ids"][:n],
                "next_sentence_label": ex["next_sentence_label"]}


# Google's model sizes have 512 positions; a --model_size model gets as many as the data's
# sequences (fewer parameters), never more than that.
MAX_POSITIONS_OF_SIZES = 512


def model_config(args, vocab_size, max_positions, where="--max_seq_length"):
    """The model's BertConfig, with the sequence length `max_positions` checked against it (and
    the activations of a training step against memory) before anything big is allocated."""
    if args.config:
        try:
            config = npbert.BertConfig.from_json_file(args.config)
            config.validate(np.dtype(args.dtype))
        except (OSError, ValueError, TypeError) as e:
            raise CliError(f"--config {args.config}: {e}") from None
        if config.vocab_size != vocab_size:
            raise UsageError(f"--config has vocab_size {config.vocab_size}, the data {vocab_size}")
    else:
        if max_positions > MAX_POSITIONS_OF_SIZES:
            raise UsageError(f"{where} {max_positions} is more than the {MAX_POSITIONS_OF_SIZES} positions of "
                             f"--model_size {args.model_size} (Google's sizes); give a --config with a larger "
                             "max_position_embeddings to go further")
        config = config_for_size(args.model_size, vocab_size, max_position_embeddings=max_positions)
    try:
        check_max_seq_length(max_positions, config, where, batch_size=args.per_device_train_batch_size,
                             dtype=np.dtype(args.dtype))
    except ValueError as e:
        raise UsageError(str(e) + (f" (--config {args.config})" if args.config else "")) from None
    return config


def build_model(args, vocab_size, max_positions):
    config = model_config(args, vocab_size, max_positions)
    try:
        return npbert.BertForPreTraining(config, seed=args.model_seed, dtype=np.dtype(args.dtype).type)
    except ValueError as e:
        raise CliError(f"{'--config ' + args.config if args.config else '--model_size ' + args.model_size}: {e}") \
            from None


def run(args):
    refuse_overwriting_inputs([("--output_dir", args.output_dir, TRAINING_RUN_ENTRIES)],
                              [("--train_file", args.train_file), ("--validation_file", args.validation_file),
                               ("--vocab_file", args.vocab_file), ("--config", args.config)])
    with training_run("pretrain", args.output_dir, args.overwrite_output_dir,
                      args.resume_from_checkpoint) as resume_command:
        return _run(args, resume_command)


def _run(args, resume_command):
    tokenizer = None
    if args.vocab_file:
        if not os.path.isfile(args.vocab_file):
            raise UsageError(f"--vocab_file {args.vocab_file}: no such file")
        tokenizer = npbert.BertTokenizer(args.vocab_file)
    if tokenizer is not None and not _is_h5(args.train_file):
        model_config(args, len(tokenizer), args.max_seq_length)     # checked before the corpus is cut
    train = load_dataset(args.train_file, tokenizer, args)
    evals = load_dataset(args.validation_file, tokenizer, args, seed_offset=1) if args.validation_file else None
    vocab_size = len(tokenizer) if tokenizer else train.vocab_size
    T = train.features["input_ids"].shape[1]
    if evals is not None and evals.features["input_ids"].shape[1] > T:
        raise UsageError(f"{args.validation_file} has sequences of {evals.features['input_ids'].shape[1]} tokens, "
                         f"longer than the {T} of {args.train_file}")
    model = build_model(args, vocab_size, T)
    model.config.gather_masked_lm = args.gather_masked_lm
    collator = default_data_collator
    if args.dynamic_masking:
        if tokenizer is None:
            raise UsageError("--dynamic_masking needs --vocab_file")
        train = DynamicMasking(train)
        collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=args.masked_lm_prob, seed=args.seed)
    targs = training_arguments(args, args.output_dir,
                               eval_strategy=args.eval_strategy if evals is not None else "no")
    trainer = Trainer(model, targs, train_dataset=train, eval_dataset=evals, data_collator=collator,
                      compute_metrics=compute_pretraining_metrics,
                      preprocess_logits_for_metrics=preprocess_logits_for_metrics, processing_class=tokenizer)
    trainer.resume_command = resume_command
    print(f"pre-training {model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}, "
          f"vocab {vocab_size}: {model.num_parameters():,} parameters, {len(train)} training sequences of "
          f"{T} tokens", file=sys.stderr)
    result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    trainer.save_model(args.output_dir)
    if evals is not None:
        metrics = trainer.evaluate()
        print(f"eval: MLM accuracy {metrics['eval_mlm_accuracy']:.3f}, NSP accuracy {metrics['eval_nsp_accuracy']:.3f}")
    print(f"saved the model and vocab.txt to {args.output_dir} ({result.global_step} steps, final training loss "
          f"{result.training_loss:.3f})")
    return 0
