"""Gradient checkpointing (model.gradient_checkpointing_enable(), transformers' API): each encoder
layer keeps only its call in a training forward and runs again in the backward.  The gradients
are the ones without it, bit for bit (the same arithmetic, dropout masks keyed by step, site and
row, so the second forward draws the same), on both paths, every head, dropout on; the forward
holds less memory; each layer's forward runs twice."""
import tracemalloc

import numpy as np
import pytest

import npbert
from npbert.modeling.encoder import BertLayer

CFG = dict(vocab_size=30, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
           hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def batch_for(cls_name, B=4, T=10, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(4, 30, (B, T))
    mask = np.ones_like(ids)
    mask[1, T - 3:] = 0
    b = {"input_ids": ids, "attention_mask": mask}
    if cls_name == "BertForPreTraining":
        b.update(labels=np.where(rng.random((B, T)) < 0.3, ids, -100), next_sentence_label=rng.integers(0, 2, B))
    elif cls_name == "BertForQuestionAnswering":
        b.update(start_positions=rng.integers(0, T, B), end_positions=rng.integers(0, T, B))
    elif cls_name == "BertForMultipleChoice":
        b = {k: np.stack([v, v[::-1]], axis=1) for k, v in b.items()}
        b["labels"] = rng.integers(0, 2, B)
    else:
        b["labels"] = rng.integers(0, 2, B)
    return b


def step(cls_name, checkpointing, dtype, batch, offset=0, retain=False):
    model = npbert.BertForPreTraining if cls_name == "BertForPreTraining" else getattr(npbert, cls_name)
    model = model(npbert.BertConfig(**CFG), dtype=dtype, seed=1).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    assert model.is_gradient_checkpointing == checkpointing
    with model.batch_offset(offset):                 # the Trainer's data-parallel share: the block ends
        out = model(**batch)                         # before the backward, the recompute keys its masks
    first = model.backward(retain_graph=retain)
    second = model.backward() if retain else None
    return float(out.loss), first, second, model.inputs_embeds_grad


@pytest.mark.parametrize("path", ["fast", "reference"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls_name", ["BertForSequenceClassification", "BertForPreTraining",
                                      "BertForQuestionAnswering", "BertForMultipleChoice"])
def test_the_gradients_are_the_same_bit_for_bit(path, dtype, cls_name):
    batch = batch_for(cls_name)
    with npbert.using_path(path):
        plain = step(cls_name, False, dtype, batch, offset=5, retain=True)
        checkpointed = step(cls_name, True, dtype, batch, offset=5, retain=True)
    assert plain[0] == checkpointed[0]
    for a, b in ((plain[1], checkpointed[1]), (plain[2], checkpointed[2])):     # and a second backward
        assert list(a) == list(b) and all(np.array_equal(a[k], b[k]) for k in a)
    assert np.array_equal(plain[3], checkpointed[3])


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_each_layer_runs_again_in_the_backward(path, monkeypatch):
    calls = []
    with npbert.using_path(path):
        model = npbert.BertForSequenceClassification(npbert.BertConfig(**CFG)).train()
    layer_class = type(model.bert.encoder.layer[0])
    original = layer_class.forward

    def spy(self, *args, **kwargs):
        calls.append(self.prefix)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(layer_class, "forward", spy)
    batch = batch_for("BertForSequenceClassification")
    model(**batch)
    model.backward()
    assert len(calls) == 3 * (2 if path == "fast" else 1)          # the fast path: two halves of the batch
    calls.clear()
    model.gradient_checkpointing_enable()
    model(**batch)
    model.backward()
    assert len(calls) == 2 * 3 * (2 if path == "fast" else 1)
    calls.clear()
    model.eval()(**batch)                                            # eval: nothing to recompute
    model.gradient_checkpointing_disable()
    assert not model.is_gradient_checkpointing and issubclass(layer_class, BertLayer)


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_the_forward_keeps_less(path):
    """6 layers, 256 tokens: without checkpointing the forward keeps every layer's activations
    (probabilities (B, N, T, T), the FFN's (B, T, I), ...); with it, each layer's input and one
    layer's activations at a time.  Measured 2.9x less on the reference path (24.2 -> 8.3 MB) and
    more on the fast one; half is a safe bound that a checkpointing doing nothing (1x) fails."""
    cfg = npbert.BertConfig(**{**CFG, "num_hidden_layers": 6, "hidden_size": 32, "intermediate_size": 128})
    ids = np.random.default_rng(0).integers(4, 30, (2, 256))
    peaks = []
    for checkpointing in (False, True):
        with npbert.using_path(path):
            model = npbert.BertModel(cfg).train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        tracemalloc.start()
        out = model(input_ids=ids)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        model.backward(last_hidden_state=np.ones_like(out.last_hidden_state))
    assert peaks[1] < peaks[0] / 2, peaks


def test_a_model_without_an_encoder_says_so():
    from npbert import nn

    class Tiny(npbert.BertPreTrainedModel):
        def __init__(self, config):
            super().__init__(config)
            self.linear = nn.Linear(4, 2)
            self.post_init()
    with pytest.raises(ValueError, match="no encoder"):
        Tiny(npbert.BertConfig(**CFG)).gradient_checkpointing_enable()


def test_the_trainer_with_gradient_checkpointing_ends_where_it_ends_without(tmp_path):
    """TrainingArguments(gradient_checkpointing=True): 3 AdamW steps, dropout on, bit for bit."""
    from npbert.training import Trainer, TrainingArguments
    data = [{k: v[i] for k, v in batch_for("BertForSequenceClassification", B=8).items()} for i in range(8)]
    params = []
    for on in (False, True):
        model = npbert.BertForSequenceClassification(npbert.BertConfig(**CFG), dtype=np.float32, seed=2)
        args = TrainingArguments(str(tmp_path / str(on)), max_steps=3, per_device_train_batch_size=4,
                                 save_strategy="no", plot=False, gradient_checkpointing=on)
        Trainer(model, args, train_dataset=data).train()
        assert model.is_gradient_checkpointing == on
        params.append({n: p.copy() for n, p in model.named_parameters()})
    assert all(np.array_equal(params[0][n], params[1][n]) for n in params[0])


def test_the_command_line_has_the_flag():
    import argparse

    from npbert.cli.common import add_training_arguments, training_arguments
    parser = argparse.ArgumentParser()
    add_training_arguments(parser)
    assert training_arguments(parser.parse_args(["--gradient_checkpointing"]), "o").gradient_checkpointing is True
    assert training_arguments(parser.parse_args([]), "o").gradient_checkpointing is False


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_the_gradients_equal_transformers_with_its_own_checkpointing(path):
    """transformers' model.gradient_checkpointing_enable() (torch's recomputation) and npbert's, in
    training mode, on the same weights, float64; dropout 0 (torch's masks are not npbert's).  Both
    are their plain backward recomputed, so within head_helpers' REL_TOL (1e-9 of each gradient's
    largest entry; measured ~1e-15); the key bias, analytically zero, by its layer's scale."""
    torch = pytest.importorskip("torch")
    from heads.head_helpers import REL_TOL, analytically_zero, assert_grads_close, make_models, torch_grads
    with npbert.using_path(path):
        ours, theirs = make_models("BertForSequenceClassification", hidden_dropout_prob=0.0,
                                   attention_probs_dropout_prob=0.0)
    ours.train().gradient_checkpointing_enable()
    theirs.train().gradient_checkpointing_enable()
    assert theirs.is_gradient_checkpointing and ours.is_gradient_checkpointing
    batch = batch_for("BertForSequenceClassification")
    batch["input_ids"] = batch["input_ids"] % ours.config.vocab_size                # the helpers' vocabulary
    out = theirs(**{k: torch.as_tensor(v) for k, v in batch.items()})
    out.loss.backward()
    ours(**batch)
    got = ours.backward()
    want = torch_grads(theirs)
    assert_grads_close(got, want, zero=analytically_zero(want, "BertForSequenceClassification"), tol=REL_TOL)
