"""Multiple choice: SWAG-style questions and the CHID idiom cloze, for BertForMultipleChoice.

    C = number of choices, T = max_seq_length

Every choice of an example becomes one sequence, as transformers' run_swag.py builds them:

    [CLS] context [SEP] choice [SEP]          (token_type_ids 0 for the first part, 1 after)

and the example is the (C, T) arrays of its C sequences; BertForMultipleChoice scores each
sequence's pooled [CLS] and takes a softmax over the C scores (label = the right choice's index).

Files (one JSON object a line, or a JSON array; SWAG also as .csv with a header):
    SWAG   {"sent1": ..., "sent2": ..., "ending0": ..., ..., "ending3": ..., "label": 2}
           context = sent1, choice i = sent2 + " " + ending_i (run_swag's pairing)
    CHID   {"candidates": [7 idioms], "content": "... #idiom# ...", "answer": 3}
           context = content with the blank "#idiom#" as [MASK], choice i = candidates[i]
The format is found from the first record's keys.  The task module for `npbert finetune --task
multiple-choice` (contract in npbert/tasks/base.py) is `add_arguments` / `load_task` below.
"""
import csv
import json

import numpy as np

from npbert.io._atomic import atomic_write
from npbert.modeling import BertForMultipleChoice
from npbert.tasks.base import TaskData
from npbert.tasks.files import read_text_file
from npbert.tasks.records import softmax

IDIOM_BLANK = "#idiom#"
SWAG_ENDINGS = 4


def _read_records(path):
    """[(line number, dict)] from a .csv (header) or a JSON-lines / JSON-array file."""
    text = read_text_file(path)
    if path.endswith(".csv"):
        rows = list(csv.DictReader(text.splitlines()))
        return [(i + 2, row) for i, row in enumerate(rows)]          # line 1 is the header
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            return [(None, r) for r in json.loads(text)]
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {n}: not valid JSON ({e.msg})") from None
    return records


def _where(path, n):
    return f"{path}, line {n}" if n is not None else path


def _label(value, num_choices, where):
    try:
        label = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: the label must be a choice index, got {value!r}") from None
    if str(value).strip() != str(label) or not 0 <= label < num_choices:
        raise ValueError(f"{where}: the label {value!r} is not a choice index in [0, {num_choices})")
    return label


def read_multiple_choice(path, require_labels=True):
    """A SWAG or CHID file -> [{"context": str, "choices": [str]*C, "label": int or None, "id": ...}]."""
    records = _read_records(path)
    if not records:
        raise ValueError(f"{path}: no examples")
    first = records[0][1]
    if not isinstance(first, dict):
        raise ValueError(f"{_where(path, records[0][0])}: expected an object, got {type(first).__name__}")
    kind = "chid" if "candidates" in first else "swag"
    examples = []
    for n, r in records:
        where = _where(path, n)
        if kind == "chid":
            missing = [k for k in ("candidates", "content") if k not in r]
            if missing:
                raise ValueError(f"{where}: missing key {missing[0]!r} (CHID records have candidates, content, answer)")
            content, choices = r["content"], list(r["candidates"])
            if content.count(IDIOM_BLANK) != 1:
                raise ValueError(f"{where}: content must hold the blank {IDIOM_BLANK!r} exactly once, found "
                                 f"{content.count(IDIOM_BLANK)}")
            context = content.replace(IDIOM_BLANK, "[MASK]")
            label_key = "answer"
        else:
            endings = [f"ending{i}" for i in range(SWAG_ENDINGS)]
            missing = [k for k in ["sent1", "sent2"] + endings if k not in r]
            if missing:
                raise ValueError(f"{where}: missing column {missing[0]!r} (SWAG records have sent1, sent2, "
                                 f"ending0..ending3, label)")
            context = r["sent1"]
            choices = [f"{r['sent2']} {r[e]}" for e in endings]
            label_key = "label"
        if len(choices) < 2:
            raise ValueError(f"{where}: a multiple-choice example needs at least 2 choices, got {len(choices)}")
        label = None
        if r.get(label_key) not in (None, ""):
            label = _label(r[label_key], len(choices), where)
        elif require_labels:
            raise ValueError(f"{where}: missing {label_key!r} (the right choice's index)")
        examples.append({"context": context, "choices": choices, "label": label,
                         "id": r.get("id", r.get("fold-ind", len(examples)))})
    return examples


