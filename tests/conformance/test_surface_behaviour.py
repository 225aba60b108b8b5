"""What issue 45 added to npbert's transformers / torch surface, exercised: Trainer(tokenizer=)
as transformers 4.46+ takes it, columns removed before the collator, collators on a dict of
columns equal to transformers', the Trainer's small methods, and the models' small attributes."""
import json
import warnings

import numpy as np
import pytest

import npbert
from npbert.training import (DataCollatorForLanguageModeling, DataCollatorForTokenClassification,
                             DataCollatorWithPadding, Trainer, TrainingArguments)
from training.training_helpers import VOCAB, classification_dataset, config, tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return tokenizer(tmp_path_factory.mktemp("vocab"))


def model():
    return npbert.BertForSequenceClassification(config(), seed=0)


def args(tmp_path, **kw):
    return TrainingArguments(str(tmp_path / "out"), per_device_train_batch_size=4, per_device_eval_batch_size=4,
                             max_steps=2, save_strategy="no", plot=False, **kw)


def with_text(data):
    """The examples as a tokenized dataset holds them: the text column beside the ids."""
    return [{**ex, "sentence": " ".join(VOCAB[i] for i in ex["input_ids"]), "idx": i} for i, ex in enumerate(data)]


def test_trainer_takes_tokenizer_as_processing_class_with_the_futurewarning(tmp_path, tok):
    with pytest.warns(FutureWarning, match="Use `processing_class` instead"):
        trainer = Trainer(model=model(), args=args(tmp_path), train_dataset=classification_dataset(8),
                          eval_dataset=classification_dataset(4, seed=1), tokenizer=tok,
                          compute_metrics=lambda p: {"n": len(p.label_ids)})
    assert trainer.processing_class is tok
    assert isinstance(trainer.data_collator, DataCollatorWithPadding)        # as transformers, from the tokenizer
    trainer.train()
    assert trainer.evaluate()["eval_n"] == 4
    with pytest.raises(ValueError, match="processing_class only"):
        Trainer(model(), args(tmp_path), tokenizer=tok, processing_class=tok)
    with pytest.raises(TypeError, match="`callbacks` is not supported in npbert: .*early_stopping_patience"):
        Trainer(model(), args(tmp_path), callbacks=[object()])
    Trainer(model(), args(tmp_path), callbacks=[])                            # asks for nothing
    with pytest.raises(TypeError, match="'compute_metric': did you mean 'compute_metrics'"):
        Trainer(model(), args(tmp_path), compute_metric=None)
    with pytest.raises(TypeError, match="the third argument is data_collator, as in transformers"):
        Trainer(model(), args(tmp_path), classification_dataset(8))           # npbert's old order

    class MyTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return 0.0
    with pytest.raises(TypeError, match=r"overrides \['compute_loss'\], which npbert's Trainer never calls"):
        MyTrainer(model(), args(tmp_path))


def test_remove_unused_columns_before_the_collator(tmp_path, tok):
    """A collator of one's own meets the model's columns only (transformers' RemoveColumnsCollator);
    with remove_unused_columns=False it meets every column."""
    seen = []

    def collator(features):
        seen.append(sorted(features[0]))
        return DataCollatorWithPadding(tok)([{k: v for k, v in f.items() if k != "sentence"} for f in features])

    data = with_text(classification_dataset(8))
    with pytest.warns(UserWarning, match=r"removed before the data collator: \['idx', 'sentence'\]"):
        Trainer(model(), args(tmp_path), train_dataset=data, data_collator=collator).train()
    assert seen[0] == ["input_ids", "label"]
    seen.clear()
    with pytest.warns(UserWarning, match=r"are ignored: \['idx'\]"):
        Trainer(model(), args(tmp_path, remove_unused_columns=False), train_dataset=data,
                data_collator=collator).train()
    assert seen[0] == ["idx", "input_ids", "label", "sentence"]
    # label_names: a column of that name is kept for the model
    t = Trainer(model(), args(tmp_path, label_names=["labels"]))
    assert "labels" in t._signature_columns and "sentence" not in t._signature_columns


