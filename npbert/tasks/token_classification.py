"""`npbert finetune --task token-classification` (NER): CoNLL files, one tag per word.

    M = max_seq_length - 2 pieces per window, S = --stride (pieces shared by two windows)

Each word is cut into WordPiece pieces; the word's tag is the label of its first piece and
-100 (ignored by the loss) for the others, or with --label_all_tokens every piece gets it
(B-X becoming I-X after the first piece), as transformers' run_ner.py.

A sentence longer than one window is not cut: it is covered by windows of M pieces, each
sharing S pieces with the one before (npbert/tasks/windows.py, the windows of transformers'
token-classification pipeline).  Training reads every window.  For evaluation and predictions
each word is read from the window where its first piece has the most context on its shorter
side (Google's max-context rule), so every word of every sentence gets a tag, and the
entity-level precision / recall / F1 and accuracy (seqeval's, BIO / IOB2) are over all words.

The label set is the training file's tags, or, with no training file (evaluate or predict
only), the fine-tuned model's config.  Predictions: predictions.jsonl (a record per sentence:
its words, a tag and a score per word, the entities; npbert/tasks/records.py) and
predictions.conll (`word<TAB>tag`, a blank line between sentences).
"""
import os

import numpy as np

from npbert.io._atomic import atomic_write
from npbert.modeling import BertForTokenClassification
from npbert.tasks.base import TaskData
from npbert.tasks.labels import check_tag_set
from npbert.tasks.metrics import entity_scores
from npbert.tasks.readers import read_conll
from npbert.tasks.records import softmax, token_record, write_records
from npbert.tasks.windows import max_context_window, overflow_windows
from npbert.training import DataCollatorForTokenClassification


def add_arguments(parser):
    g = parser.add_argument_group("token classification")
    g.add_argument("--label_all_tokens", action="store_true",
                   help="label every piece of a word, not only the first")
    g.add_argument("--stride", type=int, default=None,
                   help="a sentence longer than max_seq_length is read in overlapping windows sharing this many "
                        "pieces (default: half a window)")
    return parser


def piece_ids(words, tokenizer):
    """(ids, word_ids): the WordPiece ids of the words, and for each the index of its word."""
    ids, word_ids = [], []
    for w, word in enumerate(words):
        pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) or [tokenizer.unk_token_id]
        ids += pieces
        word_ids += [w] * len(pieces)
    return ids, word_ids


def encode_words(words, tags, tokenizer, max_seq_length, label2id, label_all_tokens=False):
    """(example dict, word_ids) of a sentence that fits one window: [CLS] pieces [SEP], word_ids
    mapping each position to its word (None for [CLS]/[SEP]), labels as described above.  A
    longer sentence gives its first window here; encode_windows gives them all."""
    example, word_ids, _ = encode_windows(words, tags, tokenizer, max_seq_length, label2id, label_all_tokens)[0]
    return example, word_ids


def encode_windows(words, tags, tokenizer, max_seq_length, label2id, label_all_tokens=False, stride=None):
    """[(example dict, word_ids, (start, stop))]: one per window of the sentence, as encode_words
    builds it; (start, stop) are the window's pieces among the sentence's.  `stride`: pieces two
    windows share (default half a window)."""
    ids, word_of = piece_ids(words, tokenizer)
    M = max_seq_length - 2
    if M < 1:
        raise ValueError(f"max_seq_length {max_seq_length} leaves no room between [CLS] and [SEP]")
    stride = M // 2 if stride is None else stride
    out = []
    for start, stop in overflow_windows(len(ids), M, stride):
        window_ids = [tokenizer.cls_token_id] + ids[start:stop] + [tokenizer.sep_token_id]
        word_ids = [None] + word_of[start:stop] + [None]
        ex = {"input_ids": window_ids, "attention_mask": [1] * len(window_ids),
              "token_type_ids": [0] * len(window_ids)}
        if tags is not None:
            labels = []
            for pos, w in enumerate(word_ids):
                first_piece = w is not None and (start + pos - 1 == 0 or word_of[start + pos - 2] != w)
                if w is None:
                    labels.append(-100)
                elif first_piece:
                    labels.append(label2id[tags[w]])
                elif label_all_tokens:
                    tag = tags[w]
                    inside = "I-" + tag[2:] if tag.startswith("B-") else tag
                    labels.append(label2id.get(inside, label2id[tag]))
                else:
                    labels.append(-100)
            ex["labels"] = labels
        out.append((ex, word_ids, (start, stop)))
    return out


def first_piece_positions(word_of, n_words):
    """The index (among the sentence's pieces) of each word's first piece."""
    first = [None] * n_words
    for i, w in enumerate(word_of):
        if first[w] is None:
            first[w] = i
    return first


