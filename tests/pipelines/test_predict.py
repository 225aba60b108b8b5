"""`npbert predict` against transformers' pipelines on the same checkpoints npbert saved.

Text classification (a CSV with ids), token classification (text lines read in overlapping
windows, and CoNLL words), fill-mask against transformers 5.x's pipelines; question answering
against the transformers 4.57 fixture of test_qa_pipeline_vs_4_57.py.  Records: the example's
id, the label and its score, the top scores, the spans; the numbers within 1e-5 (float32).
"""
import io
import json
import warnings

import numpy as np
import pytest

import npbert
from npbert import cli
from pipelines.make_qa_fixture import FIXTURE, build_checkpoints
from pipelines.test_pipelines_vs_transformers import LABELS, LONG, TEXTS, tiny_vocab

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

SCORE_TOL = 1e-5        # float32 probabilities, torch vs NumPy


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict")
    tok, base = tiny_vocab(root)
    base["initializer_range"] = 0.3                   # scores far apart: no argmax decided by round-off
    made = {}
    for name, model in (
            ("clf", npbert.BertForSequenceClassification(
                npbert.BertConfig(**base, id2label={0: "negative", 1: "neutral", 2: "positive"}), seed=1)),
            ("ner", npbert.BertForTokenClassification(npbert.BertConfig(**base, id2label=dict(enumerate(LABELS))),
                                                      seed=4)),
            ("mlm", npbert.BertForMaskedLM(npbert.BertConfig(**base), seed=5))):
        d = str(root / name)
        model.save_pretrained(d)
        tok.save_pretrained(d)
        made[name] = d
    made["qa"] = build_checkpoints(str(root / "qa"))["tiny"]
    return made


def predict(capsys, *argv):
    status = cli.main(["predict", *argv])
    err = capsys.readouterr().err
    assert status == 0, err
    return err


