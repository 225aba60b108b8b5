"""The forward call as transformers': flag defaults from the config, return_dict=False tuples,
positional arguments (issue 10, "Found when tried as a new user would")."""
import os

import numpy as np
import pytest

import npbert

pytestmark = pytest.mark.usefixtures("npbert_path")   # both paths: the forward call is the same on both paths


def _config(**kw):
    return npbert.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=24, max_position_embeddings=16, **kw)


IDS = np.array([[2, 5, 7, 9, 3], [2, 11, 12, 3, 0]])
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])


def test_flags_stored_in_the_config_are_the_forward_defaults(tmp_path):
    """from_pretrained(path, output_attentions=True, output_hidden_states=True): outputs[-1] is the
    attentions (the bertviz idiom), not pooler_output."""
    npbert.BertModel(_config(), dtype=np.float64).save_pretrained(str(tmp_path))
    model = npbert.BertModel.from_pretrained(str(tmp_path), dtype=np.float64,
                                             output_attentions=True, output_hidden_states=True)
    out = model(input_ids=IDS, attention_mask=MASK)
    assert len(out.attentions) == 2 and len(out.hidden_states) == 3
    assert out[-1] is out.attentions
    assert out[-1][0].shape == (2, 2, 5, 5)
    # An explicit False in the call wins over the config, as in transformers.
    out = model(input_ids=IDS, output_attentions=False, output_hidden_states=False)
    assert out.attentions is None and out.hidden_states is None


def test_config_flags_reach_the_heads():
    model = npbert.BertForSequenceClassification(_config(output_hidden_states=True), dtype=np.float64).eval()
    out = model(input_ids=IDS)
    assert len(out.hidden_states) == 3


def test_return_dict_false_gives_transformers_tuple():
    model = npbert.BertModel(_config(), dtype=np.float64).eval()
    out = model(input_ids=IDS, attention_mask=MASK)
    tup = model(input_ids=IDS, attention_mask=MASK, return_dict=False)
    assert isinstance(tup, tuple) and len(tup) == 2
    np.testing.assert_array_equal(tup[0], out.last_hidden_state)   # same operations: exact
    np.testing.assert_array_equal(tup[1], out.pooler_output)
    # labels: loss first, as transformers' (loss,) + output
    head = npbert.BertForSequenceClassification(_config(return_dict=False), dtype=np.float64).eval()
    loss, logits = head(input_ids=IDS, labels=np.array([0, 1]))
    assert np.ndim(loss) == 0 and logits.shape == (2, 2)
    # backward still works after a tuple forward
    grads = head.backward()
    assert "classifier.weight" in grads


def test_positional_arguments_follow_forward_order():
    model = npbert.BertModel(_config(), dtype=np.float64).eval()
    by_name = model(input_ids=IDS, attention_mask=MASK)
    by_position = model(IDS, MASK)
    np.testing.assert_array_equal(by_position.last_hidden_state, by_name.last_hidden_state)
    with pytest.raises(TypeError, match="multiple values for argument 'input_ids'"):
        model(IDS, input_ids=IDS)
