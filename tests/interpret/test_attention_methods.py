"""attention_rollout, attention_flow and grad_rollout against their formulas written out here:
rollout as an explicit product, flow as the minimum cut found by trying every cut (max-flow
min-cut theorem) and by networkx, grad_rollout from torch autograd's attention gradients on the
same transformers model.  Float64; tolerances: 1e-12 for the same sums in another order."""
import itertools

import numpy as np
import pytest

import npbert
import npbert.interpret as ni
from npbert.interpret.attention import flow

from interpret_helpers import load_pair, t, tiny_checkpoint

pytestmark = pytest.mark.usefixtures("npbert_path")


@pytest.fixture(scope="module")
def pair(tmp_path_factory, npbert_path):       # built on each path (fixed when it is built)
    pytest.importorskip("transformers")
    return load_pair(tiny_checkpoint(tmp_path_factory.mktemp("cls"), seed=7, num_labels=3),
                     "BertForSequenceClassification")


@pytest.fixture(scope="module")
def enc(pair):
    _, _, tok = pair
    return tok(["the cat is on the mat", "hello world"], padding=True, return_tensors="np")


def written_out_rollout(attentions, b):
    """Abnar & Zuidema: A_l = (mean over heads of W_l + I) / its row sums; joint = A_L-1 ... A_0."""
    T = attentions[0].shape[-1]
    joint = np.eye(T)
    for W in attentions:
        A = np.zeros((T, T))
        for h in range(W.shape[1]):
            A += W[b, h] / W.shape[1]
        A = A + np.eye(T)
        for i in range(T):
            A[i] /= A[i].sum()
        joint = A @ joint
    return joint


def test_rollout_is_the_product_of_the_augmented_maps(pair, enc):
    model, _, _ = pair
    attentions = model(**enc, output_attentions=True).attentions
    result = ni.attention_rollout(model, enc)
    for b in range(2):
        assert np.abs(result.relevance[b] - written_out_rollout(attentions, b)).max() < 1e-12
    assert np.allclose(result.relevance.sum(-1), 1, atol=1e-12)            # rows stay distributions
    assert np.array_equal(result.token_attributions, result.relevance[:, 0])
    # the padded example's real tokens get what the unpadded example gets
    n = int(enc["attention_mask"][1].sum())
    alone = ni.attention_rollout(model, {k: v[1:, :n] for k, v in enc.items()})
    assert np.abs(result.relevance[1, :n, :n] - alone.relevance[0]).max() < 1e-12


def min_cut_flow(layers, source, sink):
    """Max flow by max-flow min-cut: the cheapest set of edges cut between a vertex set holding the
    source and its complement holding the sink, over every such set."""
    L, T = len(layers), layers[0].shape[0]
    nodes = [(l, i) for l in range(L + 1) for i in range(T)]
    free = [v for v in nodes if v not in (source, sink)]
    best = np.inf
    for bits in itertools.product((0, 1), repeat=len(free)):
        side = {source} | {v for v, bit in zip(free, bits) if bit}
        cut = sum(layers[l][i, j] for l in range(L) for i in range(T) for j in range(T)
                  if (l + 1, i) in side and (l, j) not in side)
        best = min(best, cut)
    return best


def test_flow_is_the_minimum_cut(pair):
    """Two layers of three tokens: every one of the 2^7 cuts tried, for every (output, input) pair."""
    model, _, tok = pair
    enc = tok("cat dog", return_tensors="np")                                # [CLS] cat dog [SEP]: 4 tokens
    enc = {k: v[:, :3] for k, v in enc.items()}
    layers = [ni.attention.augmented(a)[0] for a in model(**enc, output_attentions=True).attentions]
    ours = ni.attention_flow(model, enc).relevance[0]
    expected = np.array([[min_cut_flow(layers, (2, i), (0, j)) for j in range(3)] for i in range(3)])
    expected /= expected.sum(-1, keepdims=True)
    assert np.abs(ours - expected).max() < 1e-12


def test_flow_equals_networkx_on_longer_inputs():
    """Random augmented maps, 4 layers of 7 tokens: networkx's maximum_flow_value (what Abnar &
    Zuidema's code calls), row-normalised."""
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(0)
    T, L = 7, 4
    layers = []
    for _ in range(L):
        W = rng.random((T, T)) ** 3
        A = 0.5 * W / W.sum(-1, keepdims=True) + 0.5 * np.eye(T)
        layers.append(A / A.sum(-1, keepdims=True))
    G = nx.DiGraph()
    for l, A in enumerate(layers):
        for i in range(T):
            for j in range(T):
                G.add_edge((l + 1, i), (l, j), capacity=A[i, j])
    expected = np.array([[nx.maximum_flow_value(G, (L, i), (0, j)) for j in range(T)] for i in range(T)])
    expected /= expected.sum(-1, keepdims=True)
    assert np.abs(flow(layers) - expected).max() < 1e-12


def test_flow_refuses_long_inputs(pair):
    model, _, _ = pair
    with pytest.raises(ValueError, match="T = 20 tokens, more than max_tokens=16"):
        ni.attention_flow(model, {"input_ids": np.full((1, 20), 5)}, max_tokens=16)


def test_grad_rollout_is_chefers_formula_on_torch_gradients(pair, enc):
    """R = I; R += mean_h(max(dF/dA * A, 0)) R per layer, from transformers' attentions and their
    autograd gradients (retain_grad) for F = logits[:, 2]."""
    model, hf, _ = pair
    out = hf(**{k: t(v) for k, v in enc.items()}, output_attentions=True)
    for a in out.attentions:
        a.retain_grad()
    out.logits[:, 2].sum().backward()
    T = enc["input_ids"].shape[1]
    ours = ni.grad_rollout(model, enc, 2)
    for b in range(2):
        R = np.eye(T)
        for a in out.attentions:
            A, dA = a[b].detach().numpy(), a.grad[b].numpy()
            cam = np.clip(dA * A, 0, None).mean(axis=0)
            R = R + cam @ R
        assert np.abs(ours.relevance[b] - R).max() < 1e-12 * np.abs(R).max()
