"""`npbert attribute` and `npbert head-importance` on tiny checkpoints, in process (npbert.cli.main):
what they print and write equals the library's result on the same input, and every mistake is
one line naming it, exit status 2 when what was typed is wrong (a flag's value, a model of the
wrong kind for the command), 1 when a file's contents are (docs/troubleshooting.md)."""
import json
import os

import numpy as np
import pytest

import npbert
import npbert.interpret as ni
from npbert.cli import main

from interpret.interpret_helpers import tiny_checkpoint

LABELS = {0: "negative", 1: "positive"}


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("cls"), seed=2, num_labels=2, id2label=LABELS,
                           dtype=np.float32)


def printed_scores(out):
    """The per-token lines '+0.123456  token' of the command's output."""
    return [float(line.split()[0]) for line in out.splitlines() if line[:1] in "+-" and "  " in line]


@pytest.mark.parametrize("method", ["ig", "saliency", "input_x_gradient", "conductance", "rollout", "flow",
                                    "grad_rollout"])
def test_every_method_writes_a_standalone_page(classifier_dir, tmp_path, capsys, method):
    out_file = tmp_path / "a.html"
    status = main(["attribute", "--model", classifier_dir, "--text", "the cat is on the mat", "--method", method,
                   "--n_steps", "4", "--output", str(out_file)])
    out, err = capsys.readouterr()
    assert status == 0, err
    page = out_file.read_text(encoding="utf-8")
    assert "cat" in page and "http" not in page and "<script" not in page
    scores = printed_scores(out)
    assert len(scores) == 8                                      # [CLS] the cat is on the mat [SEP]
    if method == "ig":
        assert "integration points" in err                       # progress on stderr
        model = npbert.BertForSequenceClassification.from_pretrained(classifier_dir).eval()
        tok = npbert.BertTokenizer.from_pretrained(classifier_dir)
        enc = tok("the cat is on the mat", return_tensors="np", return_special_tokens_mask=True)
        predicted = int(np.argmax(model(input_ids=enc["input_ids"]).logits[0]))
        assert f"label {LABELS[predicted]}" in out
        expected = ni.integrated_gradients(model, enc, predicted, n_steps=4, internal_batch_size=10)
        assert np.allclose(scores, expected.token_attributions[0], atol=1e-6)   # printed to 6 decimals


