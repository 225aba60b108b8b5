"""Parameters as torch users hold them (issue 28): model.parameters() yields the model's own arrays
as Parameter objects (NumPy arrays with .grad, .requires_grad, numel(), .data); outputs.loss.backward()
fills .grad; optimizers take the parameters and step() reads .grad; misuse is named."""
import gc
import pickle
import warnings

import numpy as np
import pytest

import npbert
from npbert import optim
from npbert.modeling.parameter import Parameter

pytestmark = pytest.mark.usefixtures("npbert_path")   # loss.backward() runs the model's backward: both paths

KW = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
          max_position_embeddings=16)
BATCH = dict(input_ids=np.array([[2, 5, 7, 9, 3], [2, 8, 4, 3, 0]]), attention_mask=np.array([[1] * 5, [1, 1, 1, 1, 0]]),
             labels=np.array([1, 0]))


def _clf(dtype=np.float64, seed=0):
    return npbert.BertForSequenceClassification(npbert.BertConfig(**KW), seed=seed, dtype=dtype)


def _no_warnings():
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("error")
    return ctx


# ---- the objects ----------------------------------------------------------------------------
def test_parameters_are_the_models_own_arrays():
    model = _clf()
    named = list(model.named_parameters())
    assert [n for n, _ in named] == list(model.state.params)
    assert all(p is model.state.params[n] and isinstance(p, np.ndarray) and isinstance(p, Parameter)
               for n, p in named)
    assert all(a is b for a, (_, b) in zip(model.parameters(), named))
    p = model.bert.pooler.dense.weight                                  # (16, 16)
    assert p is model.state.params["bert.pooler.dense.weight"]
    assert p.numel() == p.size == 256 and p.shape == (16, 16) and p.dim() == 2 and p.grad is None
    assert p.requires_grad is True
    # every NumPy function takes it; what it computes is a plain array
    for derived in (p * 2, p.T, p[:4], p.copy(), p.reshape(-1), p @ np.ones(16), np.sum(p, axis=0), np.tanh(p),
                    np.concatenate([p, p]), p.astype(np.float32), p.data, p.detach(), p.clone()):
        assert type(derived) is np.ndarray
    assert np.shares_memory(p.data, p) and np.shares_memory(p.T, p)
    assert repr(p).startswith("Parameter containing:\narray([[")


def test_in_place_updates_change_the_model():
    model = _clf().eval()
    before = model(**BATCH).logits
    p = model.classifier.bias
    p += 1.0                                          # a Parameter stays a Parameter under +=
    assert p is model.state.params["classifier.bias"]
    np.testing.assert_allclose(model(**BATCH).logits, before + 1.0, rtol=0, atol=1e-12)
    p.data = np.zeros(2)                              # torch's p.data = ...: copied into the memory
    p.zero_()
    assert np.all(model.state.arrays["classifier.bias"] == 0)
    with pytest.raises(ValueError, match="classifier.bias.*shape"):
        p.data = np.zeros(3)


def test_pickle_and_copy_give_plain_arrays():
    p = _clf().classifier.weight
    for q in (pickle.loads(pickle.dumps(p)), p.__copy__(), p.__deepcopy__({})):
        assert type(q) is np.ndarray and np.array_equal(q, p) and not np.shares_memory(q, p)


def test_requires_grad_is_freeze():
    model, other = _clf(), _clf()
    for name, p in model.named_parameters():
        if name.startswith("bert.embeddings"):
            p.requires_grad = False
    other.freeze("bert.embeddings")
    assert model.state.frozen == other.state.frozen
    assert not model.is_trainable("bert.embeddings.LayerNorm.bias")
    model(**BATCH)
    assert not any(n.startswith("bert.embeddings") for n in model.backward())
    model.bert.embeddings.requires_grad_(True)                  # torch's Module.requires_grad_
    assert not model.state.frozen
    model.bert.encoder.layer[0].requires_grad_(False)
    assert model.state.frozen == {n for n in model.state.params if n.startswith("bert.encoder.layer.0.")}
    assert model.num_parameters(only_trainable=True) == sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---- loss.backward() ------------------------------------------------------------------------
def test_loss_backward_fills_grad_as_model_backward_and_accumulates():
    model = _clf().train()
    state = model.state.rng.bit_generator.state
    out = model(**BATCH)
    grads = model.backward(retain_graph=True)                   # the dict form of the same forward
    assert all(p.grad is None for p in model.parameters())      # ... leaves .grad alone
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad.shape == p.shape and p.grad.dtype == p.dtype and type(p.grad) is np.ndarray
        np.testing.assert_array_equal(p.grad, grads[name])      # the same backward, bit for bit
    first = {n: p.grad.copy() for n, p in model.named_parameters()}
    model.state.rng.bit_generator.state = state                 # the same dropout masks again
    model(**BATCH).loss.backward()                              # accumulates, as torch
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.grad, first[name] + grads[name])
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_scaled_loss_backward_and_loss_as_a_number():
    model = _clf().eval()
    out = model(**BATCH)
    grads = model.backward(retain_graph=True)
    loss = out.loss
    assert isinstance(loss, np.float64) and float(loss) == loss.item() and f"{loss:.3f}" == f"{float(loss):.3f}"
    assert str(loss) == str(float(loss)) and loss.mean() is loss
    (loss / 4).backward()                                      # gradient accumulation's scaled loss
    for name, p in model.named_parameters():                   # x/4 is exact in binary: the same bits / 4
        np.testing.assert_array_equal(p.grad, grads[name] / 4)
    assert type(loss + 1) is type(loss) and float(loss + 1) == float(loss) + 1   # a constant: the same gradient
    assert type(loss * loss) is np.float64                     # other arithmetic: a plain NumPy float


