"""`npbert finetune --task sequence-classification`: single texts or pairs, one label, a real
value (regression) or a set of labels (multi-label), from .csv/.tsv/.json/.jsonl files.

    [CLS] text [SEP]  or  [CLS] text [SEP] pair [SEP]   (token_type_ids 0 ... 0 1 ... 1)
    -> BertForSequenceClassification -> logits (B, K)

The label set of the training file becomes config.id2label / label2id, so a saved model
predicts names; without a training file (evaluate or predict only) the label set is the
fine-tuned model's config (`load_task(..., config=)`).  Predictions: predictions.jsonl, one
record a test row (npbert/tasks/records.py): its id, the label, its score and the top scores.  Long texts (Sun et al. 2019, docs/long_texts.md): --truncation
head|tail|head+tail (--head_tokens), or --long_text chunks: windows pooled by --chunk_pooling.
"""

import numpy as np

from npbert.io._atomic import atomic_write
from npbert.modeling import BertForSequenceClassification
from npbert.tasks.base import TaskData
from npbert.tasks.labels import label_set, label_set_of_model
from npbert.tasks.long_text import (CHUNK_POOLINGS, TRUNCATION_STRATEGIES, BertForChunkedSequenceClassification,
                                    collate_chunks, encode_chunks, truncate_tokens)
from npbert.tasks.metrics import accuracy, f1_score, matthews_corrcoef, pearsonr, spearmanr
from npbert.tasks.readers import find_columns, read_table
from npbert.tasks.records import TOP_K, classification_record, example_id, write_records
from npbert.training import DataCollatorWithPadding

TRAINED_HEADS = ("BertForSequenceClassification", "BertForChunkedSequenceClassification")


def add_arguments(parser):
    g = parser.add_argument_group("sequence classification")
    g.add_argument("--problem_type", choices=("single_label_classification", "regression",
                                              "multi_label_classification"),
                   help="default: multi-label for lists of labels, regression when every label is a number and "
                        "one is not an integer, else single-label (docs/runs.md, Label sets)")
    g.add_argument("--truncation", choices=TRUNCATION_STRATEGIES, default="head",
                   help="how a text longer than max_seq_length is cut (single texts)")
    g.add_argument("--head_tokens", type=int, default=128, help="tokens kept from the start with head+tail")
    g.add_argument("--long_text", choices=("truncate", "chunks"), default="truncate",
                   help="chunks: encode every window of the text and pool them (BertForChunkedSequenceClassification)")
    g.add_argument("--chunk_pooling", choices=CHUNK_POOLINGS, default="mean",
                   help="how the windows' pooled outputs are fused with --long_text chunks")
    g.add_argument("--chunk_stride", type=int, default=None, help="tokens between window starts (default: no overlap)")
    g.add_argument("--max_chunks", type=int, default=None, help="windows kept per text (default: all)")
    return parser


def labels_from_config(config):
    """(problem_type, label list or None) of a fine-tuned classifier's config; a ValueError when
    the checkpoint has no classification head to predict with."""
    trained = [a for a in (getattr(config, "architectures", None) or ()) if a in TRAINED_HEADS]
    if not trained:
        raise ValueError(f"no --train_file, and the model is not a fine-tuned classifier (its config.json names "
                         f"architectures {getattr(config, 'architectures', None)}, not {TRAINED_HEADS[0]}): its label "
                         "set is unknown. Give --train_file (and --do_train), or a model `npbert finetune` saved")
    problem = config.problem_type or ("regression" if config.num_labels == 1 else "single_label_classification")
    if problem == "regression":
        return problem, None
    return problem, [str(config.id2label[i]) for i in range(config.num_labels)]


