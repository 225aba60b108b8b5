"""model.freeze / unfreeze: frozen parameters get no gradient, the work is skipped, the
trainable gradients are the same as without freezing, optimizers leave frozen ones alone.
On both paths (tests/conftest.py: npbert_path): the modules' frozen-aware backward is theirs."""
import threading

import numpy as np
import pytest

import npbert
import npbert.fast
import npbert.ops
from npbert import optim
from npbert.ops import linear as linear_op
from heads.head_helpers import analytically_zero, assert_grads_close, randomize, tiny_config

pytestmark = pytest.mark.usefixtures("npbert_path")

# Freezing changes which gradients are computed, not how: the trainable gradients must be
# bit-identical to the unfrozen model's (same float64 operations in the same order).


def batch(seed=0, B=3, T=6):
    rng = np.random.default_rng(seed)
    return dict(input_ids=rng.integers(1, 29, (B, T)), attention_mask=np.ones((B, T), dtype=np.int64),
                labels=rng.integers(0, 2, B))


def classifier(num_hidden_layers=3):
    return randomize(npbert.BertForSequenceClassification(
        tiny_config(num_labels=2, num_hidden_layers=num_hidden_layers), dtype=np.float64).eval())


@pytest.mark.parametrize("frozen", [("bert.embeddings",), ("bert.embeddings", "bert.encoder.layer.0"),
                                    ("bert",), ("bert.encoder.layer.1.attention",), ("classifier.bias",),
                                    ("bert.encoder.layer.1.attention.self.query",),      # Q/K/V partly frozen
                                    ("bert.encoder.layer.2.attention.self.key.bias",)])
def test_trainable_gradients_equal_the_unfrozen_models_and_frozen_ones_are_absent(frozen):
    full = classifier()
    full(**batch())
    expected = full.backward()
    model = classifier().freeze(*frozen)
    model(**batch())
    grads = model.backward()
    frozen_names = {n for n in model.state.params
                    if any(n == p or n.startswith(p + ".") for p in frozen)}
    assert frozen_names and set(grads) == set(expected) - frozen_names
    assert list(grads) == [n for n in expected if n not in frozen_names]       # named_parameters order
    for name, g in grads.items():
        assert g.tobytes() == expected[name].tobytes(), name
    assert all(not model.is_trainable(n) for n in frozen_names)


def test_frozen_work_is_skipped(monkeypatch, npbert_path):
    """Freezing the embeddings and layer 0 skips the embedding scatter-adds and every weight
    GEMM of layer 0 (and layer 0's input gradient: nothing below needs it)."""
    calls = {"embedding": 0, "param_grads": 0, "input_grad": 0}
    lock = threading.Lock()                 # the fast encoder's two batch halves may run in two threads

    def count(name, fn):
        def wrapped(*a, **k):
            with lock:
                calls[name] += 1
            return fn(*a, **k)
        return wrapped

    model = classifier(num_hidden_layers=2)
    model(**batch())
    for namespace in (npbert.ops, npbert.fast):                     # what a module's self.ops reads
        monkeypatch.setattr(namespace, "embedding_backward", count("embedding", namespace.embedding_backward))
    for mod in ("npbert.modeling.leaf_modules", "npbert.modeling.fast_attention"):
        monkeypatch.setattr(f"{mod}.linear_param_grads", count("param_grads", linear_op.linear_param_grads))
        monkeypatch.setattr(f"{mod}.linear_input_grad", count("input_grad", linear_op.linear_input_grad))
    model.backward(retain_graph=True)
    full = dict(calls)
    assert full["embedding"] == 3
    for k in calls:
        calls[k] = 0
    model.freeze("bert.embeddings", "bert.encoder.layer.0")
    model.backward()
    assert calls["embedding"] == 0
    # per layer: the fast path runs Q/K/V as one stacked GEMM, attention output, intermediate,
    # output = 4 weight GEMMs and 4 input GEMMs, per half of the batch (its encoder runs B >= 2
    # rows as two halves); the reference path runs Q, K and V apart: 6 and 6, on the whole batch.
    # The full backward: 2 layers, + pooler and classifier; layer 0 skipped.  (In eval mode the fast
    # path's last layer computes the [CLS] row alone: Q apart from the stacked K/V, 5 and 5 per half.)
    per_layer = 4 * 2 if npbert_path == "fast" else 6
    last_layer = 5 * 2 if npbert_path == "fast" and not model.training else per_layer
    assert full["param_grads"] == per_layer + last_layer + 2
    assert calls["param_grads"] == full["param_grads"] - per_layer
    assert calls["input_grad"] == full["input_grad"] - per_layer
    assert model.inputs_embeds_grad is None


