"""`npbert pretrain`: pre-train BERT (masked LM + next sentence prediction) from scratch.

    npbert pretrain --input_file corpus.txt --vocab_file vocab.txt --output_dir out [--model_size tiny]
    npbert pretrain --instances_file train.h5 --vocab_file vocab.txt --output_dir out
    npbert pretrain ... --resume_from_checkpoint            (the last checkpoint of --output_dir)

From a corpus (Google's format: one sentence a line, a blank line between documents) the
instances are made as Google's create_pretraining_data.py (static masks, `--dupe_factor` copies);
the last `--eval_documents` documents are held out for evaluation.  From an instance file
(`npbert create-pretraining-data`), the last `--eval_fraction` of the instances are held out.
`--masking dynamic` draws new masks every batch (DataCollatorForLanguageModeling, RoBERTa's
dynamic masking) instead of the file's static ones.  The model: `--model_size` (see
npbert.data.pretrain_task.MODEL_SIZES) or `--config config.json`.  The Trainer logs the loss,
evaluates MLM and NSP accuracy, saves checkpoints (exact resume) and draws training_curves.png.
"""
import os
import random

from npbert.cli.common import CliError, non_negative_int


def add_data_arguments(p):
    """Google's create_pretraining_data flags (shared with `npbert create-pretraining-data`)."""
    p.add_argument("--vocab_file", help="vocab.txt (one token a line); see `npbert build-vocab`")
    p.add_argument("--do_lower_case", type=_bool, default=True, help="lower-case the text (default true)")
    p.add_argument("--do_whole_word_mask", action="store_true", help="mask whole words (all their ## pieces)")
    p.add_argument("--max_seq_length", type=int, default=128, help="T, the length of every instance")
    p.add_argument("--max_predictions_per_seq", type=int, default=20, help="P, masked positions at most")
    p.add_argument("--random_seed", type=int, default=12345, help="seed of random.Random for the instances")
    p.add_argument("--dupe_factor", type=int, default=10, help="passes over the text, each with other masks")
    p.add_argument("--masked_lm_prob", type=float, default=0.15, help="fraction of the tokens to mask")
    p.add_argument("--short_seq_prob", type=float, default=0.1, help="probability of a shorter target length")


