"""BertModel behaviour transformers 5.x cannot check for us, and the contract around the math:
head_mask and 3-D masks against an explicit NumPy formula, clear errors on bad input, dropout
(train/eval, seeds, its backward), initialisation, state_dict and gradient keys, and that
nothing the caller passes in (or gets back) is written to.
"""
import math

import numpy as np
import pytest

import npbert
from npbert.gradcheck import check_model, rel_error

from bert_helpers import FD, assert_model_results, hf_model_and_twin, random_batch, random_model, tiny_config


# ---- the explicit formula -----------------------------------------------------------------
def reference_bert(P, c, ids, types, mask3d, head_mask):
    """BERT written out in plain NumPy, float64, from the paper / transformers 4.x:
    mask3d (B, F, T) 0/1 (1 = query f may attend to key t), head_mask (L, N) multiplying the
    attention probabilities.  Returns (last_hidden_state, pooler_output, attention probs)."""
    erf = np.vectorize(math.erf)

    def ln(x, prefix):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + c.layer_norm_eps) * P[prefix + ".weight"] + P[prefix + ".bias"]

    def dense(x, prefix):
        return x @ P[prefix + ".weight"].T + P[prefix + ".bias"]

    B, T = ids.shape
    N, D = c.num_attention_heads, c.hidden_size // c.num_attention_heads
    x = (P["embeddings.word_embeddings.weight"][ids] + P["embeddings.token_type_embeddings.weight"][types]
         + P["embeddings.position_embeddings.weight"][np.arange(T)])
    x = ln(x, "embeddings.LayerNorm")
    all_probs = []
    for layer in range(c.num_hidden_layers):
        p = f"encoder.layer.{layer}."
        q, k, v = (dense(x, p + "attention.self." + n).reshape(B, T, N, D).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
        scores = scores + (1.0 - mask3d[:, None, :, :]) * np.finfo(np.float64).min
        e = np.exp(scores - scores.max(-1, keepdims=True))
        probs = e / e.sum(-1, keepdims=True) * head_mask[layer][None, :, None, None]
        all_probs.append(probs)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, N * D)
        a = ln(dense(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = dense(a, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))                    # gelu (erf)
        x = ln(dense(h, p + "output.dense") + a, p + "output.LayerNorm")
    pooled = np.tanh(dense(x[:, 0], "pooler.dense"))
    return x, pooled, all_probs


MASK_3D = np.array([[[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]],
                    [[1, 1, 0, 1, 1], [0, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 0, 0, 1, 0], [0, 0, 1, 0, 0]]])
# Same formula in the same order up to summation: ~1e-15 relative per entry; 1e-10 allows the
# max-over-entries metric on entries small by cancellation.
REF_TOL = 1e-10


def test_reference_formula_equals_transformers():
    """The explicit formula is itself right: with a 2-D padding mask (as 3-D) and no head mask
    it gives transformers' numbers."""
    model, hf = hf_model_and_twin(seed=20)
    torch = pytest.importorskip("torch")
    ids, types, mask = random_batch(model.config, 2, 5, seed=20)
    last, pooled, _ = reference_bert(model.state.params, model.config, ids, types,
                                     np.broadcast_to(mask[:, None, :], (2, 5, 5)).astype(float),
                                     np.ones((2, 2)))
    t = hf(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(types), attention_mask=torch.tensor(mask))
    assert rel_error(last, t.last_hidden_state.detach().numpy()) < REF_TOL
    assert rel_error(pooled, t.pooler_output.detach().numpy()) < REF_TOL


@pytest.mark.parametrize("head_mask", [None, [1.0, 0.0], [[0.5, 1.0], [0.0, 2.0]]])
@pytest.mark.parametrize("three_d", [False, True])
def test_head_mask_and_3d_mask_against_formula(head_mask, three_d):
    model = random_model(seed=21)
    c = model.config
    ids, types, mask = random_batch(c, 2, 5, seed=21)
    m3 = MASK_3D if three_d else np.broadcast_to(mask[:, None, :], (2, 5, 5))
    hm = np.ones((2, 2)) if head_mask is None else np.broadcast_to(np.asarray(head_mask, float), (2, 2))
    out = model(input_ids=ids, token_type_ids=types, attention_mask=MASK_3D if three_d else mask,
                head_mask=None if head_mask is None else np.asarray(head_mask), output_attentions=True)
    last, pooled, probs = reference_bert(model.state.params, c, ids, types, m3.astype(float), hm)
    assert rel_error(out.last_hidden_state, last) < REF_TOL
    assert rel_error(out.pooler_output, pooled) < REF_TOL
    for a, b in zip(out.attentions, probs):
        assert rel_error(a, b) < REF_TOL
    if three_d:                                   # masked (query, key) pairs get probability 0
        assert np.all(out.attentions[0][np.broadcast_to((MASK_3D == 0)[:, None], out.attentions[0].shape)] == 0)


def test_3d_mask_equal_rows_equals_2d_mask():
    """A 3-D mask whose every query row is the 2-D padding mask is the same computation."""
    model = random_model(seed=22)
    ids, _, mask = random_batch(model.config, 3, 4, seed=22)
    a = model(input_ids=ids, attention_mask=mask).last_hidden_state
    b = model(input_ids=ids, attention_mask=np.repeat(mask[:, None, :], 4, axis=1)).last_hidden_state
    assert np.array_equal(a, b)


def test_head_mask_1d_equals_2d_broadcast():
    model = random_model(seed=23)
    ids, _, mask = random_batch(model.config, 2, 4, seed=23)
    a = model(input_ids=ids, attention_mask=mask, head_mask=np.array([0.3, 1.0])).last_hidden_state
    b = model(input_ids=ids, attention_mask=mask, head_mask=np.array([[0.3, 1.0], [0.3, 1.0]])).last_hidden_state
    assert np.array_equal(a, b)


# ---- errors ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small(npbert_path):          # built on each path (a model's path is fixed when it is built)
    return random_model(seed=24)


@pytest.mark.parametrize("ids", [[[1, 2, 24]], [[1, -1, 2]]])
def test_error_ids_out_of_range(small, ids):
    with pytest.raises(IndexError, match=r"input_ids has values outside \[0, 24\)"):
        small(input_ids=np.array(ids))


def test_error_sequence_too_long(small):
    with pytest.raises(ValueError, match="longer than max_position_embeddings=16"):
        small(input_ids=np.ones((1, 17), dtype=np.int64))
    small(input_ids=np.ones((1, 16), dtype=np.int64))               # the longest allowed


def test_error_token_type_out_of_range(small):
    with pytest.raises(IndexError, match=r"token_type_ids has values outside \[0, 2\)"):
        small(input_ids=np.ones((1, 3), dtype=np.int64), token_type_ids=np.array([[0, 1, 2]]))


@pytest.mark.parametrize("kwargs,match", [
    (dict(attention_mask=np.ones((2, 4))), r"attention_mask has shape \(2, 4\), the inputs are \(2, 3\)"),
    (dict(attention_mask=np.ones((2, 3, 4))), r"3-D attention_mask must be"),
    (dict(token_type_ids=np.zeros((2, 4), dtype=np.int64)), r"token_type_ids has shape \(2, 4\)"),
    (dict(position_ids=np.zeros((2, 4), dtype=np.int64)), r"position_ids of shape \(2, 4\) does not fit"),
    (dict(head_mask=np.ones(3)), r"head_mask must have shape"),
])
def test_error_shape_mismatch(small, kwargs, match):
    with pytest.raises(ValueError, match=match):
        small(input_ids=np.ones((2, 3), dtype=np.int64), **kwargs)


def test_error_hidden_size_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"hidden size \(10\) is not a multiple of the number of attention heads \(4\)"):
        npbert.BertModel(tiny_config(hidden_size=10, num_attention_heads=4))