def encode_multiple_choice(example, tokenizer, max_seq_length=128):
    """One example -> {"input_ids", "attention_mask", "token_type_ids"}: (C, T) int64 each, and
    "labels" when it has one.  Pairs longer than T are cut longest-first, as run_swag does."""
    C = len(example["choices"])
    enc = tokenizer([example["context"]] * C, example["choices"], truncation=True, max_length=max_seq_length,
                    padding="max_length", return_token_type_ids=True, return_attention_mask=True,
                    return_tensors="np")
    features = {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
    if example["label"] is not None:
        features["labels"] = example["label"]
    return features


def collate_multiple_choice(features):
    """[{(C, T) arrays, labels}] -> {(B, C, T) arrays, labels (B,)}; every example needs the same C and T."""
    shapes = {f["input_ids"].shape for f in features}
    if len(shapes) != 1:
        raise ValueError(f"multiple choice: a batch mixes examples of shapes {sorted(shapes)} (choices, tokens)")
    batch = {k: np.stack([f[k] for f in features]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    if all("labels" in f for f in features):
        batch["labels"] = np.asarray([f["labels"] for f in features], dtype=np.int64)
    return batch


def accuracy(predictions, label_ids):
    """Fraction of examples whose highest-scoring choice is the labelled one.  logits (B, C), labels (B,)."""
    logits = np.asarray(predictions[0] if isinstance(predictions, tuple) else predictions)
    return float(np.mean(np.argmax(logits, axis=-1) == np.asarray(label_ids)))


# =========================================================================================
# The task module for `npbert finetune --task multiple-choice`
# =========================================================================================
def add_arguments(parser):
    """No flags of its own: --max_seq_length and the files are npbert finetune's."""
    return parser


def load_task(args, tokenizer, config=None):
    max_seq_length = getattr(args, "max_seq_length", None) or 128
    if not getattr(args, "train_file", None) and config is not None and \
            "BertForMultipleChoice" not in (getattr(config, "architectures", None) or ()):
        raise ValueError(f"no --train_file, and the model is not fine-tuned for multiple choice (its config.json "
                         f"names architectures {getattr(config, 'architectures', None)}): its choices would come "
                         "from a random head. Give --train_file (and --do_train), or a model `npbert finetune` saved")

    def dataset(path, require_labels):
        if not path:
            return None, None
        examples = read_multiple_choice(path, require_labels=require_labels)
        return examples, [encode_multiple_choice(e, tokenizer, max_seq_length) for e in examples]

    _, train = dataset(getattr(args, "train_file", None), True)
    _, evaluation = dataset(getattr(args, "validation_file", None), True)
    test_examples, test = dataset(getattr(args, "test_file", None), False)
    num_choices = {len(f["input_ids"]) for part in (train, evaluation, test) if part for f in part}
    if len(num_choices) > 1:
        raise ValueError(f"multiple choice: the files mix examples with {sorted(num_choices)} choices")

    def compute_metrics(eval_prediction):
        return {"accuracy": accuracy(eval_prediction.predictions, eval_prediction.label_ids)}

    def write_predictions(prediction_output, output_path):
        logits = prediction_output.predictions
        logits = np.asarray(logits[0] if isinstance(logits, tuple) else logits)
        if len(logits) != len(test_examples):
            raise ValueError(f"{len(logits)} predictions for {len(test_examples)} test examples")
        with atomic_write(output_path, "w") as f:
            for example, row in zip(test_examples, logits):
                probs = softmax(row)
                best = int(np.argmax(row))
                f.write(json.dumps({"id": example["id"], "label": best, "choice": example["choices"][best],
                                    "score": float(probs[best]), "scores": [round(float(p), 6) for p in probs]},
                                   ensure_ascii=False) + "\n")

    return TaskData(model_class=BertForMultipleChoice, config_overrides={}, train_dataset=train,
                    eval_dataset=evaluation, test_dataset=test, data_collator=collate_multiple_choice,
                    compute_metrics=compute_metrics, write_predictions=write_predictions if test else None)
