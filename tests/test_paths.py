"""npbert.get_path / set_path / using_path and NPBERT_PATH: the switch between the reference
and the fast path (what each path computes is tested beside the ops and modules)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import npbert
from npbert.paths import PathWarning


def test_set_path_returns_the_previous_path_and_using_path_restores_it():
    before = npbert.get_path()
    try:
        assert npbert.set_path("reference") == before
        assert npbert.get_path() == "reference"
        with npbert.using_path("fast"):
            assert npbert.get_path() == "fast"
        assert npbert.get_path() == "reference"
    finally:
        npbert.set_path(before)


@pytest.mark.parametrize("bad", ["Reference", "slow", "", None, 1])
def test_unknown_paths_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="'fast', 'reference'"):
        npbert.set_path(bad)


def _path_in_subprocess(value):
    env = {k: v for k, v in os.environ.items() if k != "NPBERT_PATH"}
    if value is not None:
        env["NPBERT_PATH"] = value
    return subprocess.run([sys.executable, "-c", "import npbert; print(npbert.get_path())"],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value,expected", [(None, "fast"), ("reference", "reference"),
                                            ("fast", "fast"), (" Reference ", "reference")])
def test_the_environment_variable_chooses_the_path(value, expected):
    result = _path_in_subprocess(value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_a_bad_environment_variable_is_an_error_naming_it():
    result = _path_in_subprocess("turbo")
    assert result.returncode != 0
    assert "NPBERT_PATH" in result.stderr and "'turbo'" in result.stderr


def _tiny():
    return npbert.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=16)


def test_a_model_is_built_of_its_paths_classes_and_runs_its_path_whatever_is_on_later():
    ids = np.array([[2, 5, 6, 3], [2, 7, 3, 0]])
    with npbert.using_path("reference"):
        model = npbert.BertModel(_tiny(), dtype=np.float64).eval()
        want = model(input_ids=ids).last_hidden_state
    attention = model.encoder.layer[0].attention.self
    assert model.path == "reference" and type(attention) is npbert.modeling.BertSelfAttention
    with npbert.using_path("fast"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = model(input_ids=ids).last_hidden_state
        model(input_ids=ids)                                             # said once per model and path
    assert [w.category for w in caught] == [PathWarning] and "model.set_path('fast')" in str(caught[0].message)
    assert np.array_equal(got, want)                                     # its own path: the same arithmetic


def test_set_path_switches_a_model_to_the_other_classes_with_the_same_parameters():
    ids = np.array([[2, 5, 6, 3], [2, 7, 3, 0]])
    with npbert.using_path("reference"):
        model = npbert.BertForSequenceClassification(_tiny(), dtype=np.float64).eval()
        want = model(input_ids=ids).logits
    before = model.state.params["bert.encoder.layer.1.attention.self.query.weight"]
    assert model.set_path("fast") is model and model.path == "fast"
    layer = model.bert.encoder.layer[1]
    assert type(layer).__name__ == "BertLayer" and type(layer.attention.self).__name__ == "FastBertSelfAttention"
    assert type(layer.intermediate).__name__ == "FastBertIntermediate"
    assert model.state.params["bert.encoder.layer.1.attention.self.query.weight"] is before
    assert "BertSelfAttention(" in repr(model) and "Fast" not in repr(model)   # transformers' names either way
    np.testing.assert_allclose(model(input_ids=ids).logits, want, rtol=1e-12, atol=1e-15)   # float64 round-off
    model.set_path("reference")
    assert type(model.bert.encoder.layer[1].attention.self) is npbert.modeling.BertSelfAttention
    with warnings.catch_warnings():
        warnings.simplefilter("error", PathWarning)                     # an explicit choice is not warned about
        model(input_ids=ids)
    with pytest.raises(ValueError, match="'fast', 'reference'"):
        model.set_path("turbo")
    with pytest.raises(ValueError, match="whole model"):
        model.bert.set_path("fast")


def test_no_module_class_is_rewritten_in_npbert():
    """The issue's rule: which code runs is fixed when a model is built, never by assigning
    __class__ (a line that does is found by its text)."""
    import pathlib
    root = pathlib.Path(npbert.__file__).parent
    hits = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if "__class__ =" in line]
    assert not hits, hits


def test_the_reference_self_attention_computes_through_its_leaves_and_the_attention_op(monkeypatch):
    """Stepping through BertSelfAttention.forward on the reference path enters Linear.forward for the
    query, key and value and npbert.ops' attention op (spies on both; the backward likewise)."""
    from npbert.modeling.leaf_modules import Linear
    calls = []
    for name in ("forward", "backward"):
        original = getattr(Linear, name)

        def spy(self, *args, _original=original, _name=name):
            calls.append((_name, self.prefix))
            return _original(self, *args)
        monkeypatch.setattr(Linear, name, spy)
    for name in ("attention_forward", "attention_backward"):
        original = getattr(npbert.ops, name)

        def op_spy(*args, _original=original, _name=name, **kwargs):
            calls.append((_name, None))
            return _original(*args, **kwargs)
        monkeypatch.setattr(npbert.ops, name, op_spy)
    with npbert.using_path("reference"):
        model = npbert.BertModel(_tiny(), dtype=np.float64)
        attention = model.encoder.layer[0].attention.self
        x = np.random.default_rng(0).normal(size=(2, 3, 8))
        context, probs, cache = attention.forward(x)
        attention.backward(np.ones_like(context), cache)
    prefix = "encoder.layer.0.attention.self."
    assert calls == ([("forward", prefix + p) for p in ("query.", "key.", "value.")] + [("attention_forward", None)]
                     + [("attention_backward", None)] + [("backward", prefix + p) for p in ("query.", "key.", "value.")])
