"""torch / transformers module idioms on npbert models (issues 10, 28): parameters(), named_modules(),
print(model), get_input_embeddings(), resize_token_embeddings()."""
import re

import numpy as np
import pytest

import npbert

pytestmark = pytest.mark.usefixtures("npbert_path")   # both paths: print(model) shows transformers' names on both paths (the fast twins too)

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
def test_print_model_is_torchs_tree(name):
    """Every line of torch's print(model), nn.Dropout and the activations included."""
    ours = repr(getattr(npbert, name)(npbert.BertConfig(**KW)))
    assert ours.split("\n") == repr(_torch_model(name)).split("\n")


@pytest.mark.parametrize("name", CLASSES)
def test_named_modules_are_torchs(name):
    """Every module of transformers' tree under the same qualified name and class name
    (nn.Linear, nn.Embedding, nn.LayerNorm, nn.Dropout, the activations, the ModuleList too)."""
    ours = [(n, type(m).__name__.removeprefix("Fast"))
            for n, m in getattr(npbert, name)(npbert.BertConfig(**KW)).named_modules()]
    theirs = [(n, type(m).__name__) for n, m in _torch_model(name).named_modules()]
    assert ours == theirs


def test_get_input_embeddings_is_the_models_array():
    m = npbert.BertForMaskedLM(npbert.BertConfig(**KW))
    emb = m.get_input_embeddings()
    assert emb.weight is m.state.params["bert.embeddings.word_embeddings.weight"]
    assert (emb.num_embeddings, emb.embedding_dim, emb.padding_idx) == (40, 16, 0)
    np.testing.assert_array_equal(emb(np.array([[3, 4]])), emb.weight[[[3, 4]]])
    for bad in ([[3, -1]], [[40]]):                   # a negative id would wrap around silently
        with pytest.raises(IndexError, match=r"input_ids has values outside \[0, 40\)"):
            emb(np.array(bad))
    with pytest.raises(TypeError, match="integer"):
        emb(np.array([[1.5]]))


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


@pytest.mark.parametrize("name", CLASSES)
def test_get_output_embeddings_as_transformers(name):
    """The MLM decoder, tied to the word embeddings, for the LM heads; None for the others.
    Applied to the transformed hidden states it gives the model's prediction logits."""
    model = getattr(npbert, name)(npbert.BertConfig(**KW), dtype=np.float64)
    out = model.get_output_embeddings()
    torch_model = _torch_model(name) if name != "BertModel" else None
    has_lm = name in ("BertForMaskedLM", "BertForPreTraining")
    assert (out is not None) == has_lm
    if torch_model is not None:
        assert (torch_model.get_output_embeddings() is not None) == has_lm
    if not has_lm:
        return
    assert out.weight is model.get_input_embeddings().weight and out.weight.shape == (40, 16)
    assert out.bias is model.state.params["cls.predictions.bias"]
    if torch_model is not None:
        t = torch_model.get_output_embeddings()
        assert (t.out_features, t.in_features) == (out.out_features, out.in_features)
    model.eval()
    ids = np.array([[2, 5, 7, 3]])
    logits = model(input_ids=ids).logits if name == "BertForMaskedLM" else model(input_ids=ids).prediction_logits
    h = model.bert(input_ids=ids).last_hidden_state
    transformed = model.cls.predictions.transform.forward(h)[0]
    np.testing.assert_allclose(out(transformed), logits, rtol=1e-12, atol=1e-12)


def test_config_has_transformers_output_defaults():
    """PretrainedConfig's output_attentions / output_hidden_states / return_dict defaults are
    readable on any config, and written to config.json only once set."""
    config = npbert.BertConfig(**KW)
    assert (config.output_attentions, config.output_hidden_states, config.return_dict) == (False, False, True)
    assert "output_attentions" not in config.to_dict()
    config.output_attentions = True
    assert config.to_dict()["output_attentions"] is True
    assert npbert.BertConfig(**KW).output_attentions is False              # the class default is untouched


@pytest.mark.parametrize("path", ["bert.embeddings", "bert.encoder.layer.0.attention", "bert.encoder.layer.1",
                                  "bert.encoder.layer", "bert.pooler", "bert.pooler.activation",
                                  "cls.predictions.transform", "cls.predictions.decoder",
                                  "bert.encoder.layer.0.attention.self.dropout"])
def test_print_a_submodule_as_torch(path):
    ours, theirs = npbert.BertForPreTraining(npbert.BertConfig(**KW)), _torch_model("BertForPreTraining")
    assert repr(ours.get_submodule(path)).split("\n") == repr(theirs.get_submodule(path)).split("\n")


def test_calling_submodules_as_the_tutorials_do():
    """embeddings(ids), layer.attention.self(h), pooler(h), cls(h): the forward's outputs
    without the cache, equal to what the whole model computes (eval mode: no dropout)."""
    model = npbert.BertForPreTraining(npbert.BertConfig(**KW), dtype=np.float64).eval()
    ids, types = np.array([[2, 5, 7, 9, 3]]), np.array([[0, 0, 0, 1, 1]])
    out = model(input_ids=ids, token_type_ids=types, output_hidden_states=True, output_attentions=True)
    bert = model.bert
    assert np.array_equal(bert.embeddings(ids, types), out.hidden_states[0])
    assert np.array_equal(bert.embeddings(input_ids=ids), bert.embeddings(ids, np.zeros_like(ids)))
    context, probs = bert.encoder.layer[0].attention.self(out.hidden_states[0])
    assert context.shape == (1, 5, 16) and np.array_equal(probs, out.attentions[0])
    layer_out = bert.encoder.layer[0](out.hidden_states[0])
    assert np.array_equal(layer_out[0], out.hidden_states[1])
    pooled = bert.pooler(out.hidden_states[-1])
    mlm, nsp = model.cls(out.hidden_states[-1], pooled)
    assert np.array_equal(mlm, out.prediction_logits) and np.array_equal(nsp, out.seq_relationship_logits)
    # the same checks as the model's forward (BertEmbeddings.prepare_inputs)
    with pytest.raises(IndexError, match=r"input_ids has values outside \[0, 40\)"):
        bert.embeddings(np.array([[1, 40]]))
    with pytest.raises(ValueError, match="exactly one of input_ids or inputs_embeds"):
        bert.embeddings()
