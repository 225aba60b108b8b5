"""Bad input gives clear errors; backward()'s calling conventions; the tied gradient as the sum
of its two separately computed parts (hypothesis).  No torch needed."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import npbert
from npbert.ops.embedding import embedding_backward

from head_helpers import randomize, tiny_config

B, T, V = 2, 5, 29
IDS = np.array([[2, 7, 9, 4, 3], [5, 6, 1, 0, 0]])


def _model(cls_name, **overrides):
    return randomize(npbert.__dict__[cls_name](tiny_config(**overrides), dtype=np.float64), seed=0)


# ---- bad labels -----------------------------------------------------------------------------
def test_class_labels_outside_range_are_errors_but_minus_100_is_not():
    m = _model("BertForSequenceClassification", num_labels=3)
    with pytest.raises(IndexError, match=r"label 3 is out of bounds.*\[0, 3\)"):
        m(input_ids=IDS, labels=np.array([0, 3]))
    with pytest.raises(IndexError, match="label -1 is out of bounds"):
        m(input_ids=IDS, labels=np.array([-1, 0]))
    assert np.isfinite(m(input_ids=IDS, labels=np.array([-100, 2])).loss)


def test_sequence_classification_labels_must_fit_the_problem_type():
    m = _model("BertForSequenceClassification", num_labels=3)
    with pytest.raises(TypeError, match="multi-label classification needs float labels"):
        m(input_ids=IDS, labels=np.ones((B, 3), dtype=np.int16))     # not int64/int32: multi-label, as transformers
    m = _model("BertForSequenceClassification", num_labels=3)
    with pytest.raises(ValueError, match=r"multi-label.*shape \(2,\), expected \(2, 3\)"):
        m(input_ids=IDS, labels=np.array([0.0, 1.0]))
    m = _model("BertForSequenceClassification", num_labels=3, problem_type="single_label_classification")
    with pytest.raises(TypeError, match="single-label classification needs integer"):
        m(input_ids=IDS, labels=np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="shape"):
        m(input_ids=IDS, labels=np.array([0, 1, 2]))
    m = _model("BertForSequenceClassification", num_labels=1)
    with pytest.raises(ValueError, match="regression labels"):
        m(input_ids=IDS, labels=np.array([0.5, 1.0, 2.0]))
    m = _model("BertForSequenceClassification", num_labels=2, problem_type="regression")
    with pytest.raises(ValueError, match=r"regression labels have shape \(2,\), expected \(2, 2\)"):
        m(input_ids=IDS, labels=np.array([0.5, 1.0]))


def test_token_and_lm_labels_are_checked():
    m = _model("BertForMaskedLM")
    with pytest.raises(ValueError, match=r"labels has shape \(2, 6\), expected \(2, 5\)"):
        m(input_ids=IDS, labels=np.zeros((B, T + 1), dtype=np.int64))
    with pytest.raises(IndexError, match=f"label {V} is out of bounds"):
        m(input_ids=IDS, labels=np.full((B, T), V))
    with pytest.raises(TypeError, match="integer class indices"):
        m(input_ids=IDS, labels=np.zeros((B, T)))
    m = _model("BertForTokenClassification", num_labels=4)
    with pytest.raises(IndexError, match="label 4 is out of bounds"):
        m(input_ids=IDS, labels=np.full((B, T), 4))
    m = _model("BertForPreTraining")
    with pytest.raises(IndexError, match="label 2 is out of bounds"):
        m(input_ids=IDS, labels=np.full((B, T), -100), next_sentence_label=np.array([0, 2]))


def test_question_answering_positions_are_checked():
    m = _model("BertForQuestionAnswering")
    with pytest.raises(TypeError, match="start_positions must be integer"):
        m(input_ids=IDS, start_positions=np.array([0.0, 1.0]), end_positions=np.array([1, 2]))
    with pytest.raises(ValueError, match=r"end_positions has shape \(3,\), expected \(2,\)"):
        m(input_ids=IDS, start_positions=np.array([0, 1]), end_positions=np.array([1, 2, 3]))
    # (B, 1) is squeezed as transformers does; beyond T and negative are clamped, not errors
    out = m(input_ids=IDS, start_positions=np.array([[0], [99]]), end_positions=np.array([[-5], [2]]))
    assert np.isfinite(out.loss)
    m = _model("BertForQuestionAnswering", num_labels=3)
    with pytest.raises(ValueError, match="num_labels == 2"):
        m(input_ids=IDS)


def test_multiple_choice_inputs_must_be_3d():
    m = _model("BertForMultipleChoice")
    with pytest.raises(ValueError, match=r"input_ids must be 3-D \(batch, num_choices, sequence\)"):
        m(input_ids=IDS)
    with pytest.raises(ValueError, match="inputs_embeds must be 4-D"):
        m(inputs_embeds=np.zeros((B, T, 8)))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(2, 2, 5\)"):
        m(input_ids=np.stack([IDS] * 3, axis=1), attention_mask=np.ones((2, 2, 5), dtype=np.int64))
    with pytest.raises(IndexError, match="label 3 is out of bounds"):
        m(input_ids=np.stack([IDS] * 3, axis=1), labels=np.array([0, 3]))


# ---- backward()'s calling conventions -------------------------------------------------------
def test_backward_without_labels_is_a_clear_error():
    m = _model("BertForTokenClassification")
    with pytest.raises(RuntimeError, match="before any forward"):
        m.backward()
    m(input_ids=IDS)
    with pytest.raises(RuntimeError, match=r"computed no loss.*backward\(logits=\.\.\.\)"):
        m.backward()
    with pytest.raises(ValueError, match="a gradient for loss was given"):
        m.backward(loss=1.0)
    with pytest.raises(ValueError, match=r"gradient for logits has shape \(2, 5\)"):
        m.backward(logits=np.ones((B, T)))
    with pytest.raises(TypeError):
        m.backward(prediction_logits=np.ones((B, T, 2)))   # not an output of this head


def test_pretraining_needs_both_label_sets_for_its_loss():
    """As transformers: with only one of labels / next_sentence_label there is no loss; then
    backward() says what is missing."""
    m = _model("BertForPreTraining")
    out = m(input_ids=IDS, labels=np.full((B, T), 3))
    assert out.loss is None
    with pytest.raises(RuntimeError, match="both labels= and next_sentence_label="):
        m.backward()
    m = _model("BertForQuestionAnswering")
    assert m(input_ids=IDS, start_positions=np.array([1, 2])).loss is None
    with pytest.raises(RuntimeError, match="both start_positions= and end_positions="):
        m.backward()


def test_backward_is_linear_in_loss_and_upstream():
    """backward(loss=s, logits=d) = s * backward() + backward(logits=d), to round-off (1e-12
    relative: the same operations on scaled inputs).  attention.self.key.bias, analytically
    zero (round-off ~1e-16), is bounded by 1e-12 times the largest gradient of the model."""
    m = _model("BertForMaskedLM")
    labels = np.array([[-100, 4, -100, 9, -100], [3, -100, -100, -100, -100]])
    out = m(input_ids=IDS, labels=labels)
    d = np.random.default_rng(0).normal(size=out.logits.shape)
    g_loss = m.backward()
    m(input_ids=IDS, labels=labels)      # a fresh forward for each backward (a backward may free the caches)
    g_up = m.backward(logits=d)
    m(input_ids=IDS, labels=labels)
    g_both = m.backward(loss=2.5, logits=d)
    overall = max(np.max(np.abs(2.5 * g_loss[n] + g_up[n])) for n in g_loss)
    for name in g_loss:
        expected = 2.5 * g_loss[name] + g_up[name]
        scale = overall if name.endswith("attention.self.key.bias") else max(np.max(np.abs(expected)), 1e-300)
        assert np.max(np.abs(g_both[name] - expected)) <= 1e-12 * scale, name


# ---- the tied decoder weight ------------------------------------------------------------------
@settings(deadline=None, max_examples=15)
@given(hnp.arrays(np.int64, (2, 4), elements=st.integers(0, V - 1)),
       hnp.arrays(np.int64, (2, 4), elements=st.integers(-1, V - 1)),
       st.sampled_from(["BertForMaskedLM", "BertForPreTraining", "BertLMHeadModel"]))
def test_tied_gradient_is_the_sum_of_its_two_uses(ids, raw_labels, cls_name):
    """The word embedding gradient equals (decoder part) + (lookup part), each computed on its
    own: the decoder part by running the same model on inputs_embeds = W[ids] (so the lookup is
    not a use of W), the lookup part by scattering that run's inputs_embeds gradient into the
    rows of `ids` (the padding row excepted, as torch).  Same float64 operations either way:
    1e-13 relative."""
    labels = np.where(raw_labels < 0, -100, raw_labels)
    extra = {"next_sentence_label": np.array([0, 1])} if cls_name == "BertForPreTraining" else {}
    m = _model(cls_name, num_hidden_layers=1, is_decoder=cls_name == "BertLMHeadModel")
    word = "bert.embeddings.word_embeddings.weight"
    m(input_ids=ids, labels=labels, **extra)
    full = m.backward()[word]

    W = m.state.params[word]
    m(inputs_embeds=W[ids].copy(), labels=labels, **extra)
    decoder_part = m.backward()[word]
    lookup_part = embedding_backward(m.inputs_embeds_grad, (ids, W.shape), padding_idx=m.config.pad_token_id)
    expected = decoder_part + lookup_part
    scale = max(np.max(np.abs(expected)), 1e-300)
    assert np.max(np.abs(full - expected)) <= 1e-13 * scale


# ---- dtype ----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls_name,labels", [
    ("BertForPreTraining", dict(labels=np.array([[-100, 4, -100, 9, -100], [3, -100, -100, -100, -100]]),
                                next_sentence_label=np.array([0, 1]))),
    ("BertForSequenceClassification", dict(labels=np.array([[1.0, 0.0], [0.0, 1.0]]))),
    ("BertForQuestionAnswering", dict(start_positions=np.array([1, 2]), end_positions=np.array([3, 9]))),
])
def test_float32_model_computes_in_float32(cls_name, labels):
    """Outputs, loss and every gradient stay float32 (float64 labels are cast, never the
    model), and agree with the same model in float64: the loss to 1e-4 relative, each gradient
    to 1e-4 of the model's largest gradient (float32 round-off, eps 1.2e-7, grown through two
    layers and the loss; a real mistake is >= 1e-2)."""
    m64 = _model(cls_name)
    m32 = npbert.__dict__[cls_name](tiny_config(), dtype=np.float32)
    m32.load_state_dict(m64.state_dict())
    out32, out64 = m32(input_ids=IDS, **labels), m64(input_ids=IDS, **labels)
    g32, g64 = m32.backward(), m64.backward()
    assert np.asarray(out32.loss).dtype == np.float32
    assert abs(float(out32.loss) - float(out64.loss)) <= 1e-4 * abs(float(out64.loss))
    for name, value in out32.items():
        assert value.dtype == np.float32, name
    overall = max(np.max(np.abs(g)) for g in g64.values())
    for name, g in g32.items():
        assert g.dtype == np.float32, name
        assert np.max(np.abs(g - g64[name])) <= 1e-4 * overall, name
