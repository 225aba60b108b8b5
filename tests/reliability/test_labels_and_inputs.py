"""Explicit label sets (item 4) and input files that fail with a message naming file and line
(item 8): non-UTF-8 text, a 1 MB CSV field, a pre-training .h5 with next_sentence_labels 5."""
import json
import os

import numpy as np
import pytest

from npbert.cli import main
from npbert.tasks.labels import label_set
from npbert.tasks.readers import read_conll, read_table
from reliability_helpers import base_model, pretraining_h5, sentences, write_csv


def rows(*values):
    return [(k + 2, v) for k, v in enumerate(values)]           # line 1 is the header


# ---- the rule ---------------------------------------------------------------------------------------
def test_non_integer_numbers_are_regression_not_classes():
    s = label_set(rows("0.5", "1.25", "1.5E-4", "2.0"), "f.csv")
    assert s.problem_type == "regression" and s.names is None
    assert [s.encode(v, "f.csv", 2) for v in ("0.5", "1.5E-4", "+2.0")] == [0.5, 1.5e-4, 2.0]


def test_integers_are_classes_and_one_value_written_four_ways_is_one_class():
    s = label_set(rows(1, "1", 1.0, "+1", " 1 ", "1.0", 0, "0"), "f.jsonl")
    assert s.problem_type == "single_label_classification" and s.names == ["0", "1"]
    assert {s.encode(v, "f", 3) for v in (1, "1", 1.0, "+1", "1.0")} == {1}


def test_numbers_sort_by_value_as_run_glue():
    assert label_set(rows("10", "9", "2", "10"), "f").names == ["2", "9", "10"]


@pytest.mark.parametrize("values,line,message", [
    (("0", "", "1"), 3, "the label is empty"),
    (("0", "  ", "1"), 3, "the label is empty"),
    (("0", None, "1"), 3, "empty \\(null\\)"),
    (("0", "nan", "1"), 3, "'nan' is not a finite float32 number"),
    (("0.5", "inf", "1"), 3, "'inf' is not a finite float32 number"),
    ((0.5, float("nan")), 3, "nan is not a finite float32 number"),
    (("0", "1e39", "1"), 3, "'1e39' is not a finite float32 number"),
    (("0", "1", {"a": 1}), 4, "is a dict"),
])
def test_empty_and_non_finite_labels_name_the_line(values, line, message):
    with pytest.raises(ValueError, match=f"^f.csv:{line}: .*{message}"):
        label_set(rows(*values), "f.csv")


@pytest.mark.parametrize("values,message", [
    (("0", "1", "-", "2"), "numbers \\(f.csv:2: '0'\\) and names \\(f.csv:4: '-'\\)"),
    ((1, True, 0), "numbers \\(f.csv:2: 1\\) and bools \\(f.csv:3: True\\)"),
    (("pos", False), "names .* and bools"),
])
def test_mixed_kinds_are_refused_naming_a_line_of_each(values, message):
    with pytest.raises(ValueError, match=f"the labels mix {message}"):
        label_set(rows(*values), "f.csv")


def test_one_class_is_refused():
    with pytest.raises(ValueError, match="every label is '1' \\(3 rows\\): a classifier needs at least two classes.*"
                                         "--problem_type regression"):
        label_set(rows("1", 1, "1.0"), "f.csv")
    with pytest.raises(ValueError, match="every label is 'pos'"):
        label_set(rows("pos", "pos "), "f.csv")


def test_regression_only_when_asked_or_by_the_rule():
    assert label_set(rows("1", "2", "3"), "f").problem_type == "single_label_classification"
    s = label_set(rows("1", "2", "3"), "f", "regression")
    assert s.problem_type == "regression" and s.encode("2", "f", 2) == 2.0
    with pytest.raises(ValueError, match="f:3: the label 'high' is not a number \\(--problem_type regression\\)"):
        label_set(rows("1", "high"), "f", "regression")
    # classes asked for explicitly over non-integers: named by value
    s = label_set(rows("0.5", "1.5", 0.5), "f", "single_label_classification")
    assert s.names == ["0.5", "1.5"]


def test_validation_labels_are_read_by_the_same_rule():
    s = label_set(rows("0", "1"), "train.csv")
    assert s.encode(" 1.0", "dev.csv", 7) == 1
    with pytest.raises(ValueError, match="^dev.csv:7: label '2' does not occur in the training file"):
        s.encode("2", "dev.csv", 7)
    with pytest.raises(ValueError, match="^dev.csv:8: the label 'yes' is a name; the training file's labels are numbers"):
        s.encode("yes", "dev.csv", 8)
    with pytest.raises(ValueError, match="^dev.csv:9: the label is empty"):
        s.encode("", "dev.csv", 9)


def test_multi_label_lists():
    s = label_set(rows(["a", "b"], ["b"], []), "f.jsonl")
    assert s.problem_type == "multi_label_classification" and s.names == ["a", "b"]
    assert s.encode(["b"], "f", 2) == [0.0, 1.0]
    with pytest.raises(ValueError, match="f.jsonl:3: a list of labels, but other rows have one label"):
        label_set(rows("a", ["b"]), "f.jsonl")
    with pytest.raises(ValueError, match="every row's list of labels is empty"):
        label_set(rows([], []), "f.jsonl")


