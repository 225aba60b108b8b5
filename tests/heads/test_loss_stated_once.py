"""Each head's loss is stated once, in its loss_terms (npbert/modeling/loss_terms.py), and every
feature reads that statement: backward() is backward(loss=1), the counts planned before the forward
are the ones the forward's means used, and nothing outside the heads restates a term's name or
weight or asks which head class a model is.  (Against torch autograd: test_heads_vs_transformers.py.)"""
import ast
import inspect
import os

import numpy as np
import pytest

import npbert
from npbert.modeling import heads as head_modules

from head_helpers import tiny_config
from test_heads_vs_transformers import CASES

NPBERT = os.path.dirname(os.path.abspath(npbert.__file__))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_backward_is_loss_1_and_the_counts_are_the_declared_ones(case):
    _, cls_name, overrides, build = case
    model = getattr(npbert, cls_name)(tiny_config(**overrides), dtype=np.float64).eval()
    inputs, labels = build(np.random.default_rng(7))
    batch = {**inputs, **labels}
    out = model(**batch)
    plain = model.backward(retain_graph=True)
    one = model.backward(loss=1.0)
    assert all(np.array_equal(plain[n], one[n]) for n in plain)
    assert model.head_loss.counts == {t.name: t.count for t in model.loss_terms(batch)}
    assert float(out.loss) == pytest.approx(sum(t.weight * float(t.mean) for t in model.head_loss.terms), rel=1e-15)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_without_labels_backward_raises_naming_the_upstreams(case):
    _, cls_name, overrides, build = case
    model = getattr(npbert, cls_name)(tiny_config(**overrides), dtype=np.float64).eval()
    inputs, _ = build(np.random.default_rng(7))
    out = model(**inputs)
    assert out.get("loss") is None and model.loss_terms(inputs) == []
    first = next(k for k, v in out.items() if isinstance(v, np.ndarray))
    with pytest.raises(RuntimeError, match=rf"computed no loss.*backward\({first}=\.\.\.\)"):
        model.backward()
    with pytest.raises(ValueError, match="a gradient for loss was given, but the last forward computed no loss"):
        model.backward(loss=1.0)


def test_a_forward_that_returns_a_loss_itself_is_refused():
    """A head written the old way (a number as output.loss, the loss differentiated in _backward) would
    get no gradient from its loss: it is refused at the call, pointing to loss_terms."""
    class Old(npbert.BertForSequenceClassification):
        def forward(self, **kwargs):
            output, cache = super().forward(**kwargs)
            return type(output)(**{**output, "loss": np.float64(1.0)}), cache

    model = Old(tiny_config(), dtype=np.float64)
    with pytest.raises(TypeError, match="returned a loss itself.*loss_terms"):
        model(input_ids=np.array([[2, 5, 3]]))


def _string_constants(path):
    """The string constants of a module's code (docstrings left out)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


# the modules that read a model's loss (backward, data parallel, training, interpret, explain)
READERS = ["modeling/pretrained.py", "modeling/loss_terms.py", "modeling/loss.py", "distributed/loss.py",
           "training/trainer.py", "interpret/heads.py", "interpret/regroup.py", "explain/data.py",
           "explain/heads.py", "explain/labels.py", "cli/explain.py", "cli/head_importance.py"]


def test_no_term_name_or_weight_outside_its_head():
    """Each term's name is written once, in its head's class; no module that reads losses names a
    term.  ("regression" is left out: it is also config.problem_type's value, which the label
    parsers read.)"""
    names = {"masked_lm", "next_sentence", "causal_lm", "classification", "multi_label", "start", "end"}
    for rel_path in READERS:
        found = names & set(_string_constants(os.path.join(NPBERT, rel_path)))
        assert not found, f"npbert/{rel_path} names the loss term(s) {sorted(found)}"
    for cls_name in head_modules.__all__:
        source = inspect.getsource(getattr(head_modules, cls_name).loss_terms)
        for name in names:
            assert source.count(f'"{name}"') <= 1, (cls_name, name)
    qa = ast.parse(inspect.getsource(head_modules.BertForQuestionAnswering))     # its weight 1/2, in its code once
    halves = [n for n in ast.walk(qa) if isinstance(n, ast.Constant) and n.value == 0.5]
    divisions = [n for n in ast.walk(qa) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)]
    assert len(halves) == 1 and not divisions


def test_no_isinstance_over_head_classes_outside_the_heads():
    heads = set(head_modules.__all__)
    found = []
    for directory, _, files in os.walk(NPBERT):
        for f in files:
            path = os.path.join(directory, f)
            if not f.endswith(".py") or os.path.join("modeling", "heads") in path:
                continue
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass"):
                    named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                    named |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                    if named & heads:
                        found.append(f"{os.path.relpath(path, NPBERT)}:{node.lineno}")
    assert not found, found
