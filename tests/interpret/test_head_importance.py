"""Head importance (Michel et al. 2019) and the pruning curve on a tiny classifier, float64.

The head-mask gradient against central finite differences of the loss in each xi; head_importance
against those differences summed as bertology sums them; the "token" granularity against Michel
et al.'s formula |grad_ctx . ctx| computed by torch autograd on transformers' model; the
pruning curve against evaluations with the masks written out."""
import numpy as np
import pytest

import npbert
import npbert.interpret as ni

from interpret_helpers import load_pair, t, tiny_checkpoint

pytestmark = pytest.mark.usefixtures("npbert_path")

EPS = 1e-5      # central differences in float64: error ~EPS^2 * |L'''| + 1e-16 / EPS, ~1e-10 here


@pytest.fixture(scope="module")
def model(tmp_path_factory, npbert_path):      # built on each path (fixed when it is built)
    return npbert.BertForSequenceClassification.from_pretrained(
        tiny_checkpoint(tmp_path_factory.mktemp("cls"), seed=11, num_labels=3), dtype=np.float64).eval()


def batches():
    """Two batches of labelled, padded examples (ids from the tiny vocabulary, [CLS] 2, [SEP] 3)."""
    rows = [([2, 13, 14, 15, 3], 0), ([2, 20, 21, 3], 1), ([2, 10, 19, 16, 17, 3], 2), ([2, 37, 38, 3], 1),
            ([2, 31, 32, 33, 34, 3], 0)]
    out = []
    for part in (rows[:3], rows[3:]):
        T = max(len(ids) for ids, _ in part)
        ids = np.array([r + [0] * (T - len(r)) for r, _ in part])
        out.append({"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64),
                    "labels": np.array([label for _, label in part])})
    return out


def loss(model, batch, head_mask):
    return float(model(**batch, head_mask=head_mask).loss)


def finite_difference_grad(model, batch, head_mask):
    """dL/dxi for every (layer, head) by central differences."""
    L, N = head_mask.shape
    grad = np.zeros((L, N))
    for l in range(L):
        for h in range(N):
            plus, minus = head_mask.copy(), head_mask.copy()
            plus[l, h] += EPS
            minus[l, h] -= EPS
            grad[l, h] = (loss(model, batch, plus) - loss(model, batch, minus)) / (2 * EPS)
    return grad


@pytest.mark.parametrize("zeros", [False, True], ids=["all heads", "two heads off"])
def test_head_mask_gradient_is_the_finite_difference(model, zeros):
    hm = np.ones((2, 4))
    if zeros:
        hm[0, 1] = hm[1, 3] = 0.0
    batch = batches()[0]
    model(**batch, head_mask=hm)
    _, igrads = model.backward(return_intermediate_grads=True)
    fd = finite_difference_grad(model, batch, hm)
    assert np.abs(igrads.head_mask - fd).max() < 1e-7 * np.abs(fd).max()
    assert np.abs(fd[0, 1]) > 1e-6 * np.abs(fd).max()          # a switched-off head still has a gradient


def test_head_importance_sums_the_batches_gradients_as_bertology(model):
    """I = sum over batches |dL_batch/dxi| / tokens, each layer divided by its L2 norm (+1e-20)."""
    ones = np.ones((2, 4))
    expected = sum(np.abs(finite_difference_grad(model, b, ones)) for b in batches())
    tokens = sum(int(b["attention_mask"].sum()) for b in batches())
    expected /= tokens
    result = ni.head_importance(model, batches())
    assert result.tokens == tokens == 25
    assert np.abs(result.raw - expected).max() < 1e-7 * expected.max()
    normalised = expected / (np.sqrt((expected ** 2).sum(-1, keepdims=True)) + 1e-20)
    assert np.abs(result.importance - normalised).max() < 1e-7
    assert np.allclose(np.linalg.norm(result.importance, axis=-1), 1)
    raw = ni.head_importance(model, batches(), normalize_importance_by_layer=False)
    assert np.array_equal(raw.importance, raw.raw)
    scaled = ni.head_importance(model, batches(), normalize_global_importance=True)
    assert scaled.importance.min() == 0 and scaled.importance.max() == 1
    assert scaled.order() == result.order() and len(result.order()) == 8   # monotone rescaling, same ranking


