"""Step 6 of `npbert demo`: BERT's thesis in small.  A model pre-trained on unlabelled text and
then fine-tuned on a small labelled task beats the same model fine-tuned from random weights
for the same steps (Devlin et al. 2019, section 5).

The task, made from the corpus: is a line as Shakespeare wrote it, or have two neighbouring
words been swapped?  ("to be or not to be" vs "to be not or to be".)  Each line is kept or
swapped with probability 1/2; the training lines come from the training speeches, the
evaluation lines from the held-out ones.  Both models are BertForSequenceClassification of
the demo's config with the same seed: one loads the pre-trained encoder (the classifier on
[CLS] starts fresh), the other starts from the initialisation.  Same batches, same steps.
"""
import os
import random
import warnings

import numpy as np

import npbert
from npbert.training import DataCollatorWithPadding, Trainer, TrainingArguments

LABELS = ("swapped", "original")
TRAIN_LINES = 3000


def word_order_examples(lines, tokenizer, max_tokens, rng):
    """[(text, label)]: label 1 the line as written, 0 two neighbouring (different) words swapped.
    Lines of 4+ words that fit in max_tokens (with [CLS] and [SEP])."""
    out = []
    for line in lines:
        words = line.split()
        if len(words) < 4 or len(tokenizer.tokenize(line)) + 2 > max_tokens:
            continue
        if rng.random() < 0.5:
            out.append((line, 1))
            continue
        pairs = [k for k in range(len(words) - 1) if words[k].lower() != words[k + 1].lower()]
        if not pairs:
            continue
        k = rng.choice(pairs)
        words[k], words[k + 1] = words[k + 1], words[k]
        out.append((" ".join(words), 0))
    return out


def _encode(examples, tokenizer, max_tokens):
    enc = [tokenizer(text, truncation=True, max_length=max_tokens) for text, _ in examples]
    return [{"input_ids": e["input_ids"], "token_type_ids": e["token_type_ids"], "labels": label}
            for e, (_, label) in zip(enc, examples)]


def _accuracy(eval_pred):
    return {"accuracy": float((np.argmax(eval_pred.predictions, -1) == eval_pred.label_ids).mean())}


def fine_tune_both(pretrained_dir, tokenizer, train_lines, held_lines, args, out, say):
    """results.json's "fine_tuning": the held-out accuracy of both models after the same steps."""
    rng = random.Random(args.seed)
    T = args.max_seq_length
    train = _encode(word_order_examples(rng.sample(train_lines, min(TRAIN_LINES, len(train_lines))), tokenizer, T, rng),
                    tokenizer, T)
    held = _encode(word_order_examples(held_lines, tokenizer, T, rng), tokenizer, T)
    majority = max(np.mean([e["labels"] for e in held]), 1 - np.mean([e["labels"] for e in held]))
    steps = args.finetune_steps
    say(f"\n6. fine-tuning, BERT's thesis in small: is a line as Shakespeare wrote it, or are two neighbouring words "
        f"swapped? {len(train)} training lines, {len(held)} held-out lines (majority {majority:.3f}); {steps} steps "
        f"of 32 from the pre-trained encoder and from random weights")
    results = {"task": "word order: a line as written (1) or two neighbouring words swapped (0)",
               "train_examples": len(train), "held_out_examples": len(held), "majority": float(majority),
               "steps": steps}
    for name in ("pretrained", "random_init"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                  # the pre-training heads unused, the classifier fresh
            if name == "pretrained":
                model = npbert.BertForSequenceClassification.from_pretrained(pretrained_dir, num_labels=2)
            else:
                config = npbert.BertConfig.from_pretrained(pretrained_dir)     # the same config, 2 labels
                config.num_labels = 2
                model = npbert.BertForSequenceClassification(config, seed=args.seed)
        targs = TrainingArguments(os.path.join(out, f"finetune-{name}"), max_steps=steps, per_device_train_batch_size=32,
                                  per_device_eval_batch_size=128, learning_rate=1e-3, warmup_ratio=0.1,
                                  weight_decay=0.01, logging_steps=max(1, steps // 4), save_strategy="no",
                                  eval_strategy="no", seed=args.seed, plot=False)
        trainer = Trainer(model, targs, train_dataset=train, eval_dataset=held,
                          data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=_accuracy)
        trainer.train()
        results[name] = trainer.evaluate()["eval_accuracy"]
    gain = results["pretrained"] - results["random_init"]
    say(f"   held-out accuracy after {steps} steps: pre-trained {results['pretrained']:.3f}, from random weights "
        f"{results['random_init']:.3f} ({gain * 100:+.1f} points; always one label: {majority:.3f})")
    return results