def load_task(args, tokenizer, config=None):
    max_seq_length = getattr(args, "max_seq_length", None) or 128
    train_path = getattr(args, "train_file", None)
    if train_path:
        train_rows = read_table(train_path)
        columns_from, rows_from = train_path, train_rows
    else:
        problem, label_list = labels_from_config(config)
        train_rows = None
        columns_from = getattr(args, "validation_file", None) or getattr(args, "test_file", None)
        if not columns_from:
            raise ValueError("nothing to read: give --train_file, --validation_file or --test_file")
        rows_from = read_table(columns_from)
    with_label = bool(train_path) or columns_from == getattr(args, "validation_file", None)
    text_col, pair_col, label_col = find_columns(columns_from, rows_from, getattr(args, "text_column_name", None),
                                                 getattr(args, "text_pair_column_name", None),
                                                 getattr(args, "label_column_name", None), need_label=with_label)
    if train_path:
        labels = label_set([(line, r[label_col]) for line, r in train_rows], train_path,   # the rule: tasks/labels.py
                           getattr(args, "problem_type", None))
    else:
        labels = label_set_of_model(problem, label_list)
    problem, label_list, label2id = labels.problem_type, labels.names, labels.label2id
    chunks = getattr(args, "long_text", "truncate") == "chunks"
    strategy = getattr(args, "truncation", "head")
    if pair_col and (chunks or strategy != "head"):
        raise ValueError(f"--truncation {strategy} and --long_text chunks are for single texts; {columns_from} has "
                         f"pairs ({text_col}, {pair_col})")

    def label_value(path, line, value):
        return labels.encode(value, path, line)

    def encode(text, pair):
        if chunks:
            ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
            return encode_chunks(ids, max_seq_length, tokenizer.cls_token_id, tokenizer.sep_token_id,
                                 tokenizer.pad_token_id, getattr(args, "chunk_stride", None),
                                 getattr(args, "max_chunks", None))
        if pair is None and strategy != "head":
            ids = truncate_tokens(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)), max_seq_length - 2,
                                  strategy, getattr(args, "head_tokens", 128))
            ids = [tokenizer.cls_token_id] + ids + [tokenizer.sep_token_id]
            return {"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids)}
        enc = tokenizer(text, pair, truncation=True, max_length=max_seq_length, return_token_type_ids=True)
        return {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")}

    def dataset(path, with_labels):
        if not path:
            return None, None
        rows = train_rows if path == train_path else rows_from if path == columns_from else read_table(path)
        find_columns(path, rows, text_col, pair_col, label_col if with_labels else None, need_label=with_labels)
        examples, texts = [], []
        for line, row in rows:
            text = row[text_col]
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{path}:{line}: the text ({text_col}) is empty")
            ex = encode(text, row[pair_col] if pair_col else None)
            if with_labels:
                ex["labels"] = label_value(path, line, row[label_col])
            examples.append(ex)
            texts.append((line, row))
        return examples, texts

    train, _ = dataset(train_path, True)
    evaluation, _ = dataset(getattr(args, "validation_file", None), True)
    test, test_rows = dataset(getattr(args, "test_file", None), False)

    def compute_metrics(p):
        logits = p.predictions[0] if isinstance(p.predictions, tuple) else p.predictions
        labels = p.label_ids
        if problem == "regression":
            preds = logits.reshape(-1)
            return {"pearson": pearsonr(preds, labels), "spearmanr": spearmanr(preds, labels),
                    "mse": float(np.mean((preds - labels) ** 2))}
        if problem == "multi_label_classification":
            preds = (logits > 0).astype(int)
            return {"accuracy": float(np.all(preds == labels, axis=1).mean()),
                    "f1": f1_score(preds.reshape(-1), labels.reshape(-1).astype(int), average="binary")}
        preds = logits.argmax(-1)
        binary = len(label_list) == 2
        return {"accuracy": accuracy(preds, labels),
                "f1": f1_score(preds, labels, average="binary" if binary else "macro"),
                "matthews_correlation": matthews_corrcoef(preds, labels)}

    def write_predictions(output, path):
        """predictions.jsonl: a record per test row (npbert/tasks/records.py), the record `npbert
        predict` writes for the same row: its id, the label, its score and the top scores (the
        text is not repeated: the id names the row of --test_file)."""
        logits = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
        id2label = dict(enumerate(label_list)) if label_list else {}
        top_k = getattr(args, "top_k", None) or TOP_K
        with atomic_write(path, "w") as f:
            write_records(f, (classification_record(example_id(row, line), scores, id2label, problem, top_k)
                              for (line, row), scores in zip(test_rows, logits)))

    overrides = {"problem_type": problem, "num_labels": 1 if problem == "regression" else len(label_list)}
    if label_list:
        overrides["id2label"] = {i: l for i, l in enumerate(label_list)}
        overrides["label2id"] = dict(label2id)
    model_class = None
    collator = None
    if chunks:
        model_class = BertForChunkedSequenceClassification
        overrides["chunk_pooling"] = getattr(args, "chunk_pooling", "mean")
        for part in (train, evaluation, test):
            for ex in part or ():
                for k in ("input_ids", "attention_mask", "token_type_ids"):
                    ex[k] = np.asarray(ex[k])
        collator = lambda examples: collate_chunks(examples, tokenizer.pad_token_id)   # noqa: E731
    else:
        model_class = BertForSequenceClassification
        collator = DataCollatorWithPadding(tokenizer)
    return TaskData(model_class=model_class, config_overrides=overrides, train_dataset=train,
                    eval_dataset=evaluation, test_dataset=test, data_collator=collator,
                    compute_metrics=compute_metrics, write_predictions=write_predictions)
