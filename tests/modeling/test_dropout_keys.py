"""Dropout keyed by what it belongs to (npbert/ops/dropout.py, npbert/modeling/module.py): a
training forward takes one draw from the model's generator (the step's seed), and row r of a
dropout site's mask is a function of (that seed, the site's name, r's global index, the row's
shape).  So a forward is reproducible from the generator's state, and the shares of a global
batch run apart under `model.batch_offset(a)` compute what the global batch computes.
(Both paths: tests/modeling/conftest.py.)"""
import numpy as np
import pytest

import npbert

from bert_helpers import random_batch, random_model, randomize, tiny_config

DROPOUT = dict(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)


def test_a_training_forward_takes_one_draw_from_the_models_generator():
    config = tiny_config(**DROPOUT)
    ids, types, mask = random_batch(config, 4, 6, seed=4)
    model = random_model(config, seed=4).train()
    state = model.state.rng.bit_generator.state
    first = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    probe = np.random.PCG64()
    probe.state = state
    probe.random_raw()                                                  # one 64-bit draw
    assert model.state.rng.bit_generator.state == probe.state
    model.state.rng.bit_generator.state = state
    again = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    assert np.array_equal(first, again)                                 # same generator state: same masks
    third = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    assert not np.allclose(first, third)                                # the next step: other masks
    model.eval()                                                        # eval: no draw at all
    before = model.state.rng.bit_generator.state
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert model.state.rng.bit_generator.state == before


def test_every_dropout_site_has_its_own_masks():
    """Two sites of one step draw different masks: with p = 0.5 at every site, the masks the
    embeddings and layer 0's attention output drop agree on about half the entries (an
    identical mask would agree everywhere)."""
    config = tiny_config(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5)
    model = random_model(config, seed=7).train()
    ids, types, mask = random_batch(config, 3, 8, seed=7, pad=False)
    model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    cache = model._cache
    embeddings_keep = cache["embeddings"]["drop"][0]
    layer_cache = cache["encoder"][0][0] if not hasattr(cache["encoder"], "bounds") else None
    if layer_cache is None:                                             # the fast path's halves
        output_keep = np.concatenate([half[0][0][1]["dropout"][0] for half in cache["encoder"]])   # layer 0
    else:
        output_keep = layer_cache[1]["dropout"][0]
    agree = (embeddings_keep == output_keep).mean()
    assert 0.3 < agree < 0.7, agree                                     # 48 entries at p = 0.5: sd 0.07


def _share_models(cls_name, config, seed=0):
    model = getattr(npbert, cls_name)(config, seed=seed, dtype=np.float64)
    randomize(model.state.params, seed + 1)
    return model.train()


@pytest.mark.parametrize("cls_name", ["BertModel", "BertForSequenceClassification", "BertForMultipleChoice"])
def test_shares_of_a_global_batch_compute_what_the_global_batch_computes(cls_name):
    """Data parallelism (issue 25): rows [0, 2) and [2, 5) of a batch of 5, each run on its own
    model copy (same weights, same generator state) under model.batch_offset(first row), with
    dropout on everywhere (the classifier's too).  Each share's outputs are the global batch's
    rows bit for bit (the same masks row by row, and rows never meet); the shares' gradients of
    sum(output * upstream) add up to the global batch's to round-off (1e-12 of each gradient's
    largest entry; the key biases, zero in exact arithmetic, against the layer's key weight).
    BertForMultipleChoice's rows are examples: its model scales the offset by the choices."""
    config = tiny_config(**DROPOUT, classifier_dropout=0.4, num_labels=3)
    B, T = 5, 6
    ids, types, mask = random_batch(config, B, T, seed=11)
    if cls_name == "BertForMultipleChoice":                             # C = 2 choices
        ids, types, mask = (np.stack([a, a[::-1]], axis=1) for a in (ids, types, mask))   # (B, C, T)
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    main = "last_hidden_state" if cls_name == "BertModel" else "logits"

    def run(rows, offset):
        model = _share_models(cls_name, config)
        with model.batch_offset(offset):
            out = model(**{k: v[rows] for k, v in inputs.items()})
        up = np.random.default_rng(3).standard_normal(out[main].shape[1:])     # the same for every row
        grads = model.backward(**{main: np.broadcast_to(up, out[main].shape)})
        return out[main], grads

    whole, whole_grads = run(slice(0, B), 0)
    parts = [run(slice(a, b), a) for a, b in ((0, 2), (2, B))]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), whole)
    for name, g in whole_grads.items():
        summed = parts[0][1][name] + parts[1][1][name]
        if name.endswith("attention.self.key.bias"):
            scale = np.abs(whole_grads[name.replace("key.bias", "key.weight")]).max()
        else:
            scale = np.abs(g).max()
        assert np.abs(summed - g).max() <= 1e-12 * scale + 1e-300, name


def test_batch_offset_is_checked_and_restored():
    model = random_model(tiny_config())
    with pytest.raises(ValueError, match=">= 0"):
        with model.batch_offset(-1):
            pass
    with model.batch_offset(7) as m:
        assert m is model and model.state.call.batch_offset == 7
    assert model.state.call.batch_offset == 0
