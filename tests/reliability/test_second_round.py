"""The second round of attacks (issue 36) on predict, the pipelines, attribution and plain
model folders: each case that was silent or unclear now stops with a message naming the file,
flag or field (or prints a note), and loses nothing.

    1  predict --output = --input                      refused before the model is loaded
    2  a head used for another task                    refused, naming the architecture and its tasks
    3  predict truncating a long text                  a note with the counts
    4  attribute --target 2:zebra (not in the vocab)   refused, naming the token
    7  vocab.txt far shorter than vocab_size           a warning naming both sizes; longer: refused
    10 id2label keys {0, 5}                            refused, naming config.json
    11 --output a directory                            refused before predicting
    12 {"text": 5}                                     a type error with the line number
    13 attribute --max_seq_length 1                    a one-line usage error
"""
import json
import os

import numpy as np
import pytest

import npbert
from npbert.cli import main
from reliability_helpers import VOCAB, config, write_vocab

LABELS = {0: "negative", 1: "positive"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("second-round")
    made = {}
    for name, model in (
            ("clf", npbert.BertForSequenceClassification(config(id2label=LABELS), seed=1)),
            ("tagger", npbert.BertForTokenClassification(config(id2label={0: "O", 1: "B-PER", 2: "I-PER"}), seed=2)),
            ("mlm", npbert.BertForMaskedLM(config(), seed=3)),
            ("base", npbert.BertModel(config(), seed=4))):
        d = str(root / name)
        model.save_pretrained(d)
        write_vocab(d)
        made[name] = d
    return made


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and "--debug" not in lines[0], err
    return lines[0]


# ---- 1, 11: the output is checked before anything runs ---------------------------------------------
def test_predict_refuses_to_write_over_its_input(ckpts, tmp_path, capsys):
    data = tmp_path / "data.jsonl"
    original = '{"text": "the king", "label": "positive"}\n{"text": "sweet rose", "label": "negative"}\n'
    data.write_text(original)
    for output in (str(data), str(tmp_path / "." / "data.jsonl")):
        status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(data), "--output", output)
        assert status == 2 and "is the --input file" in one_error_line(err)
        assert "predict: text-classification" not in err           # refused before predicting
    os.link(data, tmp_path / "hard.jsonl")                            # the same file under another name
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(data), "--output",
                         str(tmp_path / "hard.jsonl"))
    assert status == 2 and "is the --input file" in err
    assert data.read_text() == original


def test_predict_output_naming_a_directory_fails_before_predicting(ckpts, tmp_path, capsys):
    data = tmp_path / "in.txt"
    data.write_text("the king\n")
    (tmp_path / "out").mkdir()
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(data), "--output",
                         str(tmp_path / "out"))
    line = one_error_line(err)
    assert status == 2 and "is a directory" in line and os.path.join(str(tmp_path / "out"), "predictions.jsonl") in line
    assert "predict: text-classification" not in err and os.listdir(tmp_path / "out") == []


# ---- 12: a text that is not a string ------------------------------------------------------------------
@pytest.mark.parametrize("value,shown", [(5, "int 5"), (["the", "king"], "list"), (None, "null"),
                                         ({"a": 1}, "dict")])
def test_a_non_string_text_is_a_type_error_with_its_line(ckpts, tmp_path, capsys, value, shown):
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "the king"}\n' + json.dumps({"text": value}) + "\n")
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(data), "--output",
                         str(tmp_path / "out.jsonl"))
    line = one_error_line(err)
    assert status == 1 and f"{data}:2: the text (text) must be a string, got {shown}" in line
    assert not (tmp_path / "out.jsonl").exists()


def test_an_empty_text_is_still_called_empty(ckpts, tmp_path, capsys):
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "  "}\n')
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(data), "--output",
                         str(tmp_path / "out.jsonl"))
    assert status == 1 and f"{data}:1: the text (text) is empty" in err


# ---- 2: a head is used for the task it was trained for ------------------------------------------------
@pytest.mark.parametrize("model,task,trained", [("clf", "ner", "text-classification"),
                                                ("clf", "token-classification", "text-classification"),
                                                ("tagger", "text-classification", "token-classification"),
                                                ("mlm", "sentiment-analysis", "fill-mask")])
