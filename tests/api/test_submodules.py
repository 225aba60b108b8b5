"""Submodules as torch's (issue 28): every nn.Linear / nn.Embedding / nn.LayerNorm / nn.Dropout /
activation of transformers' tree at the same attribute path, holding the model's own parameters,
callable, with torch's parameters() / named_parameters() / children() relative to the submodule."""
import numpy as np
import pytest

import npbert

pytestmark = pytest.mark.usefixtures("npbert_path")

KW = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
          max_position_embeddings=16)
CLASSES = ["BertModel", "BertForPreTraining", "BertForMaskedLM", "BertLMHeadModel", "BertForNextSentencePrediction",
           "BertForSequenceClassification", "BertForTokenClassification", "BertForMultipleChoice",
           "BertForQuestionAnswering"]


def _pair(name):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    extra = {"is_decoder": True} if name == "BertLMHeadModel" else {}
    return getattr(npbert, name)(npbert.BertConfig(**KW, **extra)), getattr(transformers, name)(
        transformers.BertConfig(**KW, **extra))


@pytest.mark.parametrize("name", CLASSES)
def test_every_submodule_at_transformers_path_with_its_parameters(name):
    """For every module of transformers' tree: the same class name at the same path, the same
    children, and named_parameters() relative to it with the same names and shapes; each parameter
    is the model's own object (a tied weight the same object under both paths)."""
    ours, theirs = _pair(name)
    our_modules = dict(ours.named_modules())
    for path, module in theirs.named_modules():
        mine = ours.get_submodule(path)
        assert mine is our_modules[path]
        assert type(mine).__name__.removeprefix("Fast") == type(module).__name__, path
        assert [n for n, _ in mine.named_children()] == [n for n, _ in module.named_children()], path
        got = [(n, p.shape) for n, p in mine.named_parameters()]
        assert got == [(n, tuple(p.shape)) for n, p in module.named_parameters()], path
        for n, p in mine.named_parameters():
            full = ".".join(x for x in (path, n) if x)
            owner = ours.state.params.get(full)
            assert owner is None or owner is p            # (a tied alias is the word embeddings' object)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert len(list(ours.children())) == len(list(theirs.children()))


def test_the_tutorials_attribute_paths():
    """The paths seeds 001, 002 and 004 use, each a torch-like module holding the model's arrays."""
    config = npbert.BertConfig(**KW)
    bert = npbert.BertModel(config, dtype=np.float64)
    p = bert.state.params
    assert bert.encoder.layer[0].attention.self.query.weight is p["encoder.layer.0.attention.self.query.weight"]
    assert bert.embeddings.word_embeddings.weight is p["embeddings.word_embeddings.weight"]
    assert repr(bert.pooler.dense) == "Linear(in_features=16, out_features=16, bias=True)"
    assert repr(bert.pooler.activation) == "Tanh()"
    assert repr(bert.encoder.layer[0].attention.self.dropout) == "Dropout(p=0.1, inplace=False)"
    assert repr(bert.encoder.layer[1].intermediate.intermediate_act_fn) == "GELUActivation()"
    layers = bert.encoder.layer
    assert len(layers) == 2 and list(layers) == [layers[0], layers[-1]] and len(layers[:1]) == 1
    assert [n for n, _ in layers[1].named_parameters()][:2] == ["attention.self.query.weight",
                                                                "attention.self.query.bias"]
    assert {id(q) for q in layers.parameters()} == {id(v) for k, v in p.items() if k.startswith("encoder.")}
    clf = npbert.BertForSequenceClassification(config)
    assert clf.classifier.weight is clf.state.params["classifier.weight"] and clf.dropout.p == 0.1
    assert npbert.BertForQuestionAnswering(config).qa_outputs.bias.shape == (2,)
    mlm = npbert.BertForMaskedLM(config)
    assert mlm.cls.predictions.decoder.weight is mlm.bert.embeddings.word_embeddings.weight
    assert mlm.cls.predictions.decoder.bias is mlm.cls.predictions.bias
    with pytest.raises(AttributeError, match="BertEncoder has no submodule 'layers'"):
        bert.get_submodule("encoder.layers.0")