def test_frozen_and_unused_parameters_keep_grad_none():
    model = _clf()
    model.classifier.weight.requires_grad = False
    model(**BATCH).loss.backward()
    assert model.classifier.weight.grad is None and model.classifier.bias.grad is not None
    mlm = npbert.BertForMaskedLM(npbert.BertConfig(**KW), dtype=np.float64)
    mlm(inputs_embeds=np.ones((1, 3, 16)), labels=np.array([[1, -100, 2]])).loss.backward()
    assert mlm.bert.embeddings.position_embeddings.weight.grad is not None
    # the word embeddings are used by the decoder only (inputs_embeds given): that use's gradient
    assert mlm.get_input_embeddings().weight.grad is not None


def test_tied_decoder_is_one_parameter_and_gets_both_uses():
    mlm = npbert.BertForMaskedLM(npbert.BertConfig(**KW), dtype=np.float64)
    decoder = mlm.get_output_embeddings()
    assert decoder is mlm.cls.predictions.decoder
    assert decoder.weight is mlm.get_input_embeddings().weight is mlm.bert.embeddings.word_embeddings.weight
    assert decoder.bias is mlm.cls.predictions.bias is mlm.state_dict()["cls.predictions.decoder.bias"]
    mlm.tie_weights()                                             # already tied: a check, no change
    assert decoder.weight is mlm.get_input_embeddings().weight
    out = mlm(input_ids=np.array([[2, 5, 7, 3]]), labels=np.array([[-100, 6, -100, -100]]))
    grads = mlm.backward(retain_graph=True)
    out.loss.backward()
    np.testing.assert_array_equal(decoder.weight.grad, grads["bert.embeddings.word_embeddings.weight"])
    assert len(list(mlm.parameters())) == len(grads)               # the tied weight once
    mlm.config.tie_word_embeddings = False
    with pytest.raises(NotImplementedError, match="tie_word_embeddings"):
        mlm.tie_weights()


def test_loss_backward_misuse_is_named():
    model = _clf()
    old = model(**BATCH).loss
    new = model(**BATCH).loss
    with pytest.raises(RuntimeError, match="forward call 1 .* called again since"):
        old.backward()
    new.backward()
    with pytest.raises(RuntimeError, match="second time after one forward"):
        new.backward()
    with npbert.no_grad():
        loss = model(**BATCH).loss
    with pytest.raises(RuntimeError, match="no_grad"):
        loss.backward()


# ---- optimizers -----------------------------------------------------------------------------
def _torch_style(model, opt, steps=3, clip=None):
    for _ in range(steps):
        loss = model(**BATCH).loss
        loss.backward()
        if clip:
            optim.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad()


def _dict_style(model, opt, steps=3, clip=None):
    for _ in range(steps):
        model(**BATCH)
        grads = model.backward()
        if clip:
            optim.clip_grad_norm_(grads, clip)
        opt.step(grads)


