"""The outside user's story (issue 26): a NumPy BERT written from the formulas (outside_bert.py)
and property tests that use npbert as the oracle, through the public API only: npbert.testing's
strategies (configs with activations=("gelu",), random O(1) weights, padded masks, inputs with
pad ids), npbert.layers' per-layer and embeddings forward/backward and the additive mask, and
BertModel's forward and backward.  The suite passes on the correct implementation and catches
each of the ten classic bugs; the per-layer functions say which layer a bug is in.

Comparisons are normwise in float64: max |got - want| <= 1e-8 max |want|.  Two float64
implementations of the same formulas differ by round-off, ~1e-15 relative, grown to ~1e-12
where a LayerNorm row's spread is near sqrt(eps); each bug changes the numbers by 1e-7 or more
on the inputs the strategies draw (eps 1e-5, inputs of scale 30, padding, several heads).
A gradient that is zero in exact arithmetic (the key bias: softmax ignores a shift of a whole
score row) is round-off on both sides, so each gradient's max |want| is floored at 1e-3 of the
largest gradient entry of the layer (or model): judged against its neighbours' scale.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import npbert
import npbert.testing as nt

import outside_bert as ob

RTOL = 1e-8
SUITE = dict(deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck),
             phases=[Phase.explicit, Phase.generate])        # no shrinking: only whether it fails matters here


def size(a):
    return float(np.max(np.abs(a), initial=0.0))


def close(got, want, floor=0.0):
    """max |got - want| <= RTOL * max(max |want|, floor), got finite and shaped as want."""
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and bool(np.all(np.isfinite(got))) and \
        size(got - want) <= RTOL * max(size(want), floor, 1e-300)


def grads_close(got, want):
    """Every gradient close, each floored at 1e-3 of the largest entry of them all."""
    floor = 1e-3 * max(size(w) for w in want.values())
    return sorted(got) == sorted(want) and all(close(got[n], want[n], floor) for n in want)


def random_model(data, **config_kwargs):
    """A float64 BertModel of a drawn config (exact GELU only: the outside BERT has no other)
    with random O(1) weights, in eval mode."""
    config = data.draw(nt.bert_configs(activations=("gelu",), **config_kwargs))
    model = npbert.BertModel(config, dtype=np.float64).eval()
    model.load_state_dict(data.draw(nt.state_dicts(model)))
    return model


def layer_suite(bugs=(), max_examples=80):
    """One layer against nt.layer_forward / nt.layer_backward: inputs of scale 1 or 30."""
    @settings(max_examples=max_examples, **SUITE)
    @given(st.data())
    def prop(data):
        model = random_model(data, max_layers=1)
        B, T = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 8))
        keep = data.draw(nt.attention_masks(B, T))
        rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
        x = rng.normal(size=(B, T, model.config.hidden_size)) * data.draw(st.sampled_from([1.0, 30.0]))
        want, cache = nt.layer_forward(model, 0, x, nt.get_extended_attention_mask(keep, (B, T)))
        got, mine = ob.layer_forward(nt.layer_state_dict(model, 0), x, keep, model.config, bugs)
        assert close(got, want)
        dout = rng.normal(size=x.shape)
        dx, grads = nt.layer_backward(dout, cache)
        my_dx, my_grads = ob.layer_backward(dout, mine)
        assert grads_close({"x": my_dx, **my_grads}, {"x": dx, **grads})
    prop()


def embeddings_suite(bugs=(), max_examples=60):
    """The embeddings against nt.embeddings_forward / nt.embeddings_backward: ids with pad ids."""
    @settings(max_examples=max_examples, **SUITE)
    @given(st.data())
    def prop(data):
        model = random_model(data, max_layers=1)
        inputs = data.draw(nt.model_inputs(model.config))
        ids, types = inputs["input_ids"], inputs["token_type_ids"]
        want, cache = nt.embeddings_forward(model, ids, types)
        got, mine = ob.embeddings_forward({k[len("embeddings."):]: v for k, v in model.state_dict().items()
                                           if k.startswith("embeddings.")}, ids, types, model.config, bugs)
        assert close(got, want)
        dout = np.random.default_rng(data.draw(st.integers(0, 99))).normal(size=got.shape)
        assert grads_close(ob.embeddings_backward(dout, mine), nt.embeddings_backward(dout, cache)[1])
    prop()


def model_suite(bugs=(), max_examples=40):
    """The whole encoder against BertModel: last_hidden_state and every gradient of
    model.backward(last_hidden_state=dout) (the pooler aside)."""
    @settings(max_examples=max_examples, **SUITE)
    @given(st.data())
    def prop(data):
        model = random_model(data)
        inputs = data.draw(nt.model_inputs(model.config))
        ids, types, keep = inputs["input_ids"], inputs["token_type_ids"], inputs["attention_mask"]
        out = model(input_ids=ids, token_type_ids=types, attention_mask=keep)
        got, cache = ob.encoder_forward(model.state_dict(), ids, types, keep, model.config, bugs)
        assert close(got, out.last_hidden_state)
        dout = np.random.default_rng(data.draw(st.integers(0, 99))).normal(size=got.shape)
        want = {k: v for k, v in model.backward(last_hidden_state=dout).items() if not k.startswith("pooler.")}
        assert grads_close(ob.encoder_backward(dout, cache), want)
    prop()


SUITES = {"layer": layer_suite, "embeddings": embeddings_suite, "model": model_suite}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_the_correct_implementation_passes(suite):
    SUITES[suite]()


# Where each classic bug lives, so which suites must catch it: the localised one (a layer, the
# embeddings) and the whole model, except the softmax's overflow, which needs scores past ~709:
# the layer suite feeds inputs of scale 30; through the embeddings' LayerNorm they stay O(1).
CAUGHT_BY = {
    "no_max_shift": ("layer",),
    "unbiased_variance": ("layer", "embeddings", "model"),
    "eps_outside_sqrt": ("layer", "embeddings", "model"),
    "mask_after_softmax": ("layer", "model"),
    "no_scale": ("layer", "model"),
    "tanh_gelu": ("layer", "model"),
    "interleaved_heads": ("layer", "model"),
    "no_softmax_sum_term": ("layer", "model"),
    "no_residual_grad": ("layer", "model"),
    "positions_from_1": ("embeddings", "model"),
}


def test_the_ten_classic_bugs_are_listed():
    assert sorted(CAUGHT_BY) == sorted(ob.CLASSIC_BUGS) and len(CAUGHT_BY) == 10


@pytest.mark.parametrize("bug,suite", [(b, s) for b, suites in CAUGHT_BY.items() for s in suites])
def test_each_classic_bug_is_caught(bug, suite):
    with pytest.raises(Exception):        # an assert, or the bug's own error (an index past the table)
        SUITES[suite](bugs=(bug,))


def test_the_per_layer_functions_localise_a_bug():
    """A bug in layer 1 of 2 (the residual gradient dropped): the whole model's gradients differ
    in layer 1 and below; run layer by layer on npbert's own hidden states, layer 0 agrees and
    layer 1 does not, which names the layer."""
    config = npbert.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=16, max_position_embeddings=16)
    model = npbert.BertModel(config, dtype=np.float64).eval()
    rng = np.random.default_rng(0)
    model.load_state_dict({k: (1.0 if k.endswith("LayerNorm.weight") else 0.0) + rng.normal(0, 0.5, v.shape)
                           for k, v in model.state_dict().items()})
    ids, keep = np.array([[2, 0, 9, 3, 4]]), np.array([[1, 1, 1, 1, 0]])
    hidden = model(input_ids=ids, attention_mask=keep, output_hidden_states=True).hidden_states
    mask = nt.get_extended_attention_mask(keep, ids.shape)
    verdicts = []
    for i in range(2):
        want, cache = nt.layer_forward(model, i, hidden[i], mask)
        got, mine = ob.layer_forward(nt.layer_state_dict(model, i), hidden[i], keep, config,
                                     ("no_residual_grad",) if i == 1 else ())
        dout = rng.normal(size=want.shape)
        dx, grads = nt.layer_backward(dout, cache)
        my_dx, my_grads = ob.layer_backward(dout, mine)
        verdicts.append(close(got, want) and grads_close({"x": my_dx, **my_grads}, {"x": dx, **grads}))
    assert verdicts == [True, False]
