"""The command line protects the user (issue 27): every error a newcomer met is one line on
stderr naming what was wrong (the flag, the file and line, the head), with its exit status;
--debug gives the traceback; every flag has help with its default; a fine-tuned model predicts
without its training file; the demo's 64-position model fine-tunes with the default length.

The commands run in process through npbert.cli.main (stderr captured), except where the whole
process is the point (--debug, the exit status of `python -m npbert`)."""
import json
import os
import subprocess
import sys

import pytest

import npbert
from npbert import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = ("the a of and to in is it was he she for on with his her they at be this from by not but all were when "
         "we there an which their said if will each about how up out them then so would into has two like him "
         "time could no make than first been who now people my made over did down only way find may long day "
         "fine good bad cold night bright sun dark storm joy grief kind cruel paris france london john smith "
         "went lived father mother house").split()
POS = ["a fine and good day", "the bright sun", "joy in the house", "a kind father"]
NEG = ["a cold and dark night", "the dark storm", "grief in the house", "a cruel night"]


def run(argv, capsys):
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def error_line(err):
    """The one `npbert ...: error: ...` line of stderr: exactly one, the last line, no traceback
    (the lines before it are what the command said while working: notes, what it loaded)."""
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, f"stderr:\n{err}"
    return errors[0]


def save_tokenizer_and(model, directory):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS)) + list(".,!?") + ["##s", "##ed"]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    model.save_pretrained(directory)
    npbert.BertTokenizer(os.path.join(directory, "vocab.txt")).save_pretrained(directory)
    return directory


def config(**kw):
    return npbert.BertConfig(**{**dict(vocab_size=len(WORDS) + 11, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64), **kw})


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    n_vocab = len(sorted(set(WORDS))) + 11
    c = dict(vocab_size=n_vocab)
    made = {
        "base": save_tokenizer_and(npbert.BertModel(config(**c), seed=0), str(root / "base")),
        "mlm": save_tokenizer_and(npbert.BertForMaskedLM(config(**c), seed=1), str(root / "mlm")),
        "clf": save_tokenizer_and(npbert.BertForSequenceClassification(
            config(**c, id2label={0: "negative", 1: "positive"}, initializer_range=0.3), seed=2), str(root / "clf")),
        "ner": save_tokenizer_and(npbert.BertForTokenClassification(
            config(**c, id2label={0: "B-LOC", 1: "B-PER", 2: "I-PER", 3: "O"}, initializer_range=0.3), seed=3),
            str(root / "ner")),
    }
    # a config that says 1 layer over a 2-layer checkpoint
    bad = str(root / "one_layer_config")
    save_tokenizer_and(npbert.BertForMaskedLM(config(**c), seed=1), bad)
    cfg = json.load(open(os.path.join(bad, "config.json")))
    cfg["num_hidden_layers"] = 1
    json.dump(cfg, open(os.path.join(bad, "config.json"), "w"))
    made["one_layer_config"] = bad
    return made


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    rows = [(s, "positive") for s in POS] + [(s, "negative") for s in NEG]
    (root / "train.csv").write_text("sentence,label\n" + "".join(f"{s},{l}\n" for s, l in rows))
    (root / "test.csv").write_text("id,sentence\n" + "".join(f"t{k},{s}\n" for k, (s, _) in enumerate(rows[::3])))
    (root / "bad.csv").write_text("sentence,label\na fine day,positive\ntoo,many,fields\n")
    (root / "test.conll").write_text("John\nwent\nto\nParis\n\nthe\nstorm\n")
    (root / "lines.txt").write_text("john went to paris\nthe dark storm\n")
    return root


# ---- the errors of the issue, one line each ---------------------------------------------------------

def test_fill_mask_refuses_a_checkpoint_without_a_trained_mlm_head(models, capsys):
    for name in ("base", "clf"):
        status, out, err = run(["fill-mask", "--model", models[name], "the [MASK] of france"], capsys)
        assert status == 2 and out == ""                     # a model of the wrong kind: a usage error
        line = error_line(err)
        assert "--model" in line and "masked-LM head" in line and models[name] in line


