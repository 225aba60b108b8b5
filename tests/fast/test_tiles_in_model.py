"""The fast model's attention in tiles (npbert/fast/tiled_attention.py), used from
`model.bert.encoder.attention_tiles_from` tokens on (1024 by default; lowered here to 8 so
that tiny models reach it, and the tiles cut to 4 x 4 so that a row spans several of them):
every model computes what the reference path computes, in training with dropout on everywhere
and in halves (B = 4), with the tolerances of test_models_fast_equals_reference.py (the tiled op
alone is within 1e-12 of the reference in float64: tests/fast/test_tiled_attention.py; float32:
the same 256 / 512 ulp bounds hold, the online softmax adds a few ulp to the full op's).
Where the probabilities are read (output_attentions, intermediates, npbert.interpret) the full
op runs; gradient checkpointing recomputes the tiles bit for bit.
"""
import functools

import numpy as np
import pytest

import npbert
import npbert.modeling.fast_attention as fast_attention
from heads.head_helpers import randomize
from test_models_fast_equals_reference import TOL, assert_grads_agree, assert_outputs_agree, config_for, tiny_inputs

CLASSES = ["BertModel", "BertForSequenceClassification", "BertForTokenClassification", "BertForQuestionAnswering",
           "BertForMaskedLM", "BertForMultipleChoice"]


@pytest.fixture
def tiles(monkeypatch):
    """Count the tiled op's calls; tiles of 4 query rows by 4 keys."""
    calls = []
    tiled = functools.partial(fast_attention.tiled_attention_forward, block=4)

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return tiled(*args, **kwargs)
    monkeypatch.setattr(fast_attention, "tiled_attention_forward", counted)
    return calls


def build(path, cls_name, config, dtype, tiles_from=8):
    with npbert.using_path(path):
        model = randomize(getattr(npbert, cls_name)(config, dtype=dtype), seed=1).train()
    model.base_model.encoder.attention_tiles_from = tiles_from
    return model


def train_step(model, cls_name, inputs):
    """A training forward and the backward of the loss (BertModel: of its two outputs) plus an
    upstream gradient for every hidden state, as test_models_fast_equals_reference.run."""
    out = model(**inputs, output_hidden_states=True)
    up = np.random.default_rng(5)
    upstream = dict(hidden_states=[up.standard_normal(h.shape) for h in out.hidden_states])
    if cls_name == "BertModel":
        upstream.update(last_hidden_state=up.standard_normal(out.last_hidden_state.shape),
                        pooler_output=up.standard_normal(out.pooler_output.shape))
    else:
        upstream["loss"] = 1.0
    return out, model.backward(**upstream)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cls_name", CLASSES)
def test_tiles_compute_what_the_reference_computes(tiles, cls_name, dtype):
    config = config_for(cls_name)
    inputs = tiny_inputs(cls_name, config, T=11)
    out_f, grads_f = train_step(build("fast", cls_name, config, dtype), cls_name, inputs)
    with npbert.using_path("reference"):
        out_r, grads_r = train_step(build("reference", cls_name, config, dtype), cls_name, inputs)
    assert len(tiles) == 2 * config.num_hidden_layers          # every layer, both halves
    tol = TOL[dtype]
    assert_outputs_agree(out_f, out_r, cls_name, tol)
    assert_grads_agree(grads_f, grads_r, cls_name, dtype, tol)


def test_shorter_inputs_and_read_probabilities_take_the_full_op(tiles):
    config = config_for("BertForSequenceClassification")
    model = build("fast", "BertForSequenceClassification", config, np.float64)
    model(**tiny_inputs("BertForSequenceClassification", config, T=7))           # 7 < 8 tokens
    assert tiles == []
    out = model(**tiny_inputs("BertForSequenceClassification", config, T=11), output_attentions=True)
    assert tiles == [] and all(a.shape == (4, config.num_attention_heads, 11, 11) for a in out.attentions)
    model(**tiny_inputs("BertForSequenceClassification", config, T=11), output_intermediates=True)
    assert tiles == []
    model.base_model.encoder.attention_tiles_from = None                       # never
    model(**tiny_inputs("BertForSequenceClassification", config, T=11))
    assert tiles == []


def test_gradients_of_the_probabilities_after_tiles_are_refused_with_the_fix(tiles):
    config = config_for("BertForSequenceClassification")
    model = build("fast", "BertForSequenceClassification", config, np.float64).eval()
    model(**tiny_inputs("BertForSequenceClassification", config, T=11))
    assert tiles
    with pytest.raises(ValueError, match="attention_probs_read"):
        model.backward(loss=1.0, return_intermediate_grads=True)


def test_interpret_reads_probabilities_so_it_takes_the_full_op(tiles):
    """head_importance asks for the head-mask gradients (the probabilities' backward): under
    npbert.interpret's inspecting() the forward keeps them, and the result is the one without tiles."""
    from npbert.interpret.heads import head_importance
    config = config_for("BertForSequenceClassification")
    batch = tiny_inputs("BertForSequenceClassification", config, T=11)
    results = []
    for tiles_from in (8, None):
        model = build("fast", "BertForSequenceClassification", config, np.float64, tiles_from=tiles_from)
        results.append(head_importance(model, [batch]))
    assert tiles == []
    np.testing.assert_array_equal(results[0].raw, results[1].raw)
    assert np.abs(results[0].raw).max() > 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_checkpointing_recomputes_the_tiles_bit_for_bit(tiles, dtype):
    cls_name = "BertForSequenceClassification"
    config = config_for(cls_name)
    inputs = tiny_inputs(cls_name, config, T=11)
    results = []
    for checkpointing in (False, True):
        model = build("fast", cls_name, config, dtype)
        if checkpointing:
            model.gradient_checkpointing_enable()
        results.append(train_step(model, cls_name, inputs))
    assert len(tiles) == 2 * config.num_hidden_layers * 3       # forward; forward, then again in the backward
    (out_a, grads_a), (out_b, grads_b) = results
    np.testing.assert_array_equal(out_a.logits, out_b.logits)
    assert list(grads_a) == list(grads_b)
    for name in grads_a:
        np.testing.assert_array_equal(grads_a[name], grads_b[name], err_msg=name)