def _transformers_tokenizer(tmp_path):
    pytest.importorskip("torch")
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return BertTokenizerLegacy(str(tmp_path / "vocab.txt"))


def test_collators_take_a_dict_of_columns_as_transformers_pads_it(tmp_path, tok):
    """`tokenized_datasets["train"][:8]` is a dict of columns: padded as transformers pads it; the
    token-classification and LM collators give on it what they give on the list of rows, which is
    transformers' output on that list."""
    transformers = pytest.importorskip("transformers")
    theirs_tok = _transformers_tokenizer(tmp_path)
    rows = [{"input_ids": [2, 5, 6, 7, 3], "token_type_ids": [0] * 5, "attention_mask": [1] * 5, "labels": [0, 1, 2, 1, 0]},
            {"input_ids": [2, 8, 3], "token_type_ids": [0] * 3, "attention_mask": [1] * 3, "labels": [0, 2, 0]}]
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    plain = [{k: v for k, v in r.items() if k != "labels"} for r in rows]
    plain_columns = {k: v for k, v in columns.items() if k != "labels"}
    cases = [(DataCollatorWithPadding(tok), transformers.DataCollatorWithPadding(theirs_tok, return_tensors="np"),
              plain, plain_columns, True),
             (DataCollatorForTokenClassification(tok),
              transformers.DataCollatorForTokenClassification(theirs_tok, return_tensors="np"), rows, columns, False),
             (DataCollatorForLanguageModeling(tok, mlm=False),
              transformers.DataCollatorForLanguageModeling(theirs_tok, mlm=False, return_tensors="np"),
              plain, plain_columns, False)]
    for ours, theirs, as_rows, as_columns, theirs_take_columns in cases:
        expected = theirs(as_rows)
        for got in (ours(as_rows), ours(as_columns)):
            assert set(got) == set(expected), type(ours).__name__
            for k in got:
                np.testing.assert_array_equal(got[k], expected[k], err_msg=f"{type(ours).__name__} {k}")
        if theirs_take_columns:
            from_columns = theirs(as_columns)
            for k in from_columns:
                np.testing.assert_array_equal(ours(as_columns)[k], from_columns[k])
    with pytest.raises(ValueError, match="columns of one length"):
        DataCollatorWithPadding(tok)({"input_ids": [[2, 3], [2, 5, 3]], "label": [1]})


def test_a_datasets_dataset_with_set_format(tmp_path, tok):
    datasets = pytest.importorskip("datasets")
    data = with_text(classification_dataset(8))
    ds = datasets.Dataset.from_list(data)
    ds.set_format(type="numpy", columns=["input_ids", "label", "sentence"])
    collator = DataCollatorWithPadding(tok)
    batch = collator(ds[:4])
    assert batch["input_ids"].shape[0] == 4 and "sentence" in batch
    ds.set_format()
    with pytest.warns(UserWarning, match="removed before the data collator"):
        out = Trainer(model(), args(tmp_path), train_dataset=ds, data_collator=collator).train()
    assert out.global_step == 2


def test_mask_replace_probabilities(tok):
    """mask_replace_prob=0.8, random_replace_prob=0.1 (transformers 5's defaults) is the 80/10/10
    npbert always drew, number for number; 1.0 / 0.0 puts [MASK] at every chosen position."""
    batch = [{"input_ids": [2] + list(range(5, len(VOCAB))) * 3 + [3]}] * 4
    a = DataCollatorForLanguageModeling(tok, seed=3)(batch)
    b = DataCollatorForLanguageModeling(tok, seed=3, mask_replace_prob=0.8, random_replace_prob=0.1)(batch)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    c = DataCollatorForLanguageModeling(tok, seed=3, mask_replace_prob=1.0, random_replace_prob=0.0)(batch)
    chosen = c["labels"] != -100
    assert chosen.any() and (c["input_ids"][chosen] == tok.mask_token_id).all()
    with pytest.raises(ValueError, match="sum to at most 1"):
        DataCollatorForLanguageModeling(tok, mask_replace_prob=0.9, random_replace_prob=0.2)
    with pytest.raises(TypeError, match="DataCollatorForWholeWordMask"):
        DataCollatorForLanguageModeling(tok, whole_word_mask=True)