@pytest.mark.parametrize("make", ["bare", "groups"])
def test_optimizer_on_parameters_equals_the_dict_form(make):
    """AdamW(model.parameters()) + loss.backward() + step() gives the dict form's parameters bit
    for bit (the same gradients, the same update), groups of bare parameters too."""
    a, b = _clf().train(), _clf().train()
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
    if make == "bare":
        opt_a, opt_b = optim.AdamW(a.parameters(), lr=1e-3), optim.AdamW(b.named_parameters(), lr=1e-3)
    else:
        param_optimizer = list(a.named_parameters())
        opt_a = optim.AdamW([
            {"params": [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
            {"params": [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], "weight_decay": 0.0}],
            lr=1e-3)
        opt_b = optim.AdamW(optim.optimizer_grouped_parameters(b, weight_decay=0.01, no_decay=no_decay), lr=1e-3)
        assert [g["params"] for g in opt_a.param_groups] == [g["params"] for g in opt_b.param_groups]
    _torch_style(a, opt_a, clip=0.5)
    _dict_style(b, opt_b, clip=0.5)
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_array_equal(p, q, err_msg=name)
    assert all(p.grad is None for p in a.parameters())            # zero_grad(set_to_none=True)
    sd = opt_a.state_dict()                                       # names and plain arrays, as before
    assert set(sd["state"]) == set(a.state.params) and type(sd["state"]["classifier.bias"]["exp_avg"]) is np.ndarray


def test_zero_grad_set_to_none_false_and_clip_norm():
    model = _clf()
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    model(**BATCH).loss.backward()
    grads = {n: p.grad.copy() for n, p in model.named_parameters()}
    total = optim.clip_grad_norm_(model.parameters(), 1e-3)
    assert np.isclose(total, np.sqrt(sum(np.vdot(g, g) for g in grads.values())), rtol=1e-12)
    coef = 1e-3 / (total + 1e-6)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad, grads[name] * coef, rtol=1e-12, atol=0)
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    with pytest.raises(TypeError, match="not a model parameter"):
        optim.clip_grad_norm_([np.zeros(3)], 1.0)


def test_step_without_gradients_warns_naming_the_groups():
    model = _clf()
    groups = [{"params": list(model.bert.parameters())}, {"params": list(model.classifier.parameters()), "lr": 1e-2}]
    opt = optim.AdamW(groups, lr=1e-3)
    before = model.classifier.weight.copy()
    with pytest.warns(UserWarning, match=r"no parameter has a gradient"):
        opt.step()
    assert np.array_equal(model.classifier.weight, before)
    model.bert.requires_grad_(False)
    model(**BATCH).loss.backward()
    with pytest.warns(UserWarning, match=r"group 0 \(\d+ parameters, e.g. 'bert.embeddings.word_embeddings.weight'\) "
                                         r"has no gradient"):
        opt.step()
    assert not np.array_equal(model.classifier.weight, before)    # group 1 was updated


def test_bad_parameters_are_named():
    model = _clf()
    p = model.classifier.weight
    with pytest.raises(ValueError, match=r"grad of parameter 'classifier.weight' has shape \(3, 16\)"):
        p.grad = np.zeros((3, 16))
    with pytest.raises(TypeError, match=r"grad of parameter 'classifier.weight' has dtype float32"):
        p.grad = np.zeros((2, 16), dtype=np.float32)
    with pytest.raises(TypeError, match=r"requires_grad of parameter 'classifier.weight' must be a bool"):
        p.requires_grad = "no"                                   # truthy: it would have unfrozen it
    assert p.requires_grad is True
    with pytest.raises(TypeError, match="item 0 is a plain numpy array"):
        optim.AdamW([np.zeros(3)])
    with pytest.raises(TypeError, match="computed from a parameter"):
        optim.AdamW([p.T.view(Parameter)])
    with pytest.raises(TypeError, match="computed from a parameter|plain numpy array"):
        optim.AdamW([p.T])
    with pytest.warns(UserWarning, match=r"frozen \(requires_grad=False\), e.g. \['classifier.bias'\]"):
        model.classifier.bias.requires_grad = False
        optim.AdamW(model.classifier.parameters())
    with pytest.raises(TypeError, match="plain arrays"):
        optim.AdamW([("w", np.zeros(3))]).step()                 # no .grad to read
    other = _clf()
    with pytest.raises(ValueError, match="two different parameters are named 'classifier.weight'"):
        optim.AdamW([model.classifier.weight, other.classifier.weight])


def test_parameter_of_a_freed_or_resized_model_is_named():
    mlm = npbert.BertForMaskedLM(npbert.BertConfig(**KW))
    old = mlm.get_input_embeddings().weight
    opt = optim.AdamW(mlm.parameters(), lr=1e-3)
    mlm.resize_token_embeddings(44)
    assert mlm.get_input_embeddings().weight is not old and mlm.get_input_embeddings().weight.shape == (44, 16)
    with pytest.raises(RuntimeError, match="'bert.embeddings.word_embeddings.weight' is no longer the model's"):
        opt.step()
    with pytest.raises(RuntimeError, match="no longer the model's"):
        optim.AdamW([old])
    p = mlm.cls.predictions.transform.dense.weight
    del mlm, opt, old
    gc.collect()
    with pytest.raises(RuntimeError, match="'cls.predictions.transform.dense.weight' belongs to a model that no longer"):
        p.requires_grad
    with pytest.raises(RuntimeError, match="no longer exists"):
        optim.AdamW([p])
    assert p.shape == (16, 16) and float(p.sum()) == float(np.asarray(p).sum())   # still an array


# ---- checkpoints ----------------------------------------------------------------------------
def test_checkpoints_keep_working(tmp_path):
    model = _clf()
    model(**BATCH).loss.backward()
    model.save_pretrained(tmp_path)
    again = npbert.BertForSequenceClassification.from_pretrained(tmp_path, dtype=np.float64)
    assert all(isinstance(p, Parameter) and p.grad is None for p in again.parameters())
    for (n, p), q in zip(model.named_parameters(), again.parameters()):
        np.testing.assert_array_equal(p, q, err_msg=n)
    held = again.classifier.weight
    again.load_state_dict({k: v * 0 for k, v in model.state_dict().items()})
    assert again.classifier.weight is held and not held.any()       # in place: an optimizer's arrays stay valid
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    opt.step()
    opt2 = optim.AdamW(again.parameters(), lr=1e-3)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state["classifier.weight"]["step"] == 1
