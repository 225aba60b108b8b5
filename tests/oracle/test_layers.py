"""npbert.layers (re-exported by npbert.testing): the additive mask equals the model's and
transformers'; one layer's and the embeddings' forward and backward equal the whole model's
(and finite differences); testing.state_dicts draws what the model loads."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import npbert
import npbert.testing as nt
from npbert.gradcheck import check_forward_backward
from npbert.layers import (embeddings_backward, embeddings_forward, get_extended_attention_mask, layer_backward,
                           layer_forward, layer_state_dict)


def tiny(**overrides):
    base = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
                max_position_embeddings=16, initializer_range=0.5)
    return npbert.BertConfig(**{**base, **overrides})


# ---- get_extended_attention_mask ---------------------------------------------------------------
@settings(max_examples=60, deadline=None, database=None)
@given(st.integers(1, 3), st.integers(1, 6), st.booleans(), st.booleans(), st.sampled_from([np.float32, np.float64]),
       st.data())
def test_extended_mask_is_the_models(B, T, three_d, decoder, dtype, data):
    """Bit-equal to BertModel's private _extended_attention_mask, 2-D and 3-D masks, encoder and
    decoder, float32 and float64."""
    if three_d:
        keep = np.array(data.draw(st.lists(st.lists(st.lists(st.integers(0, 1), min_size=T, max_size=T),
                                                    min_size=T, max_size=T), min_size=B, max_size=B)))
    else:
        keep = data.draw(nt.attention_masks(B, T))
    model = npbert.BertModel(tiny(is_decoder=decoder), dtype=dtype)
    want = model._extended_attention_mask(keep, B, T)
    got = get_extended_attention_mask(keep, (B, T), dtype=dtype, is_decoder=decoder)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    assert np.array_equal(got, want)
    if not decoder:
        assert get_extended_attention_mask(None) is None and model._extended_attention_mask(None, B, T) is None
    else:
        assert np.array_equal(get_extended_attention_mask(None, (B, T), dtype, is_decoder=True),
                              model._extended_attention_mask(None, B, T))


def test_extended_mask_equals_transformers():
    """transformers 4.x: ModuleUtilsMixin.get_extended_attention_mask; 5.x dropped it and builds
    the same additive masks in masking_utils (the eager attention's): compared with whichever the
    installed version has, encoder (bidirectional) and decoder (causal)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    keep = np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    B, T = keep.shape
    for decoder in (False, True):
        ours = get_extended_attention_mask(keep, (B, T), dtype=np.float64, is_decoder=decoder)
        config = transformers.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=16, is_decoder=decoder, attn_implementation="eager")
        if hasattr(transformers.modeling_utils.ModuleUtilsMixin, "get_extended_attention_mask"):   # 4.x
            model = transformers.BertModel(config).to(torch.float64)
            theirs = model.get_extended_attention_mask(torch.tensor(keep), (B, T), dtype=torch.float64)
        else:                                                                    # transformers 5.x
            from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
            embeds = torch.zeros(B, T, 8, dtype=torch.float64)
            if decoder:
                theirs = create_causal_mask(config=config, inputs_embeds=embeds, attention_mask=torch.tensor(keep),
                                            cache=None, allow_is_causal_skip=False)
            else:
                theirs = create_bidirectional_mask(config=config, inputs_embeds=embeds,
                                                   attention_mask=torch.tensor(keep), allow_is_bidirectional_skip=False)
        theirs = theirs.numpy()
        assert np.array_equal(np.broadcast_to(ours, theirs.shape), theirs), decoder


def test_extended_mask_refuses_bad_masks():
    with pytest.raises(ValueError, match="only 1 .attend. and 0"):
        get_extended_attention_mask(np.array([[1, 2]]))
    with pytest.raises(ValueError, match="the inputs are"):
        get_extended_attention_mask(np.array([[1, 1]]), input_shape=(1, 3))
    with pytest.raises(ValueError, match="2-D .batch, seq. or 3-D"):
        get_extended_attention_mask(np.ones(3))
    with pytest.raises(TypeError, match="numeric"):
        get_extended_attention_mask(np.array([["1", "0"]]))
    with pytest.raises(TypeError, match="floating point"):
        get_extended_attention_mask(np.array([[1, 0]]), dtype=np.int64)


# ---- one layer, the embeddings -------------------------------------------------------------------
def randomized(model, seed=0):
    rng = np.random.default_rng(seed)
    model.load_state_dict({k: (1.0 if k.endswith("LayerNorm.weight") else 0.0) + rng.normal(0, 0.5, v.shape)
                           for k, v in model.state_dict().items()})
    return model