def test_a_tagger_needs_two_tags(tmp_path):
    from npbert.tasks.labels import check_tag_set
    with pytest.raises(ValueError, match="every word is tagged 'O'"):
        check_tag_set(["O"], "train.conll")
    check_tag_set(["B-PER", "O"], "train.conll")


# ---- through `npbert finetune` ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return base_model(tmp_path_factory.mktemp("base"))


def finetune(model, train, out, *extra):
    return main(["finetune", "--task", "sequence-classification", "--model_name_or_path", model, "--train_file",
                 train, "--output_dir", str(out), "--max_steps", "2", "--per_device_train_batch_size", "4",
                 "--max_seq_length", "32", "--plot", "false", *extra])


@pytest.mark.parametrize("labels,message", [
    (["0", "1", "", "1"], "train.csv:4: the label is empty"),
    (["0", "1", "nan", "1"], "train.csv:4: the label 'nan' is not a finite float32 number"),
    (["1", "1", "1", "1"], "every label is '1' (4 rows): a classifier needs at least two classes"),
    (["0", "1", "-", "1"], "the labels mix numbers ({train}:2: '0') and names ({train}:4: '-')"),
])
def test_finetune_refuses_bad_label_sets_in_one_line(model, tmp_path, capsys, labels, message):
    train = write_csv(tmp_path / "train.csv", [(s, l) for (s, _), l in zip(sentences(4), labels)])
    assert finetune(model, train, tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert message.format(train=train) in err and "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith(f"npbert finetune: error: {train}")


def test_finetune_trains_a_regression_on_non_integer_labels(model, tmp_path):
    train = write_csv(tmp_path / "train.csv", [(s, l) for (s, _), l in zip(sentences(4), ["0.5", "1.25", "1.5E-4",
                                                                                           "2.0"])])
    assert finetune(model, train, tmp_path / "out") == 0
    cfg = json.load(open(tmp_path / "out" / "config.json"))
    assert cfg["problem_type"] == "regression" and len(cfg["id2label"]) == 1


def test_a_jsonl_file_of_1_1_and_true_is_refused_and_of_1_and_1_0_is_one_class(model, tmp_path, capsys):
    path = tmp_path / "train.jsonl"
    texts = [s for s, _ in sentences(4)]
    path.write_text("\n".join(json.dumps({"sentence": t, "label": l}) for t, l in zip(texts, [1, "1", True, 0])))
    assert finetune(model, str(path), tmp_path / "out") == 1
    assert "the labels mix numbers (" in capsys.readouterr().err
    path.write_text("\n".join(json.dumps({"sentence": t, "label": l}) for t, l in zip(texts, [1, "1", 1.0, 0])))
    assert finetune(model, str(path), tmp_path / "out2") == 0
    assert json.load(open(tmp_path / "out2" / "config.json"))["id2label"] == {"0": "0", "1": "1"}


# ---- input files (item 8) -----------------------------------------------------------------------------
def test_a_non_utf8_csv_names_file_line_and_column(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b"sentence,label\nthe king,1\nthe caf\xe9 queen,0\n")
    with pytest.raises(ValueError, match=f"^{path}:3: not UTF-8 text \\(byte 0xe9 at column 8\\)"):
        read_table(str(path))
    conll = tmp_path / "train.conll"
    conll.write_bytes(b"the O\nking B-PER\n\ncaf\xe9 O\n")
    with pytest.raises(ValueError, match=f"^{conll}:4: not UTF-8"):
        read_conll(str(conll))


def test_a_non_utf8_pretraining_corpus_names_the_line(tmp_path):
    from npbert.data import create_training_instances
    from reliability_helpers import tokenizer
    import random
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the king\nthe queen\n\nsweet prince\ngood ni\xffght\n")
    with pytest.raises(ValueError, match=f"^{corpus}:5: not UTF-8 text \\(byte 0xff at column 8\\)"):
        create_training_instances([str(corpus)], tokenizer(str(tmp_path)), 16, 1, 0.1, 0.15, 2, random.Random(0))


def test_a_one_megabyte_csv_field_is_read(tmp_path):
    path = tmp_path / "train.csv"
    write_csv(path, [("king " * 200_000, "1"), ("queen", "0")])
    got = read_table(str(path))
    assert len(got) == 2 and len(got[0][1]["sentence"]) == 1_000_000
    import csv
    assert csv.field_size_limit() == 131072                          # put back afterwards


@pytest.mark.parametrize("feature,value", [("next_sentence_labels", 5), ("segment_ids", 2), ("input_mask", -1),
                                           ("masked_lm_weights", np.nan)])
def test_a_pretraining_h5_with_bad_values_is_refused_at_load(tmp_path, capsys, feature, value):
    import h5py
    features, vocab = pretraining_h5(str(tmp_path))
    with h5py.File(features, "r+") as f:
        data = f[feature][()]
        data.reshape(-1)[3] = value
        f[feature][...] = data
    from npbert.data import read_features
    with pytest.raises(ValueError, match=f"{features}: feature '{feature}' holds .* at row "):
        read_features(features)
    status = main(["pretrain", "--train_file", features, "--vocab_file", vocab, "--output_dir",
                   str(tmp_path / "out"), "--max_steps", "2", "--plot", "false"])
    err = capsys.readouterr().err
    assert status == 1 and f"feature '{feature}'" in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "out" / "checkpoint-2")          # found at load, before any step