def records(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def hf(task, model, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.pipeline(task, model=model, **kwargs)


def test_text_classification_records_equal_the_pipeline(tiny, tmp_path, capsys):
    rows = [("a1", TEXTS[0]), ("a2", TEXTS[1]), ("a3", TEXTS[2])]
    (tmp_path / "in.csv").write_text("id,text\n" + "".join(f'{i},"{t}"\n' for i, t in rows), encoding="utf-8")
    err = predict(capsys, "--model", tiny["clf"], "--input", str(tmp_path / "in.csv"), "--output",
                  str(tmp_path / "out.jsonl"), "--top_k", "2")
    assert "text-classification" in err                      # the task read from config.json
    got = records(tmp_path / "out.jsonl")
    theirs = hf("text-classification", tiny["clf"])([t for _, t in rows], top_k=None)
    assert [r["id"] for r in got] == ["a1", "a2", "a3"]
    for r, expected in zip(got, theirs):
        assert r["label"] == expected[0]["label"] and abs(r["score"] - expected[0]["score"]) <= SCORE_TOL
        assert [s["label"] for s in r["scores"]] == [e["label"] for e in expected[:2]]
        assert np.allclose([s["score"] for s in r["scores"]], [e["score"] for e in expected[:2]], atol=SCORE_TOL)


def test_ner_text_lines_read_in_windows_equal_the_pipeline_with_stride(tiny, tmp_path, capsys):
    lines = [TEXTS[0], LONG, TEXTS[2]]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    predict(capsys, "--model", tiny["ner"], "--input", str(tmp_path / "in.txt"), "--output",
            str(tmp_path / "out.jsonl"), "--max_seq_length", "32")
    got = records(tmp_path / "out.jsonl")
    pipe = hf("ner", tiny["ner"], aggregation_strategy="first", stride=15)   # predict's stride: half of 32 - 2
    assert [r["id"] for r in got] == [1, 2, 3]                                # the lines' numbers
    for r, text in zip(got, lines):
        expected = pipe(text)
        assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in r["entities"]] == \
            [(e["entity_group"], e["word"], e["start"], e["end"]) for e in expected]
        assert np.allclose([e["score"] for e in r["entities"]], [e["score"] for e in expected], atol=SCORE_TOL)


def test_ner_conll_words_get_a_tag_each_equal_to_the_first_aggregation(tiny, tmp_path, capsys):
    sentences = [TEXTS[0].replace(",", " ,").replace(".", " .").split(), TEXTS[2].split()]
    (tmp_path / "in.conll").write_text("\n\n".join("\n".join(s) for s in sentences) + "\n", encoding="utf-8")
    predict(capsys, "--model", tiny["ner"], "--input", str(tmp_path / "in.conll"), "--output",
            str(tmp_path / "out.jsonl"))
    got = records(tmp_path / "out.jsonl")
    pipe = hf("ner", tiny["ner"], aggregation_strategy="first")
    for r, words in zip(got, sentences):
        assert r["words"] == words and len(r["tags"]) == len(words) == len(r["scores"])
        per_word = pipe(words, is_split_into_words=True, ignore_labels=[], aggregation_strategy="first")[0]
        expected = [e for e in per_word if e["entity_group"] != "O"]
        assert [(e["entity_group"], e["start"], e["end"]) for e in r["entities"]] == \
            [(e["entity_group"], e["start"], e["end"]) for e in expected]
        assert np.allclose([e["score"] for e in r["entities"]], [e["score"] for e in expected], atol=SCORE_TOL)


def test_ner_conll_sentence_longer_than_the_model_gets_every_word_tagged(tiny, tmp_path, capsys):
    """Every word of a sentence three windows long gets the tag of its first token in the window
    where that token has the most context: checked here by running each window alone."""
    from npbert.tasks.windows import max_context_window, overflow_windows
    words = LONG.split()
    (tmp_path / "long.conll").write_text("\n".join(words) + "\n", encoding="utf-8")
    predict(capsys, "--model", tiny["ner"], "--input", str(tmp_path / "long.conll"), "--output",
            str(tmp_path / "out.jsonl"), "--max_seq_length", "32")
    [r] = records(tmp_path / "out.jsonl")
    assert len(r["tags"]) == len(words) and all(s > 0 for s in r["scores"])
    tok = npbert.BertTokenizer.from_pretrained(tiny["ner"])
    model = npbert.BertForTokenClassification.from_pretrained(tiny["ner"])
    pieces = [tok.convert_tokens_to_ids(tok.tokenize(w)) for w in words]
    ids = [i for p in pieces for i in p]
    first = np.cumsum([0] + [len(p) for p in pieces])[:-1]
    spans = overflow_windows(len(ids), 30, 15)
    assert len(spans) >= 3
    for w in range(0, len(words), 3):
        k = max_context_window(spans, int(first[w]))
        start, stop = spans[k]
        window = [tok.cls_token_id] + ids[start:stop] + [tok.sep_token_id]
        with npbert.no_grad():
            logits = model(input_ids=np.asarray([window])).logits[0, int(first[w]) - start + 1]
        assert r["tags"][w] == LABELS[int(np.argmax(logits))], (w, words[w])


def test_question_answering_records_equal_transformers_4_57(tiny, tmp_path, capsys):
    fixture = json.load(open(FIXTURE, encoding="utf-8"))
    case = next(c for c in fixture["cases"] if c["checkpoint"] == "tiny" and c["kwargs"].get("top_k") == 3
                and c["kwargs"].get("max_seq_len") == 64)
    with open(tmp_path / "in.jsonl", "w", encoding="utf-8") as f:
        for k, example in enumerate(case["inputs"]):
            f.write(json.dumps({"id": f"q{k}", **example}, ensure_ascii=False) + "\n")
    predict(capsys, "--model", tiny["qa"], "--input", str(tmp_path / "in.jsonl"), "--output",
            str(tmp_path / "out.jsonl"), "--top_k", "3", "--max_seq_length", "64", "--doc_stride", "16")
    got = records(tmp_path / "out.jsonl")
    assert [r["id"] for r in got] == [f"q{k}" for k in range(len(case["inputs"]))]
    for r, expected in zip(got, case["expected"]):
        expected = expected if isinstance(expected, list) else [expected]
        assert [(a["answer"], a["start"], a["end"]) for a in r["answers"]] == \
            [(a["answer"], a["start"], a["end"]) for a in expected]
        assert r["label"] == expected[0]["answer"] and abs(r["score"] - expected[0]["score"]) <= SCORE_TOL


def test_fill_mask_records_equal_the_pipeline(tiny, tmp_path, capsys):
    lines = ["john went to [MASK] .", "the [MASK] of france"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    predict(capsys, "--model", tiny["mlm"], "--input", str(tmp_path / "in.txt"), "--output",
            str(tmp_path / "out.jsonl"), "--top_k", "3")
    for r, text in zip(records(tmp_path / "out.jsonl"), lines):
        expected = hf("fill-mask", tiny["mlm"])(text, top_k=3)
        assert r["label"] == expected[0]["token_str"]
        assert [c["token"] for c in r["scores"]] == [e["token"] for e in expected]
        assert np.allclose([c["score"] for c in r["scores"]], [e["score"] for e in expected], atol=SCORE_TOL)


def test_progress_on_long_inputs(monkeypatch):
    from npbert.cli import predict as cli_predict
    clock = iter(np.arange(0.0, 1000.0, 7.0))                 # 7 seconds an example
    monkeypatch.setattr(cli_predict.time, "perf_counter", lambda: float(next(clock)))
    stream = io.StringIO()
    progress = cli_predict.Progress(20, stream)
    for done in range(1, 21):
        progress.update(done)
    lines = stream.getvalue().splitlines()
    assert 3 <= len(lines) <= 6 and lines[0].startswith("predict: 5/20 examples")   # every 30 s, not every example
    assert "ETA" in lines[0] and lines[-1].startswith("predict: 20/20")