def test_predict_refuses_a_head_trained_for_another_task(ckpts, tmp_path, capsys, model, task, trained):
    data = tmp_path / "in.txt"
    data.write_text("the king speaks\n")
    status, _, err = run(capsys, "predict", "--model", ckpts[model], "--task", task, "--input", str(data),
                         "--output", str(tmp_path / "out.jsonl"))
    line = one_error_line(err)
    arch = {"clf": "BertForSequenceClassification", "tagger": "BertForTokenClassification",
            "mlm": "BertForMaskedLM"}[model]
    assert status == 2 and f"is a {arch}" in line and f"trained for {trained}" in line
    assert f"--task {trained}" in line and "--ignore_architectures" in line
    assert not (tmp_path / "out.jsonl").exists()


def test_predict_runs_a_mismatched_head_when_asked(ckpts, tmp_path, capsys):
    data = tmp_path / "in.txt"
    data.write_text("the king speaks\n")
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--task", "ner", "--ignore_architectures",
                         "--input", str(data), "--output", str(tmp_path / "out.jsonl"))
    assert status == 0, err
    assert json.loads((tmp_path / "out.jsonl").read_text())["text"] == "the king speaks"


@pytest.mark.parametrize("model,task", [("clf", "ner"), ("clf", "token-classification"),
                                        ("tagger", "text-classification"), ("mlm", "question-answering"),
                                        ("tagger", "fill-mask")])
def test_pipeline_refuses_a_head_trained_for_another_task(ckpts, model, task):
    with pytest.raises(ValueError, match="config.json's architectures.*trained for"):
        npbert.pipeline(task, model=ckpts[model])
    # the same model given as an object: its class says what it is
    loaded = npbert.pipeline(None, model=ckpts[model]).model
    with pytest.raises(ValueError, match=f"the model \\({type(loaded).__name__}\\)"):
        npbert.pipeline(task, model=loaded, tokenizer=ckpts[model])


def test_pipeline_keeps_todays_behaviour_where_nothing_says_otherwise(ckpts, tmp_path):
    # every checkpoint serves feature-extraction; a BertModel serves any task with a fresh head and
    # the loader's "newly initialized" warning; a config with no architectures is not checked
    for name in ("clf", "tagger", "mlm"):
        npbert.pipeline("feature-extraction", model=ckpts[name])
    with pytest.warns(UserWarning, match="newly initialized"):
        npbert.pipeline("ner", model=ckpts["base"])
    bare = tmp_path / "bare"
    npbert.BertForSequenceClassification(config(id2label=LABELS), seed=1).save_pretrained(str(bare))
    write_vocab(str(bare))
    stored = json.loads((bare / "config.json").read_text())
    del stored["architectures"]
    (bare / "config.json").write_text(json.dumps(stored))
    npbert.pipeline("ner", model=str(bare))
    # and the matching task, and the override
    assert npbert.pipeline("ner", model=ckpts["tagger"])("the king") is not None
    npbert.pipeline("ner", model=ckpts["clf"], ignore_architectures=True)


# ---- 3: truncation in predict is reported --------------------------------------------------------------
def test_predict_says_how_many_texts_it_cut_and_by_how_much(ckpts, tmp_path, capsys):
    long_text = " ".join(["king"] * 50)                      # 52 tokens with [CLS] and [SEP]
    data = tmp_path / "in.txt"
    data.write_text(f"the king\n{long_text}\nsweet rose\n{long_text} queen\n")
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(data), "--output",
                         str(tmp_path / "out.jsonl"), "--max_seq_length", "16")
    assert status == 0, err
    # (52 - 16) + (53 - 16) tokens dropped, from the examples on lines 2 and 4
    assert "note: 2 of 4 examples were longer than --max_seq_length 16 tokens" in err
    assert "73 tokens dropped in all; the longest had 53; examples 2, 4" in err
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(data), "--output",
                         str(tmp_path / "out2.jsonl"))            # the model's limit, 32: still cut
    assert "note: 2 of 4 examples" in err
    short = tmp_path / "short.txt"
    short.write_text("the king\nsweet rose\n")
    status, _, err = run(capsys, "predict", "--model", ckpts["clf"], "--input", str(short), "--output",
                         str(tmp_path / "out3.jsonl"))
    assert status == 0 and "were longer than" not in err