@pytest.mark.parametrize("cls", [npbert.BertModel, npbert.BertForMaskedLM])
def test_layer_and_embeddings_equal_the_whole_model(cls):
    """hidden_states[i] -> layer i -> hidden_states[i + 1] to float64 round-off; layer i's backward from an
    upstream gradient on hidden_states[i + 1] alone equals the model's backward for that layer's
    parameters and, through the embeddings, for the embeddings'."""
    model = randomized(cls(tiny(), dtype=np.float64).eval())
    base, pre = (model, "") if cls is npbert.BertModel else (model.bert, "bert.")
    ids, keep = np.array([[2, 0, 9, 3, 4], [5, 6, 7, 8, 1]]), np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    types = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    out = base(input_ids=ids, attention_mask=keep, token_type_ids=types, output_hidden_states=True)
    hs = out.hidden_states
    emb, emb_cache = embeddings_forward(model, ids, types)
    assert np.array_equal(emb, hs[0])
    mask = get_extended_attention_mask(keep, ids.shape)
    rng = np.random.default_rng(0)
    for i in range(2):
        y, cache = layer_forward(model, i, hs[i], mask)
        # Not bit for bit: inside the model the fast path runs the batch as two halves (and Q, K, V as
        # one stacked GEMM), so its GEMMs have other shapes than the layer's run alone, and OpenBLAS
        # may sum in another order for another shape (its Haswell kernels do; SkylakeX's happened to
        # agree).  float64 values O(1) through ~10 ops of ~8-term sums: round-off ~1e-15, so 1e-12
        # relative and 1e-13 absolute (as the gradients below) still catch any wrong formula.
        np.testing.assert_allclose(y, hs[i + 1], rtol=1e-12, atol=1e-13)
        assert cache["probs"].shape == (2, 2, 5, 5)
        dout = rng.normal(size=y.shape)
        before = dout.copy()
        dx, grads = layer_backward(dout, cache)
        assert np.array_equal(dout, before)                                      # dout not written
        assert sorted(grads) == sorted(layer_state_dict(model, i))
        upstream = [None] * 3
        upstream[i + 1] = dout
        base(input_ids=ids, attention_mask=keep, token_type_ids=types, output_hidden_states=True)
        whole = base.backward(hidden_states=upstream)
        for name, g in grads.items():
            np.testing.assert_allclose(g, whole[f"{pre}encoder.layer.{i}.{name}"], rtol=1e-12, atol=1e-13, err_msg=name)
        _, egrads = embeddings_backward(dx if i == 0 else layer_backward(dx, layer_forward(model, 0, hs[0], mask)[1])[0],
                                        emb_cache)
        for name, g in egrads.items():
            np.testing.assert_allclose(g, whole[f"{pre}embeddings.{name}"], rtol=1e-12, atol=1e-13, err_msg=name)
        assert np.all(egrads["word_embeddings.weight"][0] == 0)               # the pad row: no gradient


def test_layer_backward_against_finite_differences():
    """Layer 1 on its own, padded mask and a head mask, every weight and the input (sampled)."""
    model = randomized(npbert.BertModel(tiny(), dtype=np.float64).eval(), seed=1)
    weights = layer_state_dict(model, 1)
    x = np.random.default_rng(1).normal(size=(2, 4, 8))
    mask = get_extended_attention_mask(np.array([[1, 1, 0, 0], [1, 1, 1, 1]]))
    head_mask = np.array([1.0, 0.5])

    def forward(hidden_states, **w):           # w: the same arrays as the model's (perturbed in place)
        return layer_forward(model, 1, hidden_states, mask, head_mask)

    def backward(dout, cache):
        dx, grads = layer_backward(dout, cache)
        return {"hidden_states": dx, **grads}
    checks = check_forward_backward(forward, backward, {"hidden_states": x, **weights}, max_entries=6)
    assert set(checks) == {"hidden_states", *weights}
    assert all(c.ok for c in checks.values()), {n: (c.error, c.note) for n, c in checks.items() if not c.ok}


def test_layer_functions_refuse_what_would_be_silently_wrong():
    model = npbert.BertModel(tiny(), dtype=np.float64)
    x = np.zeros((2, 4, 8))
    with pytest.raises(ValueError, match="get_extended_attention_mask"):
        layer_forward(model, 0, x, np.ones((2, 4)))                  # a 1/0 mask would broadcast wrongly
    with pytest.raises(ValueError, match="does not broadcast"):
        layer_forward(model, 0, x, np.zeros((3, 1, 1, 4)))
    with pytest.raises(TypeError, match="float32"):
        layer_forward(npbert.BertModel(tiny()), 0, x)                 # a float32 model, float64 input
    with pytest.raises(IndexError, match="2 layers"):
        layer_forward(model, 2, x)
    with pytest.raises(ValueError, match="hidden_size=8"):
        layer_forward(model, 0, np.zeros((2, 4, 6)))
    with pytest.raises(ValueError, match="head_mask"):
        layer_forward(model, 0, x, head_mask=np.ones(3))
    with pytest.raises(TypeError, match="BertModel or a BertFor"):
        layer_forward(object(), 0, x)


# ---- state_dicts ----------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None, database=None)
@given(st.data())
def test_state_dicts_are_loadable_and_order_one(data):
    config = data.draw(nt.bert_configs())
    cls = data.draw(st.sampled_from([npbert.BertModel, npbert.BertForMaskedLM, npbert.BertForSequenceClassification]))
    model = cls(config, dtype=data.draw(st.sampled_from([np.float32, np.float64])))
    weights = data.draw(nt.state_dicts(model))
    reference = model.state_dict()
    assert list(weights) == list(reference)
    for name, w in weights.items():
        assert w.shape == reference[name].shape and w.dtype == reference[name].dtype, name
    model.load_state_dict(weights)
    biases = np.concatenate([w for n, w in weights.items() if n.endswith("bias")])
    scales = np.concatenate([w for n, w in weights.items() if n.endswith("LayerNorm.weight")])
    assert np.all(biases != 0) and np.all(scales != 1)                  # nothing left at its init value
    assert 0.05 < np.std(biases) < 3 and 0.05 < np.std(scales - 1) < 3 or biases.size < 8
    loaded = model.state_dict()
    assert all(np.array_equal(loaded[name], w) for name, w in weights.items())
