"""backward() frees the forward's activations as it goes, as torch's does; retain_graph=True keeps them."""
import numpy as np
import pytest

import npbert

pytestmark = pytest.mark.usefixtures("npbert_path")   # both paths: the fast twins free caches during the backward, the reference keeps them


def _model():
    cfg = npbert.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=12, max_position_embeddings=16)
    return npbert.BertModel(cfg, dtype=np.float64).eval()


def test_second_backward_without_retain_graph_is_a_clear_error():
    m = _model()
    ids = np.array([[1, 2, 3, 4]])
    out = m(input_ids=ids)
    m.backward(last_hidden_state=np.ones_like(out.last_hidden_state))
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        m.backward(last_hidden_state=np.ones_like(out.last_hidden_state))


def test_retain_graph_gives_the_same_gradients_twice():
    """Two backwards of one forward with retain_graph=True: identical arrays (same operations)."""
    m = _model()
    out = m(input_ids=np.array([[1, 2, 3, 4], [5, 6, 0, 0]]), attention_mask=np.array([[1, 1, 1, 1], [1, 1, 0, 0]]))
    d = np.random.default_rng(0).standard_normal(out.last_hidden_state.shape)
    g1 = m.backward(last_hidden_state=d, retain_graph=True)
    g2 = m.backward(last_hidden_state=d)
    for name in g1:
        np.testing.assert_array_equal(g1[name], g2[name], err_msg=name)


def test_a_rejected_backward_keeps_the_forward():
    """A backward refused for a bad upstream shape frees nothing: the next one works."""
    m = _model()
    out = m(input_ids=np.array([[1, 2, 3]]))
    with pytest.raises(ValueError, match="shape"):
        m.backward(last_hidden_state=np.ones((2, 2)))
    grads = m.backward(last_hidden_state=np.ones_like(out.last_hidden_state))
    assert np.abs(grads["encoder.layer.0.output.dense.weight"]).sum() > 0


@pytest.mark.parametrize("fields", [{"position_embedding_type": "relative_key"},
                                    {"position_embedding_type": "relative_key_query"},
                                    {"add_cross_attention": True, "is_decoder": True}])
def test_unsupported_variants_are_refused(fields):
    """A config npbert cannot run faithfully is an error, never a plain BERT in disguise."""
    cfg = npbert.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=12, **fields)
    with pytest.raises(NotImplementedError, match="not supported"):
        npbert.BertModel(cfg)


def test_no_grad_forward_gives_the_same_outputs_and_refuses_backward():
    """Under npbert.no_grad() the outputs are bit-identical (same operations); the activations
    are not kept, so a backward is a clear error, and the next normal forward works again."""
    m = _model()
    ids = np.array([[1, 2, 3, 4], [5, 6, 7, 0]])
    ref = m(input_ids=ids).last_hidden_state
    with npbert.no_grad():
        out = m(input_ids=ids, output_hidden_states=True)
    np.testing.assert_array_equal(out.last_hidden_state, ref)
    assert len(out.hidden_states) == m.config.num_hidden_layers + 1
    with pytest.raises(RuntimeError, match="no_grad"):
        m.backward(last_hidden_state=np.ones_like(ref))
    out = m(input_ids=ids)
    assert m.backward(last_hidden_state=np.ones_like(ref))["pooler.dense.weight"].shape == (8, 8)


def test_no_grad_forward_keeps_less_memory():
    """The point of no_grad: after the forward, the model holds no per-layer activations.
    Measured with tracemalloc (NumPy reports its allocations to it); with 4 layers the kept
    caches are several times the output, so the bound below cannot be met by accident."""
    import tracemalloc
    cfg = npbert.BertConfig(vocab_size=30, hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=64)
    m = npbert.BertModel(cfg, dtype=np.float64)
    ids = np.ones((4, 64), dtype=np.int64)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = m(input_ids=ids)
        kept_with_grad = tracemalloc.get_traced_memory()[0] - base
        del out
        m._cache = None
        base = tracemalloc.get_traced_memory()[0]
        with npbert.no_grad():
            out = m(input_ids=ids)
        kept_without = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert kept_without <= 2 * out.last_hidden_state.nbytes + out.pooler_output.nbytes + 4096
    assert kept_with_grad > 5 * kept_without


def test_train_eval_defaults_follow_transformers():
    """A freshly built model is in training mode (dropout on), as a torch module; from_pretrained
    returns it in eval mode, as transformers does."""
    import tempfile
    m = _model().train()
    assert m.training
    fresh = npbert.BertModel(m.config)
    assert fresh.training
    with tempfile.TemporaryDirectory() as d:
        m.save_pretrained(d)
        assert not npbert.BertModel.from_pretrained(d).training


def test_backward_without_any_upstream_gradient_is_an_error():
    """BertModel has no loss: backward() with nothing to differentiate says so instead of
    returning all-zero gradients."""
    m = _model()
    m(input_ids=np.array([[1, 2, 3]]))
    with pytest.raises(ValueError, match="at least one output"):
        m.backward()


def test_shape_mismatch_from_an_npbert_h5_names_the_key(tmp_path):
    """An npbert .h5 carries its own config (no config.json beside it); a config override that
    no longer fits its weights is the ValueError naming the key, like every other format."""
    m = _model()
    m.save_pretrained(tmp_path, format="h5")
    (tmp_path / "config.json").unlink()     # save_pretrained writes one beside it too; drop it
    with pytest.raises(ValueError, match="intermediate.dense.weight"):
        npbert.BertModel.from_pretrained(tmp_path, intermediate_size=13)
