"""Tiny models, data and commands for the attack tests: a 26-token vocabulary, a 2-layer
hidden-16 BERT, a pre-training .h5 and a classification CSV, and `npbert` as a subprocess."""
import csv
import os
import random
import subprocess
import sys

import numpy as np

import npbert
from npbert.io import read_safetensors

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = ["the", "king", "queen", "lord", "speak", "good", "night", "sweet", "prince", "love", "death", "crown",
         "sword", "rose", "fair", "foul", "heaven", "earth", "##s", "##ed", "##ing"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
TIMEOUT = 240          # seconds for one subprocess, on a shared 2-core machine


def write_vocab(directory):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    return path


def tokenizer(directory):
    return npbert.BertTokenizer(write_vocab(directory))


def config(**overrides):
    base = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=32)
    return npbert.BertConfig(**{**base, **overrides})


def classification_dataset(n=24, seed=0):
    """Label 1 when the sentence contains "king", else 0."""
    rng = np.random.default_rng(seed)
    data = []
    for i in range(n):
        ids = rng.integers(7, len(VOCAB) - 3, size=int(rng.integers(3, 9)))
        if i % 2:
            ids[rng.integers(0, len(ids))] = VOCAB.index("king")
        data.append({"input_ids": [2] + ids.tolist() + [3], "label": int(i % 2)})
    return data


def trainer(output_dir, directory, max_steps=6, save_steps=2, **args):
    """A Trainer of a tiny classifier on classification_dataset (dropout on, shuffled)."""
    from npbert.training import DataCollatorWithPadding, Trainer, TrainingArguments
    model = npbert.BertForSequenceClassification(config(num_labels=2), seed=3)
    targs = TrainingArguments(str(output_dir), **{"max_steps": max_steps, "per_device_train_batch_size": 4,
                                                  "save_steps": save_steps, "logging_steps": 2, "plot": False,
                                                  "learning_rate": 1e-2, "seed": 7, **args})
    return Trainer(model, targs, train_dataset=classification_dataset(),
                   data_collator=DataCollatorWithPadding(tokenizer(str(directory))))


def params(model):
    return {n: p.copy() for n, p in model.named_parameters()}


def same_bytes(a, b):
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


def saved_weights(directory):
    return read_safetensors(os.path.join(directory, "model.safetensors"))


def corpus(directory, documents=12, seed=0):
    """A text corpus of random sentences over WORDS (one a line, blank lines between documents)."""
    rng = random.Random(seed)
    words = [w for w in WORDS if not w.startswith("##")]
    lines = []
    for _ in range(documents):
        for _ in range(rng.randint(3, 6)):
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 7))))
        lines.append("")
    path = os.path.join(directory, "corpus.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def pretraining_h5(directory):
    """(features .h5, vocab.txt) made by `npbert create-pretraining-data` in this process."""
    from npbert.cli import main
    vocab, text = write_vocab(directory), corpus(directory)
    out = os.path.join(directory, "features.h5")
    assert main(["create-pretraining-data", "--input_file", text, "--output_file", out, "--vocab_file", vocab,
                 "--max_seq_length", "24", "--max_predictions_per_seq", "4", "--dupe_factor", "2"]) == 0
    return out, vocab


def pretrain_args(features, vocab, output_dir, max_steps=12, *extra):
    return ["pretrain", "--train_file", features, "--vocab_file", vocab, "--output_dir", str(output_dir),
            "--max_steps", str(max_steps), "--per_device_train_batch_size", "8", "--save_steps", "3",
            "--logging_steps", "1", "--learning_rate", "1e-3", "--plot", "false", *extra]


def base_model(directory):
    """A tiny random BertModel checkpoint with vocab.txt, for `npbert finetune`."""
    npbert.BertModel(config(), seed=0).save_pretrained(str(directory))
    write_vocab(str(directory))
    return str(directory)


def write_csv(path, rows, header=("sentence", "label")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def sentences(n=16, seed=0):
    """(sentence, label) rows: label "1" when the sentence contains "king"."""
    rng = random.Random(seed)
    words = [w for w in WORDS if not w.startswith("##") and w != "king"]
    rows = []
    for i in range(n):
        s = [rng.choice(words) for _ in range(rng.randint(3, 6))]
        if i % 2:
            s[rng.randrange(len(s))] = "king"
        rows.append((" ".join(s), str(i % 2)))
    return rows


def npbert_env():
    return dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), NPBERT_DISTRIBUTED="0")


def run_npbert(argv, timeout=TIMEOUT, **kwargs):
    """`python -m npbert ARGV` as a subprocess: CompletedProcess with text stdout/stderr."""
    return subprocess.run([sys.executable, "-m", "npbert", *argv], capture_output=True, text=True,
                          env=npbert_env(), cwd=REPO, timeout=timeout, **kwargs)


def start_npbert(argv, **kwargs):
    """`python -m npbert ARGV` started, stderr piped (line-buffered text)."""
    return subprocess.Popen([sys.executable, "-m", "npbert", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1, env=npbert_env(), cwd=REPO, **kwargs)


def run_python(code, timeout=TIMEOUT, **kwargs):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=npbert_env(),
                          cwd=REPO, timeout=timeout, **kwargs)
