"""`npbert finetune` for sequence and token classification end to end, the readers' errors,
and the metrics against scikit-learn and seqeval."""
import json
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import npbert
from npbert.cli import main
from npbert.tasks import metrics
from npbert.tasks.readers import read_conll, read_table

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks", "data")
POSITIVE = ["a fine and gentle day", "sweet music fills the hall", "the garden is fair and bright",
            "good friends share a merry feast", "the bright sun warms the field", "a kind word heals the heart",
            "joy and laughter in the house", "the fair maid sings sweetly"]
NEGATIVE = ["a cold and bitter night", "the dark storm breaks the wall", "grief and sorrow fill the house",
            "the foul wind howls in the dark", "a cruel blow wounds the heart", "war and death on the field",
            "the bitter frost kills the rose", "sorrow falls like cold rain"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random BERT with a vocabulary learned from the test texts."""
    d = tmp_path_factory.mktemp("ckpt")
    corpus = d / "corpus.txt"
    text = "\n".join(POSITIVE + NEGATIVE) + "\n" + open(os.path.join(DATA, "wnut17_train_sample.conll")).read() + \
        open(os.path.join(DATA, "wnut17_dev_sample.conll")).read()
    corpus.write_text(text)
    from npbert.data import build_vocab
    build_vocab([str(corpus)], 600, str(d / "vocab.txt"))
    tok = npbert.BertTokenizer(str(d / "vocab.txt"))
    config = npbert.BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64)
    npbert.BertModel(config, seed=0).save_pretrained(str(d))
    tok.save_pretrained(str(d))
    return str(d)


def write_csv(path, rows, header=("sentence", "label")):
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def test_sequence_classification_end_to_end(checkpoint, tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    rows = [(s, "positive") for s in POSITIVE] + [(s, "negative") for s in NEGATIVE]
    write_csv(tmp_path / "train.csv", rows)
    write_csv(tmp_path / "dev.csv", rows[::2])
    write_csv(tmp_path / "test.csv", [(s, "") for s, _ in rows[1::4]])
    out = str(tmp_path / "out")
    assert main(["finetune", "--task", "sequence-classification", "--model_name_or_path", checkpoint,
                 "--train_file", str(tmp_path / "train.csv"), "--validation_file", str(tmp_path / "dev.csv"),
                 "--test_file", str(tmp_path / "test.csv"), "--output_dir", out, "--max_seq_length", "16",
                 "--num_train_epochs", "15", "--learning_rate", "3e-3", "--per_device_train_batch_size", "8",
                 "--save_strategy", "no", "--eval_strategy", "epoch", "--logging_steps", "2", "--plot", "false"]) == 0
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "trainer_state.json",
                 "eval_results.json", "predictions.jsonl"):
        assert os.path.exists(os.path.join(out, name)), name
    results = json.load(open(os.path.join(out, "eval_results.json")))
    assert {"eval_loss", "eval_accuracy", "eval_f1", "eval_matthews_correlation"} <= set(results)
    state = json.load(open(os.path.join(out, "trainer_state.json")))
    losses = [e["loss"] for e in state["log_history"] if "loss" in e]
    assert losses[-1] < 0.9 * losses[0], losses     # from ln 2 = 0.69 down
    assert results["eval_accuracy"] >= 0.75
    preds = [json.loads(l) for l in open(os.path.join(out, "predictions.jsonl"))]
    assert len(preds) == 4 and all(p["label"] in ("positive", "negative") for p in preds)
    assert [p["id"] for p in preds] == [2, 3, 4, 5]                 # no id column: the CSV line numbers
    for p in preds:                                                 # the label is the best of the scores
        assert p["scores"][0] == {"label": p["label"], "score": p["score"]}
        assert abs(sum(s["score"] for s in p["scores"]) - 1) < 1e-6   # both labels: softmax sums to 1
    config = json.load(open(os.path.join(out, "config.json")))
    assert set(config["id2label"].values()) == {"positive", "negative"}
    # transformers loads the saved model and gives the same logits (float32: 1e-5)
    theirs = transformers.BertForSequenceClassification.from_pretrained(out).eval()
    ours = npbert.BertForSequenceClassification.from_pretrained(out)
    tok = npbert.BertTokenizer.from_pretrained(out)
    enc = tok([POSITIVE[0]], return_tensors="np")
    with torch.no_grad():
        expected = theirs(input_ids=torch.tensor(enc["input_ids"])).logits.numpy()
    np.testing.assert_allclose(ours(input_ids=enc["input_ids"]).logits, expected, rtol=1e-5, atol=1e-5)
    assert theirs.config.id2label == {int(k): v for k, v in config["id2label"].items()}


def test_pairs_regression_multilabel_and_long_text_options(checkpoint, tmp_path):
    import argparse
    from npbert.tasks import sequence_classification as sc
    tok = npbert.BertTokenizer.from_pretrained(checkpoint)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "label": i % 2}) + "\n"
                             for i, (a, b) in enumerate(zip(POSITIVE, NEGATIVE))))
    args = argparse.Namespace(train_file=str(pairs), validation_file=None, test_file=None, max_seq_length=32)
    task = sc.load_task(args, tok)
    ex = task.train_dataset[0]
    assert 1 in ex["token_type_ids"] and ex["token_type_ids"][0] == 0          # segment B marked
    assert task.config_overrides["problem_type"] == "single_label_classification"
    reg = tmp_path / "reg.jsonl"
    reg.write_text("".join(json.dumps({"text": s, "label": i / 4}) + "\n" for i, s in enumerate(POSITIVE)))
    task = sc.load_task(argparse.Namespace(train_file=str(reg), max_seq_length=16), tok)
    assert task.config_overrides == {"problem_type": "regression", "num_labels": 1}
    multi = tmp_path / "multi.jsonl"
    multi.write_text("".join(json.dumps({"text": s, "labels": ["a", "b"][: 1 + i % 2]}) + "\n"
                             for i, s in enumerate(POSITIVE)))
    task = sc.load_task(argparse.Namespace(train_file=str(multi), max_seq_length=16), tok)
    assert task.config_overrides["problem_type"] == "multi_label_classification"
    assert task.train_dataset[1]["labels"] == [1.0, 1.0]
    long = tmp_path / "long.jsonl"
    long.write_text("".join(json.dumps({"text": " ".join(POSITIVE), "label": i % 2}) + "\n" for i in range(4)))
    head_tail = sc.load_task(argparse.Namespace(train_file=str(long), max_seq_length=12, truncation="head+tail",
                                                head_tokens=4), tok)
    ids = tok.convert_tokens_to_ids(tok.tokenize(" ".join(POSITIVE)))
    assert head_tail.train_dataset[0]["input_ids"][1:-1] == ids[:4] + ids[-6:]
    chunks = sc.load_task(argparse.Namespace(train_file=str(long), max_seq_length=12, long_text="chunks",
                                             chunk_pooling="max"), tok)
    assert chunks.train_dataset[0]["input_ids"].shape == (-(-len(ids) // 10), 12)
    assert chunks.config_overrides["chunk_pooling"] == "max"
    batch = chunks.data_collator(chunks.train_dataset[:2])
    assert batch["chunk_mask"].shape == (2, -(-len(ids) // 10))


def test_token_classification_end_to_end_on_wnut17(checkpoint, tmp_path):
    """60 WNUT-17 sentences: the loss goes down, seqeval-style metrics are reported, and the
    test file (20 dev sentences, whose tags are not checked) gets one tag per word."""
    out = str(tmp_path / "ner")
    train = os.path.join(DATA, "wnut17_train_sample.conll")
    assert main(["finetune", "--task", "token-classification", "--model_name_or_path", checkpoint,
                 "--train_file", train, "--validation_file", train,
                 "--test_file", os.path.join(DATA, "wnut17_dev_sample.conll"), "--output_dir", out,
                 "--max_seq_length", "48", "--num_train_epochs", "6", "--learning_rate", "3e-3",
                 "--save_strategy", "no", "--eval_strategy", "no", "--logging_steps", "4", "--plot", "false"]) == 0
    results = json.load(open(os.path.join(out, "eval_results.json")))
    assert {"eval_precision", "eval_recall", "eval_f1", "eval_accuracy"} <= set(results)
    assert results["eval_accuracy"] > 0.8           # most tags are O
    state = json.load(open(os.path.join(out, "trainer_state.json")))
    losses = [e["loss"] for e in state["log_history"] if "loss" in e]
    assert losses[-1] < losses[0] / 2, losses
    predicted = open(os.path.join(out, "predictions.conll")).read().strip().split("\n\n")
    dev = read_conll(os.path.join(DATA, "wnut17_dev_sample.conll"))
    assert len(predicted) == len(dev)
    records = [json.loads(l) for l in open(os.path.join(out, "predictions.jsonl"))]
    assert [r["id"] for r in records] == [line for line, _, _ in dev]   # a sentence's id: its first line
    for block, (_, words, _), record in zip(predicted, dev, records):
        assert [line.split("\t")[0] for line in block.split("\n")] == words == record["words"]
        assert [line.split("\t")[1] for line in block.split("\n")] == record["tags"]
        assert len(record["scores"]) == len(words) and all(0 < s <= 1 for s in record["scores"])


def test_token_labels_align_to_first_pieces(checkpoint):
    from npbert.tasks.token_classification import encode_words
    tok = npbert.BertTokenizer.from_pretrained(checkpoint)
    words, tags = ["xylophonist", "the", "london"], ["B-person", "O", "B-location"]
    label2id = {"B-person": 0, "I-person": 1, "O": 2, "B-location": 3}
    ex, word_ids = encode_words(words, tags, tok, 32, label2id)
    firsts = [i for i, w in enumerate(word_ids) if w is not None and (i == 0 or word_ids[i - 1] != w)]
    assert [ex["labels"][i] for i in firsts] == [0, 2, 3]
    assert all(ex["labels"][i] == -100 for i in range(len(word_ids)) if i not in firsts)
    ex_all, _ = encode_words(words, tags, tok, 32, label2id, label_all_tokens=True)
    n_pieces = word_ids.count(0)
    assert n_pieces > 1 and [ex_all["labels"][i] for i, w in enumerate(word_ids) if w == 0] == [0] + [1] * (n_pieces - 1)


def test_readers_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence,label\nfine,1\ntoo,many,fields\n")
    with pytest.raises(ValueError, match="bad.csv:3: 3 fields"):
        read_table(str(bad))
    js = tmp_path / "bad.jsonl"
    js.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": \n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not valid JSON"):
        read_table(str(js))
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        read_table(str(empty))
    conll = tmp_path / "x.conll"
    conll.write_text("EU\tB-ORG\nrejects\n")
    with pytest.raises(ValueError, match="x.conll:2"):
        read_conll(str(conll))
    weibo = tmp_path / "weibo.txt"
    weibo.write_text("科0\tO\n技1\tO\n张0\tB-PER.NAM\n三1\tI-PER.NAM\n\n好0\tO\n")
    assert read_conll(str(weibo))[0][1] == ["科", "技", "张", "三"]


def test_unseen_validation_label_and_missing_column(checkpoint, tmp_path):
    import argparse
    from npbert.tasks import sequence_classification as sc
    tok = npbert.BertTokenizer.from_pretrained(checkpoint)
    write_csv(tmp_path / "train.csv", [("a fine day", "pos"), ("a cold night", "neg")])
    write_csv(tmp_path / "dev.csv", [("a day", "pos"), ("a night", "neutral")])
    with pytest.raises(ValueError, match="dev.csv:3: label 'neutral' does not occur"):
        sc.load_task(argparse.Namespace(train_file=str(tmp_path / "train.csv"),
                                        validation_file=str(tmp_path / "dev.csv"), max_seq_length=16), tok)
    write_csv(tmp_path / "nolabel.csv", [("a", "b")], header=("sentence", "other"))
    with pytest.raises(ValueError, match="no label column.*--label_column_name"):
        sc.load_task(argparse.Namespace(train_file=str(tmp_path / "nolabel.csv"), max_seq_length=16), tok)


TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(TAGS), min_size=1, max_size=12),
                          st.lists(st.sampled_from(TAGS), min_size=1, max_size=12)), min_size=1, max_size=5))
def test_entity_scores_equal_seqeval(pairs):
    seqeval = pytest.importorskip("seqeval.metrics")
    true = [t for t, p in pairs]
    pred = [(p * 12)[:len(t)] for t, p in pairs]
    ours = metrics.entity_scores(true, pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ours["precision"] == pytest.approx(seqeval.precision_score(true, pred), abs=1e-12)
        assert ours["recall"] == pytest.approx(seqeval.recall_score(true, pred), abs=1e-12)
        assert ours["f1"] == pytest.approx(seqeval.f1_score(true, pred), abs=1e-12)
        assert ours["accuracy"] == pytest.approx(seqeval.accuracy_score(true, pred), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=40))
def test_classification_metrics_equal_sklearn(pairs):
    sk = pytest.importorskip("sklearn.metrics")
    preds, labels = np.array([p for p, _ in pairs]), np.array([l for _, l in pairs])
    assert metrics.accuracy(preds, labels) == pytest.approx(sk.accuracy_score(labels, preds))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert metrics.f1_score(preds, labels, average="macro") == pytest.approx(
            sk.f1_score(labels, preds, average="macro", labels=sorted(set(labels) | set(preds)), zero_division=0))
        assert metrics.f1_score(preds, labels) == pytest.approx(
            sk.f1_score(labels == 1, preds == 1, zero_division=0))
        assert metrics.matthews_corrcoef(preds, labels) == pytest.approx(sk.matthews_corrcoef(labels, preds), abs=1e-12)


def test_correlations():
    x = np.array([1.0, 2.0, 2.0, 5.0, 3.0])
    y = np.array([2.0, 1.0, 4.0, 4.0, 9.0])
    assert metrics.pearsonr(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    # ranks with ties: x -> [1, 2.5, 2.5, 5, 4], y -> [2, 1, 3.5, 3.5, 5]
    assert metrics.spearmanr(x, y) == pytest.approx(np.corrcoef([1, 2.5, 2.5, 5, 4], [2, 1, 3.5, 3.5, 5])[0, 1])


def test_long_sentences_are_read_in_windows_and_every_word_is_tagged(checkpoint, tmp_path):
    """A sentence three windows long (max_seq_length 16): training reads every window; logits
    that put each window's labels right give every word of the sentence its tag back, in the
    metrics (over all words) and in the predictions (issue 23, 11: words past the first window
    used to be tagged O)."""
    import argparse
    from npbert.tasks import token_classification as tc
    tok = npbert.BertTokenizer.from_pretrained(checkpoint)
    sentences = read_conll(os.path.join(DATA, "wnut17_train_sample.conll"))
    words = [w for _, ws, _ in sentences[:6] for w in ws]
    tags = [t for _, _, ts in sentences[:6] for t in ts]
    path = tmp_path / "long.conll"
    path.write_text("".join(f"{w}\t{t}\n" for w, t in zip(words, tags)))
    task = tc.load_task(argparse.Namespace(train_file=str(path), validation_file=str(path), test_file=str(path),
                                           max_seq_length=16, stride=4), tok)
    n_windows = len(task.train_dataset)
    assert n_windows >= 3 and len(task.eval_dataset) == len(task.test_dataset) == n_windows
    assert task.num_examples == {"train": 1, "eval": 1, "test": 1} and task.notes
    label_list = [task.config_overrides["id2label"][i] for i in range(task.config_overrides["num_labels"])]
    # every word's first piece carries its tag in at least one window
    ids, word_of = tc.piece_ids(words, tok)
    labelled = set()
    for ex, (start, stop) in zip(task.train_dataset, tc.overflow_windows(len(ids), 14, 4)):
        for pos, label in enumerate(ex["labels"]):
            if label != -100:
                w = word_of[start + pos - 1]
                assert label_list[label] == tags[w]
                labelled.add(w)
    assert labelled == set(range(len(words)))
    # logits that are right in every window (K = the labels), and 0 elsewhere
    T = max(len(ex["input_ids"]) for ex in task.eval_dataset)
    logits = np.zeros((n_windows, T, len(label_list)))
    for k, (ex, (start, stop)) in enumerate(zip(task.eval_dataset, tc.overflow_windows(len(ids), 14, 4))):
        for pos in range(1, len(ex["input_ids"]) - 1):
            logits[k, pos, label_list.index(tags[word_of[start + pos - 1]])] = 10.0
    metrics = task.compute_metrics(argparse.Namespace(predictions=logits, label_ids=None))
    assert metrics["accuracy"] == 1.0 and metrics["f1"] == 1.0
    task.write_predictions(argparse.Namespace(predictions=logits), str(tmp_path / "predictions.jsonl"))
    [record] = [json.loads(line) for line in open(tmp_path / "predictions.jsonl")]
    assert record["words"] == words and record["tags"] == tags
    conll = open(tmp_path / "predictions.conll").read().split("\n")
    assert [line.split("\t")[1] for line in conll if line] == tags