# ---- 4, 13: attribute -----------------------------------------------------------------------------------
def test_attribute_refuses_a_target_token_outside_the_vocabulary(ckpts, tmp_path, capsys):
    status, _, err = run(capsys, "attribute", "--model", ckpts["mlm"], "--text", "the [MASK] speaks", "--target",
                         "2:zebra", "--method", "saliency", "--output", str(tmp_path / "a.html"))
    line = one_error_line(err)
    assert status == 2 and "'zebra' is not in the model's vocabulary" in line and "[UNK]" in line
    assert not (tmp_path / "a.html").exists()
    # a word the vocabulary splits: its pieces are named
    status, _, err = run(capsys, "attribute", "--model", ckpts["mlm"], "--text", "the [MASK] speaks", "--target",
                         "2:kings", "--method", "saliency", "--output", str(tmp_path / "a.html"))
    assert status == 2 and "['king', '##s']" in err
    # a token of the vocabulary, by name or id, is attributed
    for target in ("2:queen", f"2:{VOCAB.index('queen')}"):
        status, out, err = run(capsys, "attribute", "--model", ckpts["mlm"], "--text", "the [MASK] speaks",
                               "--target", target, "--method", "saliency", "--output", str(tmp_path / "a.html"))
        assert status == 0 and "token 'queen' at position 2" in out, err


@pytest.mark.parametrize("n,pair", [("1", False), ("2", False), ("4", True)])
def test_attribute_too_short_max_seq_length_is_a_usage_error(ckpts, tmp_path, capsys, n, pair):
    extra = ["--text_pair", "sweet rose"] if pair else []
    status, _, err = run(capsys, "attribute", "--model", ckpts["clf"], "--text", "the king", *extra,
                         "--max_seq_length", n, "--output", str(tmp_path / "a.html"))
    line = one_error_line(err)
    assert status == 2 and f"--max_seq_length {n}: too short" in line and f"give {5 if pair else 3} or more" in line


# ---- 7: a vocabulary that does not fit the model ------------------------------------------------------
def test_a_much_shorter_vocabulary_is_a_warning_naming_both_sizes(tmp_path, capsys):
    d = tmp_path / "m"
    npbert.BertModel(config(vocab_size=len(VOCAB) + 200), seed=0).save_pretrained(str(d))
    write_vocab(str(d))
    status, out, err = run(capsys, "embed", "--model", str(d), "the king", "sweet rose")
    assert status == 0, err
    assert f"warning: --model {d}: the tokenizer has {len(VOCAB)} tokens but the model's vocab_size is " \
           f"{len(VOCAB) + 200} (200 embedding rows no token reaches)" in err
    # a vocab_size rounded up past the vocabulary (here by 100 rows) is common: no warning
    npbert.BertModel(config(vocab_size=len(VOCAB) + 100), seed=0).save_pretrained(str(d))
    status, out, err = run(capsys, "embed", "--model", str(d), "the king", "sweet rose")
    assert status == 0 and "warning" not in err


def test_a_vocabulary_longer_than_the_embedding_table_is_refused(tmp_path, capsys):
    d = tmp_path / "m"
    npbert.BertModel(config(vocab_size=len(VOCAB) - 4), seed=0).save_pretrained(str(d))
    write_vocab(str(d))
    status, _, err = run(capsys, "embed", "--model", str(d), "the king", "sweet rose")
    line = one_error_line(err)
    assert status == 1 and f"the tokenizer has {len(VOCAB)} tokens but the model's vocab_size is {len(VOCAB) - 4}" \
        in line


# ---- 10: id2label keys ----------------------------------------------------------------------------------
@pytest.mark.parametrize("id2label,message", [({"0": "a", "5": "b"}, "label ids 0..1 .*got \\[0, 5\\]"),
                                              ({"1": "a", "2": "b"}, "got \\[1, 2\\]"),
                                              ({"zero": "a"}, "key 'zero' is not an integer")])
def test_id2label_keys_must_be_0_to_n_minus_1(ckpts, tmp_path, capsys, id2label, message):
    d = tmp_path / "m"
    npbert.BertForSequenceClassification(config(id2label=LABELS), seed=1).save_pretrained(str(d))
    write_vocab(str(d))
    stored = json.loads((d / "config.json").read_text())
    stored["id2label"] = id2label
    stored.pop("label2id")
    (d / "config.json").write_text(json.dumps(stored))
    with pytest.raises(ValueError, match=f"{d / 'config.json'}: id2label .*{message}"):
        npbert.BertConfig.from_pretrained(str(d))
    data = tmp_path / "in.txt"
    data.write_text("the king\n")
    status, _, err = run(capsys, "predict", "--model", str(d), "--input", str(data), "--output",
                         str(tmp_path / "out.jsonl"))
    line = one_error_line(err)
    assert status == 1 and "config.json" in line and "id2label" in line and "KeyError" not in line
    # keys in any order (JSON keeps them as strings) are fine
    assert npbert.BertConfig(id2label={"1": "b", "0": "a"}).id2label == {0: "a", 1: "b"}