def labels_from_config(config):
    if "BertForTokenClassification" not in (getattr(config, "architectures", None) or ()):
        raise ValueError(f"no --train_file, and the model is not a fine-tuned token classifier (its config.json names "
                         f"architectures {getattr(config, 'architectures', None)}): its tag set is unknown. Give "
                         "--train_file (and --do_train), or a model `npbert finetune` saved")
    return [str(config.id2label[i]) for i in range(config.num_labels)]


def load_task(args, tokenizer, config=None):
    max_seq_length = getattr(args, "max_seq_length", None) or 128
    stride = getattr(args, "stride", None)
    if stride is not None and not 0 <= stride < max_seq_length - 2:
        raise ValueError(f"--stride {stride}: windows of {max_seq_length - 2} pieces (max_seq_length - 2) can share "
                         f"0 to {max_seq_length - 3} of them")
    train_path = getattr(args, "train_file", None)
    train_sentences = read_conll(train_path) if train_path else None
    if train_path:
        label_list = sorted({t for _, _, ts in train_sentences for t in ts})
        check_tag_set(label_list, train_path)
        label_source = f"the training file {train_path}"
    else:
        label_list = labels_from_config(config)
        label_source = "the model's tag set (config.json)"
    label2id = {l: i for i, l in enumerate(label_list)}
    all_tokens = getattr(args, "label_all_tokens", False)

    def dataset(path, sentences=None, with_labels=True):
        """(window examples, per sentence (line, words, tags, word of each piece, window spans, the
        windows' indices in the examples))."""
        if not path:
            return None, None
        sentences = sentences or read_conll(path, with_tags=with_labels)
        examples, meta = [], []
        for line, words, tags in sentences:
            for t in tags if with_labels else ():
                if t not in label2id:
                    raise ValueError(f"{path}:{line}: tag {t!r} does not occur in {label_source}")
            windows = encode_windows(words, tags if with_labels else None, tokenizer, max_seq_length, label2id,
                                     all_tokens, stride)
            first = len(examples)
            examples += [ex for ex, _, _ in windows]
            meta.append((line, words, tags, piece_ids(words, tokenizer)[1], [span for _, _, span in windows],
                         range(first, len(examples))))
        return examples, meta

    train, _ = dataset(train_path, train_sentences)
    evaluation, eval_meta = dataset(getattr(args, "validation_file", None))
    test, test_meta = dataset(getattr(args, "test_file", None), with_labels=False)   # a test file's tags are not used

    def word_scores(logits, meta):
        """Per sentence: the (T, K)-logits of its windows -> each word's tag probabilities (K,),
        read at its first piece in the window where that piece has the most context."""
        out = []
        for line, words, _, word_of, spans, rows in meta:
            firsts = first_piece_positions(word_of, len(words))
            probs = np.zeros((len(words), len(label_list)))
            for w, piece in enumerate(firsts):
                k = max_context_window(spans, piece)
                probs[w] = softmax(logits[rows[k]][piece - spans[k][0] + 1, :len(label_list)])
            out.append(probs)
        return out

    def compute_metrics(p):
        logits = p.predictions[0] if isinstance(p.predictions, tuple) else p.predictions
        true_seqs, pred_seqs = [], []
        for (_, _, tags, _, _, _), probs in zip(eval_meta, word_scores(logits, eval_meta)):
            true_seqs.append(list(tags))
            pred_seqs.append([label_list[int(k)] for k in probs.argmax(-1)])
        return entity_scores(true_seqs, pred_seqs)

    def write_predictions(output, path):
        """predictions.jsonl (path) and predictions.conll beside it."""
        logits = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
        records = []
        for (line, words, _, _, _, _), probs in zip(test_meta, word_scores(logits, test_meta)):
            best = probs.argmax(-1)
            records.append(token_record(line, words, [label_list[int(k)] for k in best],
                                        probs[np.arange(len(words)), best]))
        with atomic_write(path, "w") as f:
            write_records(f, records)
        with atomic_write(os.path.join(os.path.dirname(os.path.abspath(path)), "predictions.conll"), "w") as f:
            for r in records:
                f.write("".join(f"{w}\t{t}\n" for w, t in zip(r["words"], r["tags"])) + "\n")

    overrides = {"num_labels": len(label_list), "id2label": dict(enumerate(label_list)), "label2id": label2id}
    longer = sum(len(m[4]) > 1 for part in (eval_meta, test_meta) for m in part or ())
    return TaskData(model_class=BertForTokenClassification, config_overrides=overrides, train_dataset=train,
                    eval_dataset=evaluation, test_dataset=test,
                    data_collator=DataCollatorForTokenClassification(tokenizer),
                    compute_metrics=compute_metrics, write_predictions=write_predictions,
                    num_examples={"train": len(train_sentences) if train_sentences else 0,
                                  "eval": len(eval_meta or ()), "test": len(test_meta or ())},
                    unit="sentences",
                    notes=[f"{longer} evaluation/test sentences are longer than max_seq_length {max_seq_length}: "
                           f"each is read in overlapping windows (--stride)"] if longer else [])