def test_entropy_is_the_masked_mean_of_each_heads_entropy(model):
    ent, tokens = np.zeros((2, 4)), 0
    for b in batches():
        attentions = model(**b, output_attentions=True).attentions
        mask = b["attention_mask"].astype(float)
        for l, A in enumerate(attentions):
            with np.errstate(divide="ignore", invalid="ignore"):
                plogp = np.nan_to_num(A * np.log(A))                        # 0 log 0 = 0
            ent[l] += (-plogp.sum(-1) * mask[:, None, :]).sum(axis=(0, 2))
        tokens += mask.sum()
    assert np.abs(ni.head_importance(model, batches()).entropy - ent / tokens).max() < 1e-12


def test_token_granularity_is_michels_formula_on_torch(tmp_path):
    """Michel et al.'s code: per layer, dot = einsum("bhli,bhli->bhl", grad_ctx, ctx) with ctx the
    heads' context (B, N, T, D) and grad_ctx its autograd gradient; importance += |dot| summed over
    batch and tokens; divided by the tokens (their own code leaves the last layer undivided: not
    reproduced)."""
    pytest.importorskip("transformers")
    ours, hf, _ = load_pair(tiny_checkpoint(tmp_path, seed=12, num_labels=3), "BertForSequenceClassification")
    N = hf.config.num_attention_heads
    expected, tokens = np.zeros((2, N)), 0
    for b in batches():
        ctxs, hooks = {}, []
        for i, layer in enumerate(hf.bert.encoder.layer):
            def keep(m, a, o, i=i):
                o[0].retain_grad()
                ctxs[i] = o[0]
            hooks.append(layer.attention.self.register_forward_hook(keep))
        out = hf(**{k: t(v) for k, v in b.items()})
        out.loss.backward()
        for h in hooks:
            h.remove()
        for i, ctx in ctxs.items():
            B, T, H = ctx.shape
            c = ctx.detach().view(B, T, N, H // N).transpose(1, 2)
            g = ctx.grad.view(B, T, N, H // N).transpose(1, 2)
            expected[i] += np.abs(np.einsum("bhli,bhli->bhl", g.numpy(), c.numpy())).sum(axis=(0, 2))
        tokens += int(b["attention_mask"].sum())
    result = ni.head_importance(ours, batches(), granularity="token", normalize_importance_by_layer=False)
    assert np.abs(result.importance - expected / tokens).max() < 1e-9 * expected.max() / tokens


def test_pruning_curve_masks_the_least_important_first(model):
    result = ni.head_importance(model, batches())
    curve = ni.pruning_curve(model, batches(), result, points=5)
    assert curve.masked == [0, 2, 4, 6, 8]
    assert curve.order == result.order()
    ranked = [result.importance[h] for h in curve.order]
    assert ranked == sorted(ranked)
    for k, lo, acc in zip(curve.masked, curve.loss, curve.accuracy):
        mask = np.ones((2, 4))
        for h in curve.order[:k]:
            mask[h] = 0
        total, right, n = 0.0, 0, 0
        for b in batches():
            out = model(**b, head_mask=mask)
            total += float(out.loss) * len(b["labels"])
            right += int((out.logits.argmax(-1) == b["labels"]).sum())
            n += len(b["labels"])
        assert abs(lo - total / n) < 1e-12 and acc == right / n


def test_bad_arguments_are_errors_naming_them(model):
    unlabelled = [{k: v for k, v in b.items() if k != "labels"} for b in batches()]
    with pytest.raises(ValueError, match="batch 0 gave no loss: each batch needs its labels"):
        ni.head_importance(model, unlabelled)
    with pytest.raises(ValueError, match=r"head_mask must be \(layers, heads\) = \(2, 4\)"):
        ni.head_importance(model, batches(), head_mask=np.ones(4))
    with pytest.raises(ValueError, match="granularity must be 'batch' or 'token'"):
        ni.head_importance(model, batches(), granularity="example")
    with pytest.raises(ValueError, match=r"importance must be \(layers, heads\)"):
        ni.pruning_curve(model, batches(), np.ones((3, 4)))
    with pytest.raises(ValueError, match="no batches"):
        ni.head_importance(model, [])