def test_ignore_keys_leave_outputs_out_of_the_predictions(tmp_path):
    data = classification_dataset(8, ragged=False)
    t = Trainer(npbert.BertForSequenceClassification(config(), seed=0), args(tmp_path),
                eval_dataset=data)
    assert t.predict(data).predictions.shape == (8, 2)
    t.model.config.output_hidden_states = True                # hidden states are never predictions
    assert t.predict(data, ignore_keys=["logits"]).predictions == ()
    t.train_dataset = data
    t.train(ignore_keys_for_eval=["logits"])


def test_logging_strategy(tmp_path):
    data = classification_dataset(16, ragged=False)
    t = Trainer(model(), TrainingArguments(str(tmp_path / "o"), per_device_train_batch_size=4, num_train_epochs=2,
                                           logging_strategy="epoch", logging_steps=1, save_strategy="no", plot=False),
                train_dataset=data)
    t.train()
    assert [e["step"] for e in t.state.log_history if "loss" in e] == [4, 8]
    with pytest.raises(ValueError, match="logging_strategy must be one of"):
        TrainingArguments("o", logging_strategy="sometimes")


def test_the_trainers_small_methods(tmp_path, capsys):
    t = Trainer(model(), args(tmp_path, learning_rate=1e-3), train_dataset=classification_dataset(8, ragged=False))
    assert t.is_world_process_zero() and t.is_local_process_zero()
    opt = t.create_optimizer()
    assert t.create_optimizer() is opt and t.get_learning_rates() == [1e-3] * len(opt.param_groups)
    sched = t.create_scheduler(num_training_steps=10)
    assert t.lr_scheduler is sched and sched.get_last_lr()[0] == 1e-3
    t.create_optimizer_and_scheduler(10)
    assert t.optimizer is opt
    assert t.get_num_trainable_parameters() == sum(p.size for p in t.model.parameters())
    t.log({"custom": 1.5})
    assert t.state.log_history[-1] == {"custom": 1.5, "epoch": 0.0, "step": 0}
    metrics = {"eval_loss": 0.123456, "eval_n": 3}
    assert t.metrics_format(metrics) == {"eval_loss": 0.1235, "eval_n": 3}
    t.log_metrics("eval", metrics)
    assert "***** eval metrics *****" in capsys.readouterr().out
    t.save_metrics("eval", metrics)
    t.save_metrics("train", {"train_loss": 1.0})
    out = tmp_path / "out"
    assert json.loads((out / "eval_results.json").read_text()) == metrics
    assert json.loads((out / "all_results.json").read_text()) == {**metrics, "train_loss": 1.0}
    t.save_state()
    assert json.loads((out / "trainer_state.json").read_text())["log_history"][-1]["custom"] == 1.5
    with pytest.warns(FutureWarning, match="processing_class"):
        assert t.tokenizer is None
    with pytest.raises(NotImplementedError, match="`get_train_dataloader` is not supported in npbert: .*DataLoader"):
        t.get_train_dataloader()