def test_leaves_compute_with_the_reference_ops():
    torch = pytest.importorskip("torch")
    model = npbert.BertForPreTraining(npbert.BertConfig(**KW), dtype=np.float64).eval()
    x = np.random.default_rng(0).normal(size=(2, 3, 16))
    tx = torch.tensor(x)
    dense = model.bert.pooler.dense
    np.testing.assert_allclose(dense(x), torch.nn.functional.linear(tx, torch.tensor(np.asarray(dense.weight)),
                                                                    torch.tensor(np.asarray(dense.bias))).numpy(),
                               rtol=1e-13, atol=1e-15)        # float64: round-off of the same GEMM
    ln = model.bert.embeddings.LayerNorm
    np.testing.assert_allclose(ln(x), torch.nn.functional.layer_norm(tx, (16,), torch.tensor(np.asarray(ln.weight)),
                                                                     torch.tensor(np.asarray(ln.bias)), 1e-12).numpy(),
                               rtol=1e-12, atol=1e-12)
    assert np.array_equal(model.bert.pooler.activation(x), np.tanh(x))
    np.testing.assert_allclose(model.bert.encoder.layer[0].intermediate.intermediate_act_fn(x),
                               torch.nn.functional.gelu(tx).numpy(), rtol=1e-12, atol=1e-15)
    emb = model.bert.embeddings.word_embeddings
    assert np.array_equal(emb(np.array([[3, 4]])), np.asarray(emb.weight)[[[3, 4]]])
    with pytest.raises(IndexError, match=r"input_ids has values outside \[0, 40\)"):
        emb(np.array([[40]]))
    drop = model.bert.embeddings.dropout
    assert drop(x) is x or np.array_equal(drop(x), x)          # eval: the identity
    model.train()
    y = drop(np.ones((200, 16)))
    kept = y != 0
    assert np.allclose(y[kept], 1 / 0.9) and 0.8 < kept.mean() < 0.98     # inverted dropout, p = 0.1
    decoder = model.cls.predictions.decoder
    h = model.cls.predictions.transform(x)
    np.testing.assert_allclose(decoder(h), h @ np.asarray(decoder.weight).T + decoder.bias, rtol=1e-13, atol=1e-13)


def test_outputs_print_as_transformers():
    transformers = pytest.importorskip("transformers")
    import dataclasses
    from npbert.modeling import outputs
    for name in ("SequenceClassifierOutput", "QuestionAnsweringModelOutput", "BertForPreTrainingOutput",
                 "MaskedLMOutput", "BaseModelOutputWithPoolingAndCrossAttentions"):
        module = transformers.models.bert.modeling_bert if name == "BertForPreTrainingOutput" else transformers.modeling_outputs
        theirs = [f.name for f in dataclasses.fields(getattr(module, name))]
        ours = getattr(outputs, name)._fields
        assert [f for f in theirs if f in ours] == list(ours), name
    model = npbert.BertForSequenceClassification(npbert.BertConfig(**KW)).eval()
    out = model(input_ids=np.array([[2, 5, 3]]))
    text = repr(out)
    assert text.startswith("SequenceClassifierOutput(loss=None, logits=array([[")
    assert text.endswith("dtype=float32), hidden_states=None, attentions=None)")
    assert list(out.keys()) == ["logits"] and out[0] is out.logits and out["logits"] is out.logits
    assert out.to_tuple() == (out.logits,)
    out = model(input_ids=np.array([[2, 5, 3]]), labels=np.array([1]))
    assert repr(out).startswith(f"SequenceClassifierOutput(loss={out.loss!r}, logits=array(")
    loss, logits = out.to_tuple()
    assert loss is out.loss and float(loss) > 0
