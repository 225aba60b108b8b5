"""Finite differences in float64 through whole heads, end to end: the loss differentiated by
`backward()` against centred differences of the loss itself, for every parameter (sampled
entries), the tied decoder weight included.  No torch needed."""
import numpy as np
import pytest

from npbert.gradcheck import check_model

from head_helpers import analytically_zero, randomize, rel, tiny_config
import npbert

# 4th-order centred differences with h = 1e-4 in float64: truncation O(h^4) ~ 1e-16, round-off
# ~1e-16 / 1e-4 = 1e-12 absolute on an O(1) loss.  Normwise per parameter (max|analytic -
# numerical| / max|numerical| over the sampled entries) that leaves ~1e-9 against gradients of
# scale >= 1e-3; the bound is 1e-7.  A gradient that is analytically zero is held to an
# absolute 1e-9 instead (round-off leaves ~1e-12, a real mistake O(1e-2)).
FD_TOL = 1e-7
ZERO_ABS = 1e-9
B, T = 2, 5


def _check(model, inputs, max_entries=8):
    result = check_model(model, inputs, {"loss": 1.0}, h=1e-4, order=4, max_entries=max_entries, seed=0)
    zero = analytically_zero(result, type(model).__name__, loss=True)
    assert set(result) == set(model.state.params)
    for name, c in result.items():
        if name in zero:
            assert np.max(np.abs(c.analytic)) <= ZERO_ABS and np.max(np.abs(c.numerical)) <= ZERO_ABS, name
        else:
            err = rel(c.analytic, c.numerical)
            assert err < FD_TOL, f"{name}: normwise relative error {err:.2e}"


def test_pretraining_end_to_end_finite_differences():
    """MLM + NSP loss through the heads, the tied decoder / word embedding, every encoder layer."""
    rng = np.random.default_rng(0)
    model = randomize(npbert.BertForPreTraining(tiny_config(), dtype=np.float64), seed=1)
    ids = rng.integers(1, 29, size=(B, T))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    inputs = dict(input_ids=ids, attention_mask=mask, token_type_ids=rng.integers(0, 2, size=(B, T)),
                  labels=np.array([[3, -100, 7, -100, 1], [-100, 5, -100, -100, -100]]),
                  next_sentence_label=np.array([1, 0]))
    _check(model, inputs)


def test_word_embedding_gradient_is_checked_in_full():
    """The tied (V, H) array, every entry: the rows of tokens in the input get both uses, the
    others only the decoder's.

    The padding row (id 0, looked up at two positions here) follows torch's convention:
    nn.Embedding(padding_idx=0) gives the lookup of the padding row no gradient, although the
    loss does depend on it, so its analytic gradient is the decoder's part only.  check_model
    differentiates that row with the lookup held fixed (its note says so), so every row must
    agree; finite differences of the plain loss on that row show the convention is in force."""
    from npbert.gradcheck import check_gradients, model_loss

    rng = np.random.default_rng(2)
    model = randomize(npbert.BertForMaskedLM(tiny_config(num_hidden_layers=1), dtype=np.float64), seed=3)
    inputs = dict(input_ids=np.array([[2, 0, 5, 5, 0]]), attention_mask=np.array([[1, 1, 1, 1, 0]]),
                  labels=np.array([[-100, 4, -100, 9, -100]]))
    name = "bert.embeddings.word_embeddings.weight"
    result = check_model(model, inputs, {"loss": 1.0}, names=[name], h=1e-4, order=4)
    c = result[name]
    pad = model.config.pad_token_id
    assert rel(c.analytic, c.numerical) < FD_TOL and c.ok and "pad_token_id" in c.note
    assert np.abs(c.analytic[pad]).max() > 1e-3                # the decoder's part: not zero
    row = model.state.params[name][pad]                        # a view: perturbing it perturbs the table
    plain = check_gradients(lambda: model_loss(model(**inputs), {"loss": 1.0}), {"row": row},
                            {"row": c.analytic[pad]}, h=1e-4, order=4)["row"]
    assert rel(c.analytic[pad], plain.numerical) > 1e-3 and not plain.ok   # the lookup's part is left out


@pytest.mark.parametrize("cls_name,overrides,labels", [
    ("BertForSequenceClassification", dict(num_labels=3), np.array([2, 0])),
    ("BertForSequenceClassification", dict(num_labels=3), np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])),
    ("BertForSequenceClassification", dict(num_labels=1), np.array([0.5, -1.5])),
    ("BertForTokenClassification", dict(num_labels=3), np.array([[0, -100, 2, 1, -100], [1, 1, -100, -100, -100]])),
])
def test_classification_heads_in_train_mode_finite_differences(cls_name, overrides, labels):
    """Dropout on (hidden 0.1, classifier 0.2): the check holds the masks fixed (check_model
    rewinds the generator), which is what the backward differentiates."""
    rng = np.random.default_rng(4)
    config = tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, classifier_dropout=0.2,
                         num_hidden_layers=1, **overrides)
    model = randomize(getattr(npbert, cls_name)(config, dtype=np.float64), seed=5).train()
    inputs = dict(input_ids=rng.integers(1, 29, size=(B, T)), labels=labels)
    _check(model, inputs, max_entries=8)


def test_question_answering_and_multiple_choice_finite_differences():
    rng = np.random.default_rng(6)
    qa = randomize(npbert.BertForQuestionAnswering(tiny_config(num_hidden_layers=1), dtype=np.float64), seed=7)
    _check(qa, dict(input_ids=rng.integers(1, 29, size=(B, T)), start_positions=np.array([1, 9]),
                    end_positions=np.array([3, 4])), max_entries=8)
    mc = randomize(npbert.BertForMultipleChoice(tiny_config(num_hidden_layers=1), dtype=np.float64), seed=8)
    _check(mc, dict(input_ids=rng.integers(1, 29, size=(B, 3, T)), labels=np.array([2, 0])), max_entries=8)
