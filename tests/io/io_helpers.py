"""Shared helpers for the checkpoint tests: tiny transformers models."""
import numpy as np
import pytest

TINY = dict(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=16, max_position_embeddings=24, type_vocab_size=2)


def tiny_hf_model(class_name="BertForPreTraining", seed=0, **overrides):
    """A randomly initialised tiny transformers BERT (skips without torch)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.BertConfig(**{**TINY, **overrides})
    model = getattr(transformers, class_name)(config).eval()
    with torch.no_grad():   # LayerNorm/bias start at 1/0: make them random too
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def torch_state_dict_numpy(model):
    """state_dict() as float arrays (copies), buffers dropped."""
    buffers = {name for name, _ in model.named_buffers()}
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()
            if k not in buffers}


def expected_shapes(model):
    """{name: shape} of named_parameters(): a tied weight is listed once."""
    return {k: tuple(p.shape) for k, p in model.named_parameters()}


def assert_same_tensors(actual, expected):
    """Same keys, dtypes, shapes, and bit-identical values (exact equality)."""
    assert sorted(actual) == sorted(expected)
    for k in expected:
        a, e = np.asarray(actual[k]), np.asarray(expected[k])
        assert a.dtype == e.dtype, (k, a.dtype, e.dtype)
        assert a.shape == e.shape, (k, a.shape, e.shape)
        assert np.array_equal(a, e), k