def test_a_named_target_and_a_png(classifier_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    status = main(["attribute", "--model", classifier_dir, "--text", "hello world", "--target", "positive",
                   "--method", "saliency", "--output", str(tmp_path / "s.png")])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "label positive (logit 1)" in out
    with open(tmp_path / "s.png", "rb") as f:
        assert f.read(4) == b"\x89PNG"


@pytest.mark.parametrize("flags,message", [
    (["--target", "7"], "--target 7: out of range, the model has labels 0..1"),
    (["--target", "neutral"], "--target 'neutral': not a label of this model (negative, positive) nor an index"),
    (["--layer", "bert.nope"], "layer 'bert.nope' does not exist in BertForSequenceClassification"),
    (["--integration", "simpson"], "unknown integration method 'simpson'"),
    (["--method", "conductance", "--layer", "bert.encoder.layer.5"], "layer 'bert.encoder.layer.5' does not exist"),
    (["--max_seq_length", "33"], "--max_seq_length 33 is more than the model"),     # the fixture's model takes 32
])
def test_mistakes_are_one_line(classifier_dir, tmp_path, capsys, flags, message):
    status = main(["attribute", "--model", classifier_dir, "--text", "hello world", "--n_steps", "2",
                   "--output", str(tmp_path / "a.html")] + flags)
    _, err = capsys.readouterr()
    assert status == 2
    assert err.count("\n") <= 1 or all("ETA" in line for line in err.splitlines()[:-1]), err
    last = err.strip().splitlines()[-1]
    assert last.startswith("npbert attribute: error:") and message in last, last
    assert not (tmp_path / "a.html").exists()


def test_usage_errors(classifier_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["attribute", "--model", classifier_dir, "--text", "x", "--method", "lime", "--output", "a.html"])
    assert e.value.code == 2 and "invalid choice: 'lime'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["attribute", "--model", classifier_dir, "--text", "x", "--n_steps", "0", "--output", "a.html"])
    assert e.value.code == 2 and "must be a positive integer, got '0'" in capsys.readouterr().err
    assert main(["attribute", "--model", classifier_dir, "--text", "x", "--output", str(tmp_path / "a.txt")]) == 2
    assert "give a .png or .html file" in capsys.readouterr().err


def test_a_base_model_can_be_rolled_out_not_attributed(tmp_path, capsys):
    directory = tiny_checkpoint(tmp_path / "base", "BertModel", seed=1)
    assert main(["attribute", "--model", directory, "--text", "the cat", "--method", "rollout",
                 "--output", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    assert main(["attribute", "--model", directory, "--text", "the cat", "--output", str(tmp_path / "r.html")]) == 2
    assert "predicts nothing to attribute" in capsys.readouterr().err


def test_question_answering_targets(tmp_path, capsys):
    directory = tiny_checkpoint(tmp_path / "qa", "BertForQuestionAnswering", seed=3)
    assert main(["attribute", "--model", directory, "--text", "where is the cat", "--text_pair", "on the mat",
                 "--target", "end:7", "--method", "saliency", "--output", str(tmp_path / "q.html")]) == 0
    assert "end logit at position 7" in capsys.readouterr().out
    assert main(["attribute", "--model", directory, "--text", "where", "--text_pair", "here", "--target", "end:40",
                 "--output", str(tmp_path / "q.html")]) == 2
    assert "position 40 is out of range, the input has 5 tokens" in capsys.readouterr().err


def write_csv(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write("sentence,label\n" + "".join(f"{s},{label}\n" for s, label in rows))


ROWS = [("the cat is on the mat", "positive"), ("hello world", "negative"), ("a dog", "positive"),
        ("the quick brown fox", "negative"), ("this model", "positive")]


def test_head_importance_writes_what_the_library_computes(classifier_dir, tmp_path, capsys):
    data = tmp_path / "dev.csv"
    write_csv(data, ROWS)
    out_dir = tmp_path / "out"
    status = main(["head-importance", "--model", classifier_dir, "--validation_file", str(data),
                   "--per_device_eval_batch_size", "2", "--pruning_points", "3", "--output_dir", str(out_dir)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "batch 3/3" in err and "ETA" in err
    result = json.loads((out_dir / "head_importance.json").read_text())
    model = npbert.BertForSequenceClassification.from_pretrained(classifier_dir).eval()
    tok = npbert.BertTokenizer.from_pretrained(classifier_dir)
    batches = []
    for i in range(0, 5, 2):
        part = ROWS[i:i + 2]
        enc = tok([s for s, _ in part], padding=True, return_tensors="np")
        batches.append({**{k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")},
                        "labels": np.array([1 if label == "positive" else 0 for _, label in part])})
    expected = ni.head_importance(model, batches)
    assert np.allclose(result["importance"], expected.importance, rtol=1e-5, atol=1e-7)   # float32 model
    assert result["tokens"] == expected.tokens
    assert result["pruning_curve"]["masked"] == [0, 4, 8]
    if os.path.exists(out_dir / "head_importance.png"):
        assert (out_dir / "pruning_curve.png").exists()


def test_head_importance_mistakes(classifier_dir, tmp_path, capsys):
    data = tmp_path / "dev.csv"
    write_csv(data, ROWS[:2] + [("odd one", "neutral")])
    assert main(["head-importance", "--model", classifier_dir, "--validation_file", str(data)]) == 1
    err = capsys.readouterr().err
    assert f"{data}:4: label 'neutral' is not one of the model's (negative, positive)" in err
    with open(data, "w") as f:
        f.write("text,stars\nfine,5\n")
    assert main(["head-importance", "--model", classifier_dir, "--validation_file", str(data)]) == 1
    assert "no label column found" in capsys.readouterr().err
    base = tiny_checkpoint(tmp_path / "base", "BertModel")
    assert main(["head-importance", "--model", base, "--validation_file", str(data)]) == 2    # the wrong kind of model
    assert "needs a BertForSequenceClassification checkpoint, this one is BertModel" in capsys.readouterr().err