def test_error_backward_before_forward():
    with pytest.raises(RuntimeError, match="backward\\(\\) called before any forward"):
        npbert.BertModel(tiny_config()).backward(last_hidden_state=np.zeros((1, 1, 8)))


def test_error_unknown_hidden_act():
    with pytest.raises(ValueError, match="unknown activation 'gelu_bogus'"):
        npbert.BertModel(tiny_config(hidden_act="gelu_bogus"))


def test_error_upstream_gradient_shape(small):
    small(input_ids=np.ones((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match=r"gradient for last_hidden_state has shape \(2, 3, 4\)"):
        small.backward(last_hidden_state=np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="output_hidden_states=False"):
        small.backward(hidden_states=[np.zeros((2, 3, 8))] * 3)


# ---- dropout --------------------------------------------------------------------------------
def dropout_model(seed):
    return random_model(tiny_config(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3), seed=seed)


def test_dropout_train_is_reproducible_per_seed():
    ids, _, mask = random_batch(tiny_config(), 2, 5, seed=25)
    a = dropout_model(25).train()(input_ids=ids, attention_mask=mask).last_hidden_state
    b = dropout_model(25).train()(input_ids=ids, attention_mask=mask).last_hidden_state
    assert np.array_equal(a, b)                                  # same seed: same masks
    m = dropout_model(25).train()
    first = m(input_ids=ids, attention_mask=mask).last_hidden_state
    second = m(input_ids=ids, attention_mask=mask).last_hidden_state
    assert np.array_equal(first, a) and not np.allclose(first, second)   # fresh masks each call
    c = random_model(tiny_config(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3), seed=25)
    c.state.rng = np.random.default_rng(12345)
    assert not np.allclose(c.train()(input_ids=ids, attention_mask=mask).last_hidden_state, a)


def test_dropout_off_in_eval():
    ids, _, mask = random_batch(tiny_config(), 2, 5, seed=26)
    m = dropout_model(26)
    no_dropout = random_model(tiny_config(), seed=26)             # same weights, p = 0
    assert m.eval() is m and not m.training
    a = m(input_ids=ids, attention_mask=mask, output_attentions=True)
    b = no_dropout(input_ids=ids, attention_mask=mask, output_attentions=True)
    assert np.array_equal(a.last_hidden_state, b.last_hidden_state)
    assert np.array_equal(a.attentions[0], b.attentions[0])
    assert not np.allclose(m.train()(input_ids=ids, attention_mask=mask).last_hidden_state, a.last_hidden_state)


def test_dropout_backward_matches_finite_differences_with_fixed_masks():
    """In train mode check_model rewinds the dropout generator before every forward: the same
    seed draws the same masks, so finite differences see the function the backward differentiates."""
    m = dropout_model(27).train()
    ids, types, mask = random_batch(m.config, 2, 4, seed=27)
    ids[mask == 0] = 1
    rng = np.random.default_rng(27)
    up = {"last_hidden_state": rng.standard_normal((2, 4, 8)), "pooler_output": rng.standard_normal((2, 8)),
          "attentions": [rng.standard_normal((2, 2, 4, 4)) for _ in range(2)],      # the dropped-out probs
          "hidden_states": [None, rng.standard_normal((2, 4, 8)), None]}
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, head_mask=np.array([0.5, 1.0]),
                  output_attentions=True, output_hidden_states=True)
    # h = 3e-4, not FD's 1e-3: with the masks this seed draws, the 4th-order difference's
    # truncation error at h = 1e-3 is 5e-7 (relative) on the position embeddings' rows.  It
    # falls as h^4 (measured: 3.1e-8 at h = 5e-4, below 1e-8 at 3e-4), so it is truncation,
    # not the gradient; round-off at 3e-4 is ~eps / h = 1e-12, far below FD_TOL.
    results = check_model(m, inputs, up, max_entries=12, **dict(FD, h=3e-4))
    assert_model_results(results)


# ---- initialisation ---------------------------------------------------------------------------
def test_init_as_transformers_init_weights():
    """For every module of transformers' BertModel: nn.Linear weight ~ N(0, 0.02) and bias 0;
    nn.Embedding ~ N(0, 0.02) with the padding_idx row 0; nn.LayerNorm weight 1, bias 0."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    c = tiny_config(vocab_size=400, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                    max_position_embeddings=64, pad_token_id=3)
    model = npbert.BertModel(c, seed=0, dtype=np.float64)
    P = model.state.params
    hf = transformers.BertModel(transformers.BertConfig(**{k: getattr(c, k) for k in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "max_position_embeddings", "pad_token_id")}))
    seen = set()
    for name, module in hf.named_modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            w = P[name + ".weight"]
            seen.add(name + ".weight")
            if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
                assert np.all(w[module.padding_idx] == 0), name
                w = np.delete(w, module.padding_idx, axis=0)
            # n >= 128 draws: the sample std is within 4 sigma = 4 * 0.02 / sqrt(2n) <= 0.005 of 0.02
            n = w.size
            assert abs(w.std() - 0.02) < 4 * 0.02 / math.sqrt(2 * n), name
            assert abs(w.mean()) < 4 * 0.02 / math.sqrt(n), name
            if getattr(module, "bias", None) is not None:
                assert np.all(P[name + ".bias"] == 0), name
                seen.add(name + ".bias")
        elif isinstance(module, torch.nn.LayerNorm):
            assert np.all(P[name + ".weight"] == 1) and np.all(P[name + ".bias"] == 0), name
            seen.update({name + ".weight", name + ".bias"})
    assert seen == set(P)                                        # every parameter classified


def test_init_seeds_and_dtypes():
    c = tiny_config()
    a, b = npbert.BertModel(c, seed=5, dtype=np.float64), npbert.BertModel(c, seed=5, dtype=np.float64)
    other = npbert.BertModel(c, seed=6, dtype=np.float64)
    f32 = npbert.BertModel(c, seed=5, dtype=np.float32)
    for name, p in a.state.params.items():
        assert np.array_equal(p, b.state.params[name]), name
        assert f32.state.params[name].dtype == np.float32
        assert np.array_equal(f32.state.params[name], p.astype(np.float32)), name   # rounded, not redrawn
    assert not np.array_equal(a.state.params["pooler.dense.weight"], other.state.params["pooler.dense.weight"])


def test_state_dict_and_gradient_keys_as_transformers():
    """state_dict() keys == transformers' state_dict() keys minus buffers, in order;
    backward() keys == named_parameters() keys, in order, for any subset of upstream outputs."""
    model, hf = hf_model_and_twin(seed=28)
    buffers = {n for n, _ in hf.named_buffers()}
    assert list(model.state_dict()) == [k for k in hf.state_dict() if k not in buffers]
    names = [n for n, _ in hf.named_parameters()]
    assert [n for n, _ in model.named_parameters()] == names
    ids = np.array([[1, 2, 3]])
    model(input_ids=ids)
    assert list(model.backward(pooler_output=np.ones((1, 8)), retain_graph=True)) == names
    assert list(model.backward(last_hidden_state=np.ones((1, 3, 8)))) == names


def test_state_dict_round_trip_and_dtype():
    a = random_model(seed=29)
    b = npbert.BertModel(a.config, seed=99, dtype=np.float32)
    b.load_state_dict(a.state_dict())
    for name, p in a.state_dict().items():
        assert b.state_dict()[name].dtype == np.float32
        assert np.array_equal(b.state_dict()[name], p.astype(np.float32))


# ---- nothing is written to ------------------------------------------------------------------
def test_inputs_outputs_and_upstream_not_mutated():
    model = random_model(seed=30)
    ids, types, mask = random_batch(model.config, 2, 5, seed=30)
    rng = np.random.default_rng(30)
    embeds = rng.standard_normal((2, 5, 8))
    args = dict(inputs_embeds=embeds, token_type_ids=types, attention_mask=mask, head_mask=np.array([1.0, 0.5]))
    args_before = {k: v.copy() for k, v in args.items()}
    out = model(**args, output_hidden_states=True, output_attentions=True)
    out_before = {k: ([x.copy() for x in v] if isinstance(v, tuple) else v.copy()) for k, v in out.items()}
    up = {"last_hidden_state": rng.standard_normal((2, 5, 8)), "pooler_output": rng.standard_normal((2, 8)),
          "hidden_states": [rng.standard_normal((2, 5, 8)) for _ in range(3)],
          "attentions": [rng.standard_normal((2, 2, 5, 5)) for _ in range(2)]}
    up_before = {k: ([x.copy() for x in v] if isinstance(v, list) else v.copy()) for k, v in up.items()}
    params_before = {k: v.copy() for k, v in model.state.params.items()}
    g1 = model.backward(**up, retain_graph=True)
    g2 = model.backward(**up)                                  # the cache survives a retained backward
    for k in args:
        assert np.array_equal(args[k], args_before[k]), k
    for k, v in out.items():
        for a, b in zip(v if isinstance(v, tuple) else [v], out_before[k] if isinstance(v, tuple) else [out_before[k]]):
            assert np.array_equal(a, b), k
    for k, v in up.items():
        for a, b in zip(v if isinstance(v, list) else [v], up_before[k] if isinstance(v, list) else [up_before[k]]):
            assert np.array_equal(a, b), k
    for k in g1:
        assert np.array_equal(g1[k], g2[k]), k
        assert np.array_equal(model.state.params[k], params_before[k]), k