def test_the_models_small_attributes():
    m = model()
    assert m.device == "cpu" and m.main_input_name == "input_ids" and m.config_class is npbert.BertConfig
    assert m.get_memory_footprint() == sum(p.size for p in m.parameters()) * 4
    w = m.get_parameter("bert.pooler.dense.weight")
    assert w is dict(m.named_parameters())["bert.pooler.dense.weight"]
    with pytest.raises(AttributeError, match="no parameter 'nope'"):
        m.get_parameter("nope")
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen[-1] == "BertForSequenceClassification" and "Linear" in seen
    m.activation_checkpointing_enable()
    assert m.is_activation_checkpointing and m.is_gradient_checkpointing
    m.activation_checkpointing_disable()
    assert not m.is_activation_checkpointing
    with pytest.raises(TypeError, match="`every_n_layers` is not supported"):
        m.activation_checkpointing_enable(every_n_layers=2)
    with pytest.raises(NotImplementedError, match="`register_forward_hook` is not supported in npbert: .*intermediates"):
        m.register_forward_hook(lambda *a: None)


def test_adam_decoupled_weight_decay_and_step_closure():
    """torch: Adam(decoupled_weight_decay=True) is AdamW; step(closure=) calls the closure first."""
    a, b = model(), model()
    grads = {n: np.full_like(p, 0.01) for n, p in a.named_parameters()}
    npbert.optim.Adam(a.parameters(), lr=0.1, weight_decay=0.1, decoupled_weight_decay=True).step(grads)
    npbert.optim.AdamW(b.parameters(), lr=0.1, weight_decay=0.1).step(grads)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p, q, err_msg=n)
    opt = npbert.optim.AdamW(a.parameters(), lr=0.1)
    calls = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                # (no .grad filled: nothing to update)
        assert opt.step(closure=lambda: calls.append(1) or 2.5) == 2.5
    assert calls == [1]
    with pytest.raises(TypeError, match="`amsgrad` is not supported"):
        npbert.optim.AdamW(a.parameters(), amsgrad=True)


def test_import_npbert_reaches_the_submodules_and_the_base_classes():
    """After `import npbert` alone (a fresh interpreter), the submodules a tutorial names through
    the package are there, and transformers' base classes are the BERT classes."""
    import subprocess
    import sys
    probe = ("import npbert\n"
             "for name in ('nn', 'nn.functional', 'functional', 'optim', 'training', 'data', 'losses', 'outputs',\n"
             "             'tokenization', 'modeling', 'pipelines'):\n"
             "    obj = npbert\n"
             "    for part in name.split('.'):\n"
             "        obj = getattr(obj, part)\n"
             "assert issubclass(npbert.BertForMaskedLM, npbert.PreTrainedModel)\n"
             "assert npbert.PreTrainedTokenizerBase is npbert.BertTokenizer and npbert.PretrainedConfig is npbert.BertConfig\n"
             "assert npbert.Trainer is npbert.training.Trainer\n"
             "print('ok')\n")
    root = __file__.rsplit("/tests/", 1)[0]
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "ok", out.stderr


def test_transformers_4_adamw_keywords():
    """transformers 4's AdamW(correct_bias=True, no_deprecation_warning=...) is torch's AdamW, which
    npbert.AdamW is; correct_bias=False (no bias correction) is refused naming BertAdam."""
    a, b = model(), model()
    grads = {n: np.full_like(p, 0.01) for n, p in a.named_parameters()}
    npbert.AdamW(a.parameters(), lr=0.1, correct_bias=True, no_deprecation_warning=True).step(grads)
    npbert.AdamW(b.parameters(), lr=0.1).step(grads)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p, q, err_msg=n)
    with pytest.raises(TypeError, match="`correct_bias` is not supported in npbert: .*BertAdam"):
        npbert.AdamW(a.parameters(), correct_bias=False)