def _bool(text):
    if text.lower() in ("1", "true", "yes", "y"):
        return True
    if text.lower() in ("0", "false", "no", "n"):
        return False
    import argparse
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_parser(subparsers):
    p = subparsers.add_parser("pretrain", help="pre-train BERT (MLM + NSP) from scratch on a corpus",
                              description=__doc__.split("\n\n", 1)[1],
                              formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input_file", help="corpus: comma-separated text files (one sentence a line)")
    src.add_argument("--instances_file", help="an .h5 of `npbert create-pretraining-data`")
    p.add_argument("--output_dir", required=True, help="checkpoints, the final model, training_curves.png")
    add_data_arguments(p)
    p.add_argument("--eval_documents", type=int, default=20, help="documents held out for evaluation (corpus)")
    p.add_argument("--eval_fraction", type=float, default=0.05, help="instances held out (instance file)")
    p.add_argument("--model_size", default="tiny", help="tiny|mini|small|medium|base (default tiny)")
    p.add_argument("--config", help="config.json of the model instead of --model_size")
    p.add_argument("--masking", choices=("static", "dynamic"), default="static",
                   help="static: the instances' masks (Google); dynamic: new masks every batch")
    p.add_argument("--full_mlm_logits", action="store_true",
                   help="compute MLM logits at every position (default: only at the masked ones; same loss)")
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--warmup_ratio", type=float, default=0.1)
    p.add_argument("--num_train_epochs", type=float, default=1.0)
    p.add_argument("--max_steps", type=int, default=-1)
    p.add_argument("--per_device_train_batch_size", "--train_batch_size", type=int, default=32)
    p.add_argument("--per_device_eval_batch_size", type=int, default=64)
    p.add_argument("--logging_steps", type=float, default=50)
    p.add_argument("--eval_steps", type=float, default=None, help="evaluate every N steps (default: at the end)")
    p.add_argument("--save_steps", type=float, default=500)
    p.add_argument("--save_total_limit", type=int, default=2)
    p.add_argument("--resume_from_checkpoint", nargs="?", const=True, default=None,
                   help="a checkpoint dir, or no value for the last one in --output_dir")
    p.add_argument("--seed", type=non_negative_int, default=42, help="model initialisation, shuffling, dropout")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.set_defaults(run=run)
    return p


# ---- the pieces `npbert demo` reuses -----------------------------------------------------------
def load_tokenizer(vocab_file, do_lower_case=True):
    from npbert.tokenization import BertTokenizer
    if not vocab_file:
        raise CliError("--vocab_file is required (make one with `npbert build-vocab`)")
    if not os.path.isfile(vocab_file):
        raise CliError(f"--vocab_file {vocab_file}: no such file")
    try:
        return BertTokenizer(vocab_file, do_lower_case=do_lower_case)
    except ValueError as e:
        raise CliError(f"--vocab_file {vocab_file}: {e}") from None


def make_instances(tokenizer, args, all_documents, seed, dupe_factor=None):
    """Google's instances of `all_documents` (lists of sentences of tokens) with the data arguments."""
    from npbert.data.pretraining import create_training_instances
    try:
        return create_training_instances(None, tokenizer, args.max_seq_length,
                                         args.dupe_factor if dupe_factor is None else dupe_factor,
                                         args.short_seq_prob, args.masked_lm_prob, args.max_predictions_per_seq,
                                         random.Random(seed), do_whole_word_mask=args.do_whole_word_mask,
                                         all_documents=[list(d) for d in all_documents])
    except ValueError as e:
        raise CliError(str(e)) from None


def read_corpus_documents(input_files, tokenizer):
    from npbert.data.pretraining import read_documents
    for f in input_files:
        if not os.path.isfile(f):
            raise CliError(f"--input_file {f}: no such file")
    try:
        return read_documents(input_files, tokenizer)
    except ValueError as e:
        raise CliError(str(e)) from None


def build_model(args, vocab_size, max_seq_length):
    """BertForPreTraining from --config or --model_size, checked against the vocabulary and T."""
    import numpy as np

    from npbert.config import BertConfig
    from npbert.data.pretrain_task import config_for_size
    from npbert.modeling import BertForPreTraining
    if getattr(args, "config", None):
        try:
            config = BertConfig.from_json_file(args.config)
        except (OSError, ValueError) as e:
            raise CliError(f"--config {args.config}: {e}") from None
    else:
        try:
            config = config_for_size(args.model_size, vocab_size, max_position_embeddings=max(512, max_seq_length))
        except ValueError as e:
            raise CliError(str(e)) from None
    if config.vocab_size < vocab_size:
        raise CliError(f"the model's vocab_size {config.vocab_size} < the vocabulary's {vocab_size} tokens")
    if max_seq_length > config.max_position_embeddings:
        raise CliError(f"max_seq_length={max_seq_length} > the model's max_position_embeddings="
                       f"{config.max_position_embeddings}: positions past it have no embedding")
    model = BertForPreTraining(config, seed=args.seed, dtype=np.dtype(args.dtype).type)
    model.gather_masked_lm = not getattr(args, "full_mlm_logits", False)
    return model


def check_max_seq_length(args):
    if args.max_seq_length < 5:
        raise CliError(f"--max_seq_length {args.max_seq_length}: needs at least 5 ([CLS] A [SEP] B [SEP])")
    if args.max_predictions_per_seq < 1:
        raise CliError("--max_predictions_per_seq must be >= 1")


def datasets_from_corpus(args, tokenizer):
    """(train, eval) PretrainingDatasets from --input_file: the last --eval_documents documents held out."""
    from npbert.data.features import PretrainingDataset, instances_to_features
    documents = read_corpus_documents(args.input_file.split(","), tokenizer)
    n_eval = min(args.eval_documents, len(documents) // 5)
    if len(documents) - n_eval < 2:
        raise CliError(f"{args.input_file}: {len(documents)} document(s); next sentence prediction needs at least "
                       "two (separate documents with a blank line)")
    train_docs, eval_docs = documents[:len(documents) - n_eval], documents[len(documents) - n_eval:]
    datasets = []
    for docs, seed, dupe in ((train_docs, args.random_seed, None), (eval_docs, args.random_seed + 1, 1)):
        if len(docs) < 2:
            datasets.append(None)
            continue
        instances = make_instances(tokenizer, args, docs, seed, dupe)
        features = instances_to_features(instances, tokenizer.vocab, args.max_seq_length, args.max_predictions_per_seq)
        datasets.append(PretrainingDataset(features, static_masks=args.masking == "static"))
    return datasets


def datasets_from_file(args):
    from npbert.data.features import PretrainingDataset, read_features
    try:
        f = read_features(args.instances_file)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from None
    N = len(f["input_ids"])
    n_eval = int(round(N * args.eval_fraction))
    args.max_seq_length = f["attrs"]["max_seq_length"]
    split = {k: (v[:N - n_eval], v[N - n_eval:]) for k, v in f.items() if k != "attrs"}
    train = PretrainingDataset({k: a for k, (a, _) in split.items()}, static_masks=args.masking == "static")
    dev = PretrainingDataset({k: b for k, (_, b) in split.items()}, static_masks=args.masking == "static") \
        if n_eval else None
    return train, dev, f["attrs"]["vocab_size"]


def make_trainer(model, args, train, dev, tokenizer, plot=True):
    from npbert.data.pretrain_task import compute_metrics, preprocess_logits_for_metrics
    from npbert.training import DataCollatorForLanguageModeling, Trainer, TrainingArguments, default_data_collator
    collator = default_data_collator
    if args.masking == "dynamic":
        collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=args.masked_lm_prob, seed=args.seed)
    try:
        targs = TrainingArguments(
            output_dir=args.output_dir, num_train_epochs=args.num_train_epochs, max_steps=args.max_steps,
            per_device_train_batch_size=args.per_device_train_batch_size,
            per_device_eval_batch_size=args.per_device_eval_batch_size, learning_rate=args.learning_rate,
            weight_decay=args.weight_decay, warmup_ratio=args.warmup_ratio, logging_steps=args.logging_steps,
            eval_strategy="steps" if args.eval_steps and dev is not None else "no",
            eval_steps=args.eval_steps, save_steps=args.save_steps, save_total_limit=args.save_total_limit,
            seed=args.seed, plot=plot, label_names=["labels", "next_sentence_label"])
    except ValueError as e:
        raise CliError(str(e)) from None
    return Trainer(model, targs, train_dataset=train, eval_dataset=dev, data_collator=collator,
                   compute_metrics=compute_metrics, preprocess_logits_for_metrics=preprocess_logits_for_metrics,
                   processing_class=tokenizer)


def run(args):
    import sys
    check_max_seq_length(args)
    tokenizer = load_tokenizer(args.vocab_file, args.do_lower_case)
    if args.instances_file:
        train, dev, vocab_size = datasets_from_file(args)
        if vocab_size > len(tokenizer):
            raise CliError(f"{args.instances_file} was made with a vocabulary of {vocab_size} tokens; "
                           f"--vocab_file has {len(tokenizer)}")
    else:
        train, dev = datasets_from_corpus(args, tokenizer)
    model = build_model(args, len(tokenizer), args.max_seq_length)
    os.makedirs(args.output_dir, exist_ok=True)
    trainer = make_trainer(model, args, train, dev, tokenizer)
    print(f"pre-training {type(model).__name__} ({model.num_parameters():,} parameters) on {len(train)} instances"
          f"{f', evaluating on {len(dev)}' if dev is not None else ''}", file=sys.stderr)
    try:
        result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    except (FloatingPointError, ValueError, KeyError) as e:
        raise CliError(str(e)) from None
    if dev is not None:
        metrics = trainer.evaluate()
        print(" ".join(f"{k}={v:.4f}" for k, v in metrics.items() if k.endswith(("_loss", "accuracy"))))
    trainer.save_model(args.output_dir)
    print(f"trained {result.global_step} steps, train loss {result.training_loss:.4f}; model saved in {args.output_dir}")
    return 0
