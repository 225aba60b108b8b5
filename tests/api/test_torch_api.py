"""torch / transformers module idioms on npbert models (issue 10): parameters(), named_modules(),
print(model), get_input_embeddings(), resize_token_embeddings()."""
import re

import numpy as np
import pytest

import npbert

KW = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
          intermediate_size=24, max_position_embeddings=16)
CLASSES = ["BertModel", "BertForMaskedLM", "BertForSequenceClassification", "BertForPreTraining",
           "BertForQuestionAnswering"]


def _torch_model(name):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    return getattr(transformers, name)(transformers.BertConfig(**KW))


@pytest.mark.parametrize("name", CLASSES)
def test_parameter_count_as_the_numel_loop(name):
    ours = getattr(npbert, name)(npbert.BertConfig(**KW))
    theirs = _torch_model(name)
    assert sum(p.size for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    assert all(a is b for a, (_, b) in zip(ours.parameters(), ours.named_parameters()))


@pytest.mark.parametrize("name", CLASSES)
def test_print_model_is_torchs_tree_without_dropout_and_activations(name):
    """torch prints nn.Dropout and activation modules too; npbert has no module objects for
    them (they are functions in npbert/ops), so those lines are dropped from torch's text."""
    ours = repr(getattr(npbert, name)(npbert.BertConfig(**KW)))
    theirs = [line for line in repr(_torch_model(name)).split("\n")
              if not re.search(r"\((dropout|intermediate_act_fn|transform_act_fn|activation)\)", line)]
    assert ours.split("\n") == theirs


@pytest.mark.parametrize("name", CLASSES)
def test_named_modules_are_torchs_bert_modules(name):
    ours = [n for n, _ in getattr(npbert, name)(npbert.BertConfig(**KW)).named_modules()]
    theirs = [n for n, m in _torch_model(name).named_modules()
              if n == "" or type(m).__name__.startswith("Bert")]
    assert ours == theirs


def test_get_input_embeddings_is_the_models_array():
    m = npbert.BertForMaskedLM(npbert.BertConfig(**KW))
    emb = m.get_input_embeddings()
    assert emb.weight is m.state.params["bert.embeddings.word_embeddings.weight"]
    assert (emb.num_embeddings, emb.embedding_dim, emb.padding_idx) == (40, 16, 0)
    np.testing.assert_array_equal(emb(np.array([[3, 4]])), emb.weight[[[3, 4]]])


@pytest.mark.parametrize("mean_resizing", [True, False])
def test_resize_token_embeddings(mean_resizing):
    m = npbert.BertForMaskedLM(npbert.BertConfig(**KW), dtype=np.float64).eval()
    old = m.get_input_embeddings().weight.copy()
    old_bias = m.state.params["cls.predictions.bias"].copy()
    emb = m.resize_token_embeddings(45, mean_resizing=mean_resizing)
    assert emb.weight.shape == (45, 16) and m.config.vocab_size == 45
    assert emb.weight is m.state.params["bert.embeddings.word_embeddings.weight"]   # the dict holds it
    np.testing.assert_array_equal(emb.weight[:40], old)
    if mean_resizing:   # transformers' mean resizing: covariance 1e-9 * cov, so rows within ~1e-4 of the mean
        np.testing.assert_allclose(emb.weight[40:], np.broadcast_to(old.mean(0), (5, 16)), atol=1e-3)
    assert m.state.params["cls.predictions.bias"].shape == (45,)
    np.testing.assert_array_equal(m.state.params["cls.predictions.bias"][:40], old_bias)
    out = m(input_ids=np.array([[2, 44, 3]]), labels=np.array([[-100, 44, -100]]))
    assert out.logits.shape == (1, 3, 45)
    grads = m.backward()
    assert grads["bert.embeddings.word_embeddings.weight"].shape == (45, 16)
    m.resize_token_embeddings(30)
    assert m.get_input_embeddings().weight.shape == (30, 16) and m.state.params["cls.predictions.bias"].shape == (30,)
    assert m.resize_token_embeddings(31, pad_to_multiple_of=8).num_embeddings == 32


def test_resize_matches_transformers_shapes():
    theirs = _torch_model("BertForMaskedLM")
    theirs.resize_token_embeddings(45)
    ours = npbert.BertForMaskedLM(npbert.BertConfig(**KW))
    ours.resize_token_embeddings(45)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items() if k in ours.state_dict()}