def test_fill_mask_with_an_mlm_head_answers_and_shows_the_loading_notes(models, capsys):
    status, out, err = run(["fill-mask", "--model", models["mlm"], "the [MASK] of france", "--top_k", "2"], capsys)
    assert status == 0 and len([l for l in out.splitlines() if l.startswith("  0.")]) == 2
    status, out, err = run(["fill-mask", "--model", models["one_layer_config"], "the [MASK] of france"], capsys)
    # a config that disagrees with the weights' layers: the load check refuses it, in one line naming both
    assert status == 1, err
    line = error_line(err)
    assert "holds 2 encoder layers" in line and "num_hidden_layers=1" in line, err


def test_finetune_predict_only_reads_the_label_set_from_the_model(models, data, tmp_path, capsys):
    out_dir = str(tmp_path / "pred")
    status, out, err = run(["finetune", "--task", "sequence-classification", "--model_name_or_path", models["clf"],
                            "--test_file", str(data / "test.csv"), "--output_dir", out_dir], capsys)
    assert status == 0, err
    records = [json.loads(l) for l in open(os.path.join(out_dir, "predictions.jsonl"))]
    assert [r["id"] for r in records] == ["t0", "t1", "t2"]
    assert all(r["label"] in ("positive", "negative") and r["scores"][0]["label"] == r["label"] for r in records)
    # the same with --do_predict, and for a base model (no label set) a one-line error naming --train_file
    status, _, err = run(["finetune", "--task", "sequence-classification", "--model_name_or_path", models["base"],
                          "--do_predict", "--test_file", str(data / "test.csv"), "--output_dir", out_dir], capsys)
    assert status == 1 and "--train_file" in error_line(err) and "label set" in error_line(err)
    status, _, err = run(["finetune", "--task", "token-classification", "--model_name_or_path", models["ner"],
                          "--do_predict", "--test_file", str(data / "test.conll"), "--output_dir", out_dir], capsys)
    assert status == 0, err
    records = [json.loads(l) for l in open(os.path.join(out_dir, "predictions.jsonl"))]
    assert [r["words"] for r in records] == [["John", "went", "to", "Paris"], ["the", "storm"]]
    assert all(t in ("B-LOC", "B-PER", "I-PER", "O") for r in records for t in r["tags"])


def test_do_flags_need_their_files(models, data, tmp_path, capsys):
    for flag, needs in (("--do_train", "--train_file"), ("--do_eval", "--validation_file"),
                        ("--do_predict", "--test_file")):
        status, _, err = run(["finetune", "--task", "sequence-classification", "--model_name_or_path", models["clf"],
                              flag, "--output_dir", str(tmp_path / "x")], capsys)
        assert status == 2 and f"{flag} needs {needs}" in error_line(err)


def test_max_seq_length_is_checked_against_the_model(models, data, tmp_path, capsys):
    status, _, err = run(["finetune", "--task", "sequence-classification", "--model_name_or_path", models["base"],
                          "--train_file", str(data / "train.csv"), "--output_dir", str(tmp_path / "o"),
                          "--max_seq_length", "100000"], capsys)
    line = error_line(err)
    assert status == 2 and "--max_seq_length 100000" in line and "max_position_embeddings is 64" in line
    status, _, err = run(["predict", "--model", models["clf"], "--input", str(data / "lines.txt"),
                          "--output", str(tmp_path / "p.jsonl"), "--max_seq_length", "65"], capsys)
    assert status == 2 and "--max_seq_length 65" in error_line(err)


def test_the_demo_sized_model_fine_tunes_with_the_default_length(models, data, tmp_path, capsys):
    """A 64-position model (the demo's) and the default max_seq_length 128: the model's limit is
    used, with a note saying so, and the run completes (it ended in a traceback before)."""
    out_dir = str(tmp_path / "demo")
    status, out, err = run(["finetune", "--task", "sequence-classification", "--model_name_or_path", models["base"],
                            "--train_file", str(data / "train.csv"), "--validation_file", str(data / "train.csv"),
                            "--output_dir", out_dir, "--num_train_epochs", "2", "--plot", "false"], capsys)
    assert status == 0, err
    assert "using --max_seq_length 64 instead of the default 128" in err
    # the final evaluation: printed by the Trainer at the last step, and not a second or third time
    metric_lines = [l for l in (out + err).splitlines() if "eval_accuracy" in l]
    assert len(metric_lines) == 2, metric_lines                    # epoch 1 and epoch 2, once each
    assert "is the final one" in out
    results = json.load(open(os.path.join(out_dir, "eval_results.json")))
    assert results["eval_samples"] == 8 and "eval_accuracy" in results
    assert "the progress line's loss is the current batch's" in err