# ---- 6: a plain save_pretrained folder carries its weights' SHA-256 ------------------------------------
def _safetensors_header(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    return raw, n, json.loads(raw[8:8 + n])


def test_save_pretrained_writes_a_manifest_that_from_pretrained_checks(tmp_path):
    from npbert.io import CheckpointError
    d = tmp_path / "m"
    model = npbert.BertForSequenceClassification(config(id2label=LABELS), seed=1)
    model.save_pretrained(str(d))
    manifest = json.loads((d / "manifest.json").read_text())
    assert set(manifest["files"]) == {"model.safetensors"}            # config.json may be edited by hand
    weights = d / "model.safetensors"
    good = weights.read_bytes()
    # one flipped mantissa bit: a finite weight, a little off; only the hash sees it
    raw, n, header = _safetensors_header(weights)
    start = 8 + n + header["classifier.weight"]["data_offsets"][0]
    flipped = bytearray(raw)
    flipped[start] ^= 0x01
    weights.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="model.safetensors: SHA-256 .* differs.*delete .*manifest.json"):
        npbert.BertForSequenceClassification.from_pretrained(str(d))
    # two same-shape tensors' names swapped in the header: every check on shapes and values passes
    a, b = "bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.0.attention.self.key.weight"
    header[a], header[b] = header[b], header[a]
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (n - len(text))
    assert len(text) == n
    weights.write_bytes(good[:8] + text + good[8 + n:])
    with pytest.raises(CheckpointError, match="SHA-256"):
        npbert.BertForSequenceClassification.from_pretrained(str(d))
    # without the manifest the folder loads as before (what a folder from transformers is)
    os.remove(d / "manifest.json")
    swapped = npbert.BertForSequenceClassification.from_pretrained(str(d))
    assert np.array_equal(swapped.state_dict()[a], model.state_dict()[b])
    # the good bytes back: loads, and equals the saved model
    weights.write_bytes(good)
    model.save_pretrained(str(d))
    again = npbert.BertForSequenceClassification.from_pretrained(str(d))
    assert all(np.array_equal(v, model.state_dict()[k]) for k, v in again.state_dict().items())


def test_a_manifest_in_the_folder_keeps_entries_save_pretrained_does_not_replace(tmp_path):
    from npbert.io import write_manifest
    d = tmp_path / "m"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    write_manifest(str(d))
    npbert.BertModel(config(), seed=0).save_pretrained(str(d))
    assert set(json.loads((d / "manifest.json").read_text())["files"]) == {"notes.txt", "model.safetensors"}


def test_transformers_loads_a_folder_with_the_manifest(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    d = tmp_path / "m"
    model = npbert.BertForSequenceClassification(config(id2label=LABELS), seed=1)
    model.save_pretrained(str(d))
    assert (d / "manifest.json").is_file()
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(d))
    for k, v in model.state_dict().items():
        assert np.array_equal(theirs.state_dict()[k].numpy(), v), k
    assert isinstance(theirs.state_dict()[k], torch.Tensor)


# ---- 14: a config.json that is not UTF-8 names the file --------------------------------------------
def test_a_config_that_is_not_utf8_names_the_file(ckpts, tmp_path, capsys):
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(ckpts["clf"], bad)
    (bad / "config.json").write_bytes(b"\xff\xfe{\"a\": 1}")
    with pytest.raises(ValueError, match=r"config\.json: not a JSON config: byte 0 is not UTF-8 \(0xff\)"):
        npbert.BertConfig.from_pretrained(str(bad))
    with pytest.raises(ValueError, match="config.json: not a JSON config"):
        npbert.BertForSequenceClassification.from_pretrained(str(bad))
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "fine"}\n', encoding="utf-8")
    status, _, err = run(capsys, "predict", "--model", str(bad), "--input", str(data), "--output",
                         str(tmp_path / "out.jsonl"))
    assert status != 0
    line = one_error_line(err)
    assert "config.json" in line and "UTF-8" in line and "codec" not in line
