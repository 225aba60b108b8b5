"""`npbert finetune --task token-classification` (NER): CoNLL files, one tag per word.

Each word is cut into WordPiece pieces; the word's tag is the label of its first piece and
-100 (ignored by the loss) for the others, or with --label_all_tokens every piece gets it
(B-X becoming I-X after the first piece), as transformers' run_ner.py.  Predictions are read
at each word's first piece and mapped back to words; entity-level precision / recall / F1
and accuracy as seqeval computes them (BIO / IOB2).
"""
import numpy as np

from npbert.io._atomic import atomic_write
from npbert.tasks.base import TaskData
from npbert.tasks.labels import check_tag_set
from npbert.tasks.metrics import entity_scores
from npbert.tasks.readers import read_conll


def add_arguments(parser):
    g = parser.add_argument_group("token classification")
    g.add_argument("--label_all_tokens", action="store_true",
                   help="label every piece of a word, not only the first")
    return parser


def encode_words(words, tags, tokenizer, max_seq_length, label2id, label_all_tokens=False):
    """(example dict, word_ids): [CLS] pieces [SEP] truncated to max_seq_length; word_ids maps each
    position to its word (None for [CLS]/[SEP]); labels as described above."""
    ids, word_ids = [tokenizer.cls_token_id], [None]
    for w, word in enumerate(words):
        pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) or [tokenizer.unk_token_id]
        if len(ids) + len(pieces) > max_seq_length - 1:
            break                                            # the words that do not fit are dropped
        ids += pieces
        word_ids += [w] * len(pieces)
    ids.append(tokenizer.sep_token_id)
    word_ids.append(None)
    ex = {"input_ids": ids, "attention_mask": [1] * len(ids), "token_type_ids": [0] * len(ids)}
    if tags is not None:
        labels, previous = [], None
        for w in word_ids:
            if w is None:
                labels.append(-100)
            elif w != previous:
                labels.append(label2id[tags[w]])
            elif label_all_tokens:
                tag = tags[w]
                inside = "I-" + tag[2:] if tag.startswith("B-") else tag
                labels.append(label2id.get(inside, label2id[tag]))
            else:
                labels.append(-100)
            previous = w
        ex["labels"] = labels
    return ex, word_ids


def load_task(args, tokenizer):
    from npbert.modeling import BertForTokenClassification
    from npbert.training import DataCollatorForTokenClassification
    max_seq_length = getattr(args, "max_seq_length", None) or 128
    train_path = getattr(args, "train_file", None)
    if not train_path:
        raise ValueError("token classification needs --train_file (its tags define the label set)")
    train_sentences = read_conll(train_path)
    label_list = sorted({t for _, _, ts in train_sentences for t in ts})
    check_tag_set(label_list, train_path)
    label2id = {l: i for i, l in enumerate(label_list)}
    all_tokens = getattr(args, "label_all_tokens", False)

    def dataset(path, sentences=None, with_labels=True):
        if not path:
            return None, None
        sentences = sentences or read_conll(path)
        examples, meta = [], []
        for line, words, tags in sentences:
            for t in tags if with_labels else ():
                if t not in label2id:
                    raise ValueError(f"{path}:{line}: tag {t!r} does not occur in the training file {train_path}")
            ex, word_ids = encode_words(words, tags if with_labels else None, tokenizer, max_seq_length, label2id,
                                        all_tokens)
            examples.append(ex)
            meta.append((words, tags, word_ids))
        return examples, meta

    train, _ = dataset(train_path, train_sentences)
    evaluation, eval_meta = dataset(getattr(args, "validation_file", None))
    test, test_meta = dataset(getattr(args, "test_file", None), with_labels=False)   # a test file's tags are not used

    def word_predictions(logits, meta):
        """Per sentence, the predicted tag of each word (from its first piece; O for words cut off)."""
        out = []
        for row, (words, _, word_ids) in zip(logits, meta):
            tags, seen = ["O"] * len(words), set()
            for pos, w in enumerate(word_ids):
                if w is not None and w not in seen and pos < len(row):
                    tags[w] = label_list[int(np.argmax(row[pos]))]
                    seen.add(w)
            out.append(tags)
        return out

    def compute_metrics(p):
        logits = p.predictions[0] if isinstance(p.predictions, tuple) else p.predictions
        preds = logits.argmax(-1)
        true_seqs, pred_seqs = [], []
        for pred_row, label_row in zip(preds, p.label_ids):
            keep = label_row != -100
            true_seqs.append([label_list[i] for i in label_row[keep]])
            pred_seqs.append([label_list[i] for i in pred_row[keep]])
        return entity_scores(true_seqs, pred_seqs)

    def write_predictions(output, path):
        logits = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
        with atomic_write(path, "w") as f:
            for (words, _, _), tags in zip(test_meta, word_predictions(logits, test_meta)):
                f.write("".join(f"{w}\t{t}\n" for w, t in zip(words, tags)) + "\n")

    overrides = {"num_labels": len(label_list), "id2label": dict(enumerate(label_list)), "label2id": label2id}
    return TaskData(model_class=BertForTokenClassification, config_overrides=overrides, train_dataset=train,
                    eval_dataset=evaluation, test_dataset=test,
                    data_collator=DataCollatorForTokenClassification(tokenizer),
                    compute_metrics=compute_metrics, write_predictions=write_predictions)
