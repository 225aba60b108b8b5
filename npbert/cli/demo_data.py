"""The demo's data (steps 1 and 2 of `npbert demo`): the bundled Shakespeare split into training
and held-out speeches, a WordPiece vocabulary learned from the training part, Google's
next-sentence instances, the held-out set with its masks drawn once (written to
held_out.h5, so that a script can recompute every baseline), and the fill-mask prompts."""
import os
import random
import time

import numpy as np

from npbert import BertTokenizer
from npbert.cli.common import CliError, UsageError
from npbert.cli.pretrain import DynamicMasking
from npbert.data import (PretrainingDataset, build_vocab, create_training_instances, instances_to_features, shakespeare,
                         write_features)
from npbert.data.pretraining_eval import held_out_tokens, unmasked_tokens
from npbert.data.prompts import choose_fill_mask_prompts
from npbert.training import DataCollatorForLanguageModeling, default_data_collator

HELD_OUT_FRACTION = 0.05          # the last 5 % of the speeches: text the model never trains on
SPEECHES_PER_DOCUMENT = 8         # a stretch of one scene: real continuations for next-sentence pairs
TRAIN_DUPE_FACTOR = 2             # passes over the training documents (different pairs and cuts each)
HELD_DUPE_FACTOR = 2
HELD_MASKED_LM_PROB = 0.15        # the held-out masks: Google's 15 %, 80/10/10, whatever the training rate
N_PROMPTS = 10


class MaskingCollator:
    """Training batches (examples without labels) get new masks from DataCollatorForLanguageModeling;
    held-out batches (examples with labels: masks drawn once) are only stacked, so that every
    evaluation scores the same predictions.  (The Trainer has one collator for both.)"""

    def __init__(self, tokenizer, mlm_probability, seed):
        self.masking = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability, seed=seed)
        self.rng = self.masking.rng                  # the Trainer checkpoints a collator's generator

    def __call__(self, examples):
        return default_data_collator(examples) if "labels" in examples[0] else self.masking(examples)


class DemoData:
    """What the demo trains and evaluates on; summary() is results.json's "data"."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def summary(self):
        return {"corpus": "npbert/data/corpus/tinyshakespeare.txt", "speeches_train": self.n_train_speeches,
                "speeches_held_out": self.n_held_speeches, "train_sequences": len(self.train),
                "held_out_sequences": len(self.held), "held_out_predicted_tokens": int(len(self.held_tokens)),
                "held_out_features": self.held_file, "held_out_text": self.held_txt, "vocab_file": self.vocab_file,
                "train_dupe_factor": TRAIN_DUPE_FACTOR, "held_out_masked_lm_prob": HELD_MASKED_LM_PROB}


def demo_data(args, out, say):

    if not 0.0 < args.mlm_probability < 1.0:
        raise UsageError(f"--mlm_probability must be between 0 and 1, got {args.mlm_probability}")
    speeches = shakespeare.read_speeches()
    if args.speeches:
        speeches = speeches[:args.speeches]
    n_held = max(8, int(len(speeches) * HELD_OUT_FRACTION))
    if len(speeches) - n_held < 2 * SPEECHES_PER_DOCUMENT:
        raise UsageError(f"--speeches {args.speeches}: too few to train on "
                         f"(at least {2 * SPEECHES_PER_DOCUMENT + n_held})")
    train_speeches, held_speeches = speeches[:-n_held], speeches[-n_held:]
    train_txt, held_txt = os.path.join(out, "train.txt"), os.path.join(out, "held_out.txt")
    shakespeare.write_documents(shakespeare.documents(train_speeches, SPEECHES_PER_DOCUMENT), train_txt)
    shakespeare.write_documents(shakespeare.documents(held_speeches, SPEECHES_PER_DOCUMENT), held_txt)

    # 1. vocabulary
    t = time.perf_counter()
    vocab_file = os.path.join(out, "vocab.txt")
    vocab = build_vocab([train_txt], args.vocab_size, vocab_file)
    tokenizer = BertTokenizer(vocab_file)
    say(f"1. vocabulary: {len(vocab)} WordPiece tokens learned from the first {len(train_speeches)} speeches "
        f"({time.perf_counter() - t:.1f} s): e.g. {' '.join(vocab[300:310])}")

    # 2. instances (Google's create_pretraining_data algorithm)
    t = time.perf_counter()
    T = args.max_seq_length
    P = max(1, round(T * HELD_MASKED_LM_PROB))
    P_train = max(1, round(T * args.mlm_probability))
    try:
        train_inst = create_training_instances([train_txt], tokenizer, T, TRAIN_DUPE_FACTOR, 0.1, args.mlm_probability,
                                               P_train, random.Random(args.seed))
        held_inst = create_training_instances([held_txt], tokenizer, T, HELD_DUPE_FACTOR, 0.1, HELD_MASKED_LM_PROB, P,
                                              random.Random(args.seed + 1))
    except ValueError as e:
        raise CliError(str(e)) from None
    train_features = instances_to_features(train_inst, tokenizer, T, P_train)
    held_features = instances_to_features(held_inst, tokenizer, T, P)
    held_file = os.path.join(out, "held_out.h5")
    write_features(held_file, held_features, len(tokenizer), T, P)
    held = PretrainingDataset(held_features)
    special = [tokenizer.vocab[t] for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")]
    train_tokens = unmasked_tokens(train_features, special)
    train = PretrainingDataset(train_features)
    if args.static_masking:
        collator = default_data_collator
        masking = f"{args.mlm_probability:.0%} of the tokens masked once per sequence"
    else:
        train = DynamicMasking(train)                # the original tokens back; the collator masks each batch
        collator = MaskingCollator(tokenizer, args.mlm_probability, args.seed)
        masking = f"{args.mlm_probability:.0%} of the tokens masked anew in every batch"
    say(f"2. instances: {len(train)} training sequences of up to {T} tokens ({masking}; 80 % [MASK], 10 % random, "
        f"10 % kept), half with a random next sentence; {len(held)} held-out sequences from the last {n_held} "
        f"speeches, masked once ({time.perf_counter() - t:.1f} s)")
    example = collator([train[0]])
    say(f"   e.g. {' '.join(tokenizer.convert_ids_to_tokens(example['input_ids'][0].tolist()))}")

    real = held_features["masked_lm_weights"] > 0                                   # (N, P)
    rows = np.nonzero(real)[0]
    inputs = held_features["input_ids"][rows, held_features["masked_lm_positions"][real]]
    held_tokens_at_mask = held_features["masked_lm_ids"][real][inputs == tokenizer.mask_token_id].astype(np.int64)
    held_lines = [line for speech in held_speeches for line in speech]
    prompts = choose_fill_mask_prompts(held_lines, tokenizer, N_PROMPTS, max_tokens=T)
    return DemoData(tokenizer=tokenizer, train=train, held=held, collator=collator, prompts=prompts,
                    train_tokens=train_tokens, held_tokens=held_out_tokens(held),
                    held_tokens_at_mask=held_tokens_at_mask, held_file=held_file, special_ids=special,
                    held_txt=held_txt, vocab_file=vocab_file, n_train_speeches=len(train_speeches),
                    train_lines=[line for speech in train_speeches for line in speech], held_lines=held_lines,
                    n_held_speeches=n_held)
