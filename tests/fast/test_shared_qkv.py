"""Q, K and V's parameters live as the blocks of one array (npbert/modeling/fast.py,
share_qkv_memory), so the fast path's stacked projection is that array, not a new one per call.
What must hold: the array is taken as it is only while the three parameters really are its
blocks, and in-place changes to one of them (an optimizer step, an ablation) reach the forward."""
import numpy as np

import npbert
from heads.head_helpers import tiny_config
from npbert.modeling.fast_attention import _stacked

NAMES = ("query", "key", "value")


def _self_attention(model, i=0):
    return model.bert.encoder.layer[i].attention.self


def _logits(model, path, ids):
    return model.set_path(path)(input_ids=ids).logits              # the same parameters on `path`


def test_a_new_model_and_a_loaded_one_hold_q_k_v_as_one_array(tmp_path):
    model = npbert.BertForSequenceClassification(tiny_config(num_labels=2), dtype=np.float64)
    model.save_pretrained(tmp_path)
    for m in (model, npbert.BertForSequenceClassification.from_pretrained(tmp_path, dtype=np.float64)):
        for i in range(m.config.num_hidden_layers):
            sa = _self_attention(m, i)
            for kind in ("weight", "bias"):
                arrays = [sa.p(f"{n}.{kind}") for n in NAMES]
                stacked = _stacked(arrays)
                assert stacked is arrays[0].base                       # no copy
                np.testing.assert_array_equal(stacked, np.concatenate(arrays))


def test_in_place_changes_reach_the_fast_forward_and_a_replaced_parameter_is_concatenated():
    """Changing a key weight in place (as an optimizer does) changes the fast path's logits as the
    reference's; replacing the value weight by a new array (not a block any more) gives a
    concatenation, with the same numbers on both paths (float64, 1e-12)."""
    model = npbert.BertForSequenceClassification(tiny_config(num_labels=2), dtype=np.float64).eval()
    ids = np.random.default_rng(0).integers(1, model.config.vocab_size, (3, 6))
    before = _logits(model, "fast", ids)
    sa = _self_attention(model)
    sa.p("key.weight")[...] *= 3.0                                     # in place
    np.testing.assert_allclose(_logits(model, "fast", ids), _logits(model, "reference", ids), rtol=1e-12, atol=0)
    assert not np.allclose(_logits(model, "fast", ids), before)
    name = sa.prefix + "value.weight"
    model.state.params[name] = model.state.arrays[name] * 0.5          # a new array
    arrays = [sa.p(f"{n}.weight") for n in NAMES]
    assert _stacked(arrays) is not arrays[0].base
    np.testing.assert_array_equal(_stacked(arrays), np.concatenate(arrays))
    np.testing.assert_allclose(_logits(model, "fast", ids), _logits(model, "reference", ids), rtol=1e-12, atol=0)


def test_blocks_out_of_order_are_not_taken_as_the_stack():
    base = np.empty((6, 2))
    base[...] = np.arange(12.0).reshape(6, 2)
    q, k, v = base[0:2], base[2:4], base[4:6]
    assert _stacked([q, k, v]) is base
    np.testing.assert_array_equal(_stacked([k, q, v]), np.concatenate([k, q, v]))
    assert _stacked([k, q, v]) is not base
    np.testing.assert_array_equal(_stacked([q, k, base[0:2]]), np.concatenate([q, k, q]))