def test_everything_below_the_head_frozen_runs_only_the_head():
    model = classifier()
    model.freeze("bert")
    model(**batch())
    grads = model.backward()
    assert list(grads) == ["classifier.weight", "classifier.bias"]
    assert model.num_parameters(only_trainable=True) == grads["classifier.weight"].size + 2
    assert model.num_parameters() > model.num_parameters(only_trainable=True)
    model.unfreeze()
    assert model.num_parameters(only_trainable=True) == model.num_parameters()


def test_need_inputs_embeds_grad_keeps_the_full_backward():
    model = classifier()
    model(**batch())
    expected = model.backward(retain_graph=True)
    dembeds = model.inputs_embeds_grad.copy()
    model.freeze("bert.embeddings", "bert.encoder")
    model.state.need_inputs_embeds_grad = True
    model.backward()
    assert np.array_equal(model.inputs_embeds_grad, dembeds)


def test_tied_decoder_frozen_with_the_word_embeddings(monkeypatch):
    """The decoder is an nn.Linear tied to the word embeddings: frozen with them, its (V, H) GEMM
    is skipped and its bias (cls.predictions.bias, trainable) gets the unfrozen model's gradient."""
    model = randomize(npbert.BertForMaskedLM(tiny_config(), dtype=np.float64).eval())
    ids = np.array([[2, 3, 4, 5]])
    model(input_ids=ids, labels=ids)
    expected = model.backward()
    V, H = model.config.vocab_size, model.config.hidden_size
    shapes = []

    def recording(*a, **k):
        g = linear_op.linear_param_grads(*a, **k)
        shapes.extend(v.shape for v in g.values())
        return g
    monkeypatch.setattr("npbert.modeling.leaf_modules.linear_param_grads", recording)
    model.freeze("bert.embeddings.word_embeddings")
    model(input_ids=ids, labels=ids)
    grads = model.backward()
    assert "bert.embeddings.word_embeddings.weight" not in grads
    assert "cls.predictions.decoder.weight" not in grads
    assert grads["cls.predictions.bias"].tobytes() == expected["cls.predictions.bias"].tobytes()
    assert (V,) in shapes and (V, H) not in shapes               # db computed, the decoder's dW not


def test_optimizer_leaves_frozen_parameters_alone():
    model = classifier()
    model.freeze("bert.embeddings", "bert.encoder.layer.0")
    before = {n: p.copy() for n, p in model.named_parameters()}
    opt = optim.AdamW(optim.optimizer_grouped_parameters(model, weight_decay=0.01), lr=1e-2)
    for step in range(3):
        model(**batch(step))
        opt.step(model.backward())
    for n, p in model.named_parameters():
        changed = not np.array_equal(p, before[n])
        assert changed == model.is_trainable(n), n


def test_bad_prefix_is_an_error_naming_it():
    with pytest.raises(KeyError, match="'bert.encodr'.*prefixes include"):
        classifier().freeze("bert.encodr")
    with pytest.raises(KeyError, match="no parameter 'nope'"):
        classifier().is_trainable("nope")


def test_load_state_dict_copies_into_the_existing_arrays():
    model = classifier()
    arrays = {n: p for n, p in model.named_parameters()}
    other = classifier()
    for p in other.state.params.values():
        p += 1.0
    model.load_state_dict(other.state_dict())
    for n, p in model.named_parameters():
        assert p is arrays[n] and np.array_equal(p, other.state.params[n])


def test_gather_masked_lm_equals_the_full_computation():
    """config.gather_masked_lm (Google's gather_indexes): the MLM head only at the labelled
    positions.  The loss and every gradient equal the full (B, T, V) computation's in float64
    (the same sums in another order: 1e-12 relative); in eval mode the logits stay (B, T, V)."""
    config = tiny_config()
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 29, (3, 7))
    labels = np.full((3, 7), -100)
    labels[0, 2], labels[1, 5], labels[2, 1], labels[2, 6] = 4, 9, 11, 2
    batch = dict(input_ids=ids, labels=labels, next_sentence_label=np.array([0, 1, 1]))
    results = []
    for gather in (False, True):
        model = randomize(npbert.BertForPreTraining(config, dtype=np.float64))
        model.config.gather_masked_lm = gather
        model.train()
        model.state.rng = np.random.default_rng(5)           # the same dropout masks in both runs
        out = model(**batch)
        results.append((float(out.loss), model.backward(), out.prediction_logits.shape))
    (loss_a, grads_a, shape_a), (loss_b, grads_b, shape_b) = results
    assert shape_a == (3, 7, 29) and shape_b == (1, 4, 29)
    assert abs(loss_a - loss_b) <= 1e-12 * abs(loss_a)
    # 1e-12 of each gradient's own scale; the key biases, zero in exact arithmetic (only
    # round-off ~1e-17 is left), against 1e-9 of their layer's key.weight gradient instead.
    assert_grads_close(grads_b, grads_a, zero=analytically_zero(grads_a, "BertForPreTraining"), tol=1e-12)
    model.eval()
    assert model(**batch).prediction_logits.shape == (3, 7, 29)