def test_a_bad_data_line_is_named(models, data, tmp_path, capsys):
    status, _, err = run(["finetune", "--task", "sequence-classification", "--model_name_or_path", models["base"],
                          "--train_file", str(data / "bad.csv"), "--output_dir", str(tmp_path / "o")], capsys)
    assert status == 1 and "bad.csv:3" in error_line(err)


def test_usage_errors_are_one_line_with_status_2(models, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["finetune", "--task", "sequence-classification", "--model_name_or_path", models["base"],
                  "--output_dir", "x", "--max_seq_length", "abc"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--max_seq_length" in error_line(err) and "usage:" not in err


def test_predict_without_a_task_in_the_config_says_to_give_one(models, data, tmp_path, capsys):
    status, _, err = run(["predict", "--model", models["base"], "--input", str(data / "lines.txt"),
                          "--output", str(tmp_path / "p.jsonl")], capsys)
    assert status == 2 and "--task" in error_line(err)
    status, _, err = run(["predict", "--model", models["base"], "--task", "text-classification", "--input",
                          str(data / "lines.txt"), "--output", str(tmp_path / "p.jsonl")], capsys)
    assert status == 2 and "classifier." in error_line(err)           # a random head is refused
    status, _, err = run(["predict", "--model", models["clf"], "--input", str(data / "nothing.txt"),
                          "--output", str(tmp_path / "p.jsonl")], capsys)
    assert status == 2 and "--input" in error_line(err) and "nothing.txt" in error_line(err)


def test_embed_says_its_pooling_and_what_it_leaves_unused(models, capsys):
    status, out, err = run(["embed", "--model", models["clf"], "a fine day", "a cold night"], capsys)
    assert status == 0 and "cosine similarity" in out
    assert "mean of the token vectors" in err and "L2-normalised" in err
    assert "classifier.weight" in err                       # the head it does not use is named
    status, out, err = run(["embed", "--model", models["base"], "--pooling", "cls", "a fine day", "x"], capsys)
    assert status == 0 and "the [CLS] vector" in err


def test_debug_shows_the_traceback():
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    plain = subprocess.run([sys.executable, "-m", "npbert", "fill-mask", "--model", "/no/such/dir", "x [MASK]"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert plain.returncode == 2 and len(plain.stderr.strip().splitlines()) == 1 and "Traceback" not in plain.stderr
    debug = subprocess.run([sys.executable, "-m", "npbert", "fill-mask", "--model", "/no/such/dir", "x [MASK]",
                            "--debug"], capture_output=True, text=True, env=env, timeout=120)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "UsageError" in debug.stderr


def test_an_unforeseen_exception_is_one_line_too(monkeypatch, models, capsys):
    from npbert.cli import embed
    monkeypatch.setattr(embed, "embed", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom\nsecond line")))
    status, _, err = run(["embed", "--model", models["base"], "x"], capsys)
    assert status == 1 and "RuntimeError: boom; second line" in error_line(err) and "--debug" in error_line(err)


# ---- help pages ------------------------------------------------------------------------------------

def subcommand_parsers():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices


def test_every_flag_has_help_with_its_default():
    import argparse
    missing, no_default = [], []
    for name, p in subcommand_parsers().items():
        formatter = p._get_formatter()
        for action in p._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            if not (action.help or "").strip():
                missing.append(f"{name} {action.option_strings[0]}")
                continue
            shown = formatter._get_help_string(action) % {"default": action.default, "prog": name}
            if action.default not in (None, False) and "default" not in shown.lower():
                no_default.append(f"{name} {action.option_strings[0]}")
    assert not missing, f"flags without help: {missing}"
    assert not no_default, f"flags whose help does not show the default: {no_default}"


def test_finetune_help_lists_the_formats_and_columns(capsys):
    with pytest.raises(SystemExit):
        cli.main(["finetune", "--help"])
    out = " ".join(capsys.readouterr().out.split())          # wherever the help's lines wrap
    for needle in (".csv", ".tsv", ".jsonl", "CoNLL", "SQuAD", "sentence1", "label_desc", "--do_predict",
                   "question-answering 384", "token-classification 0.0003"):
        assert needle in out, needle