def test_transformers_4_loading_and_saving_keywords(tmp_path):
    """from_pretrained(torch_dtype=) is dtype= with transformers' FutureWarning; save_pretrained(
    safe_serialization=True) is what npbert writes, False is refused."""
    model().save_pretrained(tmp_path / "m", safe_serialization=True)
    with pytest.warns(FutureWarning, match="Use `dtype` instead"):
        loaded = npbert.BertForSequenceClassification.from_pretrained(str(tmp_path / "m"), torch_dtype="float64")
    assert loaded.state.dtype == np.float64
    with pytest.raises(ValueError, match="safe_serialization=False"):
        model().save_pretrained(tmp_path / "n", safe_serialization=False)
    # ignore_mismatched_sizes: a head of another size drawn fresh, as transformers, the rest loaded
    with pytest.raises(ValueError, match="shapes do not fit"):
        npbert.BertForSequenceClassification.from_pretrained(str(tmp_path / "m"), num_labels=5)
    with pytest.warns(UserWarning, match=r"classifier.weight: found shape \(2, 16\) in the checkpoint and \(5, 16\)"):
        five, info = npbert.BertForSequenceClassification.from_pretrained(
            str(tmp_path / "m"), num_labels=5, ignore_mismatched_sizes=True, output_loading_info=True)
    assert five.classifier.weight.shape == (5, 16) and len(info["mismatched_keys"]) == 2
    np.testing.assert_array_equal(five.bert.pooler.dense.weight, loaded.bert.pooler.dense.weight.astype(np.float32))


def test_training_arguments_reach_the_optimizer_schedule_and_log(tmp_path):
    """adam_beta1/2, adam_epsilon, weight_decay, learning_rate, lr_scheduler_type, lr_scheduler_kwargs,
    warmup_steps build the optimizer and schedule transformers' Trainer builds; logging_first_step
    logs step 1; save_only_model leaves the optimizer out of the checkpoint."""
    kw = dict(learning_rate=1e-3, adam_beta1=0.8, adam_beta2=0.99, adam_epsilon=1e-6, weight_decay=0.05,
              lr_scheduler_type="cosine", lr_scheduler_kwargs={"num_cycles": 0.25}, warmup_steps=2)
    t = Trainer(model(), TrainingArguments(str(tmp_path / "a"), **kw))
    t.create_optimizer_and_scheduler(10)
    group = t.optimizer.param_groups[0]
    assert group["betas"] == (0.8, 0.99) and group["eps"] == 1e-6 and group["weight_decay"] == 0.05
    other = model()
    mine = npbert.optim.AdamW(other.parameters(), lr=1e-3)
    theirs = npbert.optim.get_scheduler("cosine", mine, 2, 10, {"num_cycles": 0.25})
    for _ in range(10):
        assert t.lr_scheduler.get_last_lr()[0] == theirs.get_last_lr()[0]
        t.lr_scheduler.step()
        theirs.step()
    data = classification_dataset(8, ragged=False)
    t = Trainer(model(), TrainingArguments(str(tmp_path / "b"), per_device_train_batch_size=4, max_steps=2,
                                           logging_steps=5, logging_first_step=True, save_steps=2,
                                           save_only_model=True, plot=False), train_dataset=data)
    t.train()
    assert [e["step"] for e in t.state.log_history if "loss" in e] == [1]
    assert "grad_norm" in t.state.log_history[0]                 # max_grad_norm=1.0: clipped, norm logged
    t = Trainer(model(), TrainingArguments(str(tmp_path / "c"), per_device_train_batch_size=4, max_steps=1,
                                           logging_first_step=True, max_grad_norm=0, save_strategy="no", plot=False),
                train_dataset=data)
    t.train()
    assert "grad_norm" not in t.state.log_history[0]             # max_grad_norm=0: no clipping
    saved = sorted(p.name for p in (tmp_path / "b" / "checkpoint-2").iterdir())
    assert "model.safetensors" in saved and not any("optimizer" in name for name in saved)


def test_activation_checkpointing_is_gradient_checkpointing():
    """transformers 5 renamed TrainingArguments(gradient_checkpointing) activation_checkpointing."""
    assert TrainingArguments("o", activation_checkpointing=True).gradient_checkpointing is True
    assert TrainingArguments("o", activation_checkpointing=None).gradient_checkpointing is False
    with pytest.raises(ValueError, match="different values"):
        TrainingArguments("o", activation_checkpointing=True, gradient_checkpointing=False)
