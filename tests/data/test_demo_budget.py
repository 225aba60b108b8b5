"""The demo's time budget: steps_within times real steps and scales the step count to the budget."""
import numpy as np

from npbert.cli.demo import steps_within
from npbert.config import BertConfig


def test_steps_within_scales_with_the_budget():
    cfg = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16)
    rng = np.random.default_rng(0)
    train = []
    for _ in range(4):
        labels = np.full(12, -100)
        labels[[2, 5]] = rng.integers(5, 60, 2)
        train.append({"input_ids": rng.integers(5, 60, 12), "attention_mask": np.ones(12, dtype=np.int64),
                      "token_type_ids": np.zeros(12, dtype=np.int64), "labels": labels,
                      "next_sentence_label": np.int64(1)})
    assert steps_within(cfg, train, 4, 1e-9, minimum=30) == 30           # nothing fits: the floor
    many = steps_within(cfg, train, 4, 1e4, minimum=30)
    # a step of this model takes well under 1 s, so 1e4 s hold far more than 1e4 steps / 1.15
    assert many > 10_000


def test_timed_dataset_stops_after_its_deadline():
    import time

    import pytest

    from npbert.cli.demo import _OutOfTime, _Timed
    data = _Timed([{"input_ids": np.arange(3)}] * 5)
    assert len(data) == 5 and data[4]["input_ids"].tolist() == [0, 1, 2]     # no deadline: a plain view
    data.deadline = time.perf_counter() - 1.0
    with pytest.raises(_OutOfTime):
        data[0]


def test_a_second_demo_in_the_same_directory_replaces_only_what_the_demo_wrote(tmp_path):
    from npbert.cli.demo import _prepare_output_dir
    out = tmp_path / "npbert-demo"
    assert _prepare_output_dir(str(out)) == [] and out.is_dir()                  # a new directory
    for d in ("model", "run", "finetune-pretrained"):
        (out / d).mkdir()
        (out / d / "x").write_text("old")
    (out / "results.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    assert _prepare_output_dir(str(out)) == ["results.json", "model", "run", "finetune-pretrained"]
    assert not (out / "model").exists() and not (out / "run").exists() and (out / "notes.txt").read_text() == "mine"


def test_an_output_dir_that_cannot_be_made_is_a_message(tmp_path, capsys):
    from npbert.cli import main
    (tmp_path / "file").write_text("x")
    assert main(["demo", "--output_dir", str(tmp_path / "file" / "below")]) == 1
    assert "--output_dir" in capsys.readouterr().err
