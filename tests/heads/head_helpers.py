"""Shared pieces of the head tests: tiny configs, an npbert model and the same transformers
model on the same float64 weights, gradient comparison with stated tolerances, and a small
finite-difference helper (kept here so these tests depend on nothing outside npbert's core)."""
import numpy as np

import npbert

# A tiny BERT: 2 layers so that gradients pass through a full layer into another one,
# dropout off so that torch and npbert compute the same function.
TINY = dict(vocab_size=29, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
            max_position_embeddings=16, type_vocab_size=2, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, initializer_range=0.3, pad_token_id=0)

# The relative error every parameter gradient, logit and loss must meet against transformers in
# float64.  Both sides compute the same float64 expressions in a different order (BLAS blocking,
# summation order), so the differences are round-off: ~1e-15 relative per op, grown by the depth of
# the network to ~1e-13.  1e-9 leaves room for that and catches any real mistake (a missing term
# changes a gradient at the 1e-2 level or more).
REL_TOL = 1e-9


def tiny_config(**overrides):
    return npbert.BertConfig(**{**TINY, **overrides})


def randomize(model, seed=0, scale=0.5):
    """Replace every parameter by random values (LayerNorm weights around 1), so that no gradient
    path is hidden by a zero bias or a unit scale, and return the model."""
    rng = np.random.default_rng(seed)
    for name, p in model.state.params.items():
        base = 1.0 if name.endswith("LayerNorm.weight") else 0.0
        model.state.params[name] = (base + rng.normal(0.0, scale, size=p.shape)).astype(p.dtype)
    return model


def make_models(cls_name, config=None, seed=0, **overrides):
    """(npbert model, transformers model) of class `cls_name`, float64, the same random weights."""
    config = config or tiny_config(**overrides)
    ours = randomize(getattr(npbert, cls_name)(config, dtype=np.float64), seed=seed)
    theirs = hf_model(cls_name, config)
    load_into_torch(theirs, ours.state_dict())
    theirs.eval()
    ours.eval()
    return ours, theirs


def hf_model(cls_name, config):
    import torch
    import transformers

    d = config.to_dict()
    d.pop("architectures", None)
    tcfg = transformers.BertConfig(**d, attn_implementation="eager")
    model = getattr(transformers, cls_name)(tcfg).to(torch.float64)
    return model


def load_into_torch(model, state_dict):
    import torch

    missing, unexpected = model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state_dict.items()},
                                                strict=True)
    assert not missing and not unexpected


def t(a):
    import torch
    return None if a is None else torch.from_numpy(np.array(a))


def torch_grads(model):
    """{name: grad as numpy} over transformers' named_parameters() (a tied weight once)."""
    return {n: (p.grad.detach().numpy().copy() if p.grad is not None else np.zeros(tuple(p.shape)))
            for n, p in model.named_parameters()}


def rel(a, b):
    """Normwise relative error max|a - b| / max|b|, the measure REL_TOL bounds."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = np.max(np.abs(b)) if b.size else 0.0
    diff = np.max(np.abs(a - b)) if a.size else 0.0
    if scale == 0.0:
        return 0.0 if diff == 0.0 else np.inf
    return diff / scale


def assert_close(ours, theirs, what, tol=REL_TOL):
    err = rel(ours, theirs)
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:g}"


def analytically_zero(names_grads, cls_name, loss=True):
    """Parameters whose gradient is zero in exact arithmetic, so that only round-off (~1e-17)
    is left and a relative error is meaningless:

    - every layer's attention.self.key.bias: it adds the same amount to all scores of a query
      row, which softmax ignores;
    and when the loss is differentiated (cross-entropy is invariant to adding one constant to
    all the logits of a row):
    - BertForMultipleChoice's classifier.bias: one constant added to every choice's score;
    - BertForQuestionAnswering's qa_outputs.bias: one constant added to every position's start
      (end) logit; and the last layer's output.LayerNorm.bias: a vector c added to every
      position's final hidden state adds c . w_start to every start logit.
    """
    zero = {n for n in names_grads if n.endswith("attention.self.key.bias")}
    if loss and cls_name == "BertForMultipleChoice":
        zero.add("classifier.bias")
    if loss and cls_name == "BertForQuestionAnswering":
        zero.add("qa_outputs.bias")
        last = max(int(n.split(".")[3]) for n in names_grads if n.startswith("bert.encoder.layer."))
        zero.add(f"bert.encoder.layer.{last}.output.LayerNorm.bias")
    return zero


def assert_grads_close(ours, theirs, zero=(), tol=REL_TOL):
    """Every parameter: same names in the same order, same shapes, relative error <= tol.

    A gradient in `zero` (analytically zero) is compared with an absolute bound relative to
    the gradient scale of its layer (the sibling `.weight` gradient): both sides must be below
    1e-9 times that scale; round-off leaves them ~1e-16 times it, a real bug leaves O(1) times it."""
    assert list(ours) == list(theirs), (set(ours) ^ set(theirs), list(ours)[:5], list(theirs)[:5])
    for name in theirs:
        a, b = ours[name], theirs[name]
        assert a.shape == b.shape, f"{name}: {a.shape} vs {b.shape}"
        if name in zero:
            sibling = name[: -len("bias")] + "weight"
            scale = max(np.max(np.abs(theirs[sibling])), 1e-300)
            assert np.max(np.abs(a)) <= 1e-9 * scale, f"{name}: ours {np.max(np.abs(a)):.3e} is not ~0 (scale {scale:.3e})"
            assert np.max(np.abs(b)) <= 1e-9 * scale, f"{name}: transformers {np.max(np.abs(b)):.3e} is not ~0"
        else:
            assert_close(a, b, f"gradient of {name}", tol)


def numerical_gradient(f, x, h=1e-6):
    """Centred differences of the scalar f() with respect to every entry of x (changed in place
    and restored).  float64: truncation error O(h^2) ~ 1e-12, round-off ~ 1e-16 / h ~ 1e-10."""
    grad = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = x[i]
        x[i] = old + h
        fp = float(f())
        x[i] = old - h
        fm = float(f())
        x[i] = old
        grad[i] = (fp - fm) / (2 * h)
    return grad

