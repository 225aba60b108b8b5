"""Long texts: truncation head|tail|head+tail, chunking, and BertForChunkedSequenceClassification
(forward, loss and every gradient against the same computation written in torch on transformers'
BertModel, float64; finite differences of the fusion op; save -> transformers loads it)."""
import numpy as np
import pytest

from heads.head_helpers import REL_TOL, assert_close, assert_grads_close, load_into_torch, randomize, tiny_config
from npbert import BertForSequenceClassification
from npbert.gradcheck import check_forward_backward
from npbert.tasks.long_text import (BertForChunkedSequenceClassification, chunk_pooling_backward,
                                    chunk_pooling_forward, chunk_tokens, collate_chunks, encode_chunks,
                                    truncate_tokens)


def test_truncate_tokens():
    ids = list(range(10))
    assert truncate_tokens(ids, 4, "head") == [0, 1, 2, 3]
    assert truncate_tokens(ids, 4, "tail") == [6, 7, 8, 9]
    assert truncate_tokens(ids, 4, "head+tail", head_tokens=1) == [0, 7, 8, 9]
    assert truncate_tokens(ids, 4, "head+tail", head_tokens=4) == [0, 1, 2, 3]
    assert truncate_tokens(ids, 4, "head+tail", head_tokens=0) == [6, 7, 8, 9]
    assert truncate_tokens(ids[:3], 4, "tail") == [0, 1, 2]                   # short texts are unchanged
    # Sun et al.: a 512 window keeps 128 + 382 of the text's 510 content tokens
    kept = truncate_tokens(list(range(1000)), 510, "head+tail", head_tokens=128)
    assert kept == list(range(128)) + list(range(1000 - 382, 1000))
    with pytest.raises(ValueError, match="head_tokens must be in"):
        truncate_tokens(ids, 4, "head+tail", head_tokens=5)
    with pytest.raises(ValueError, match="truncation strategy"):
        truncate_tokens(ids, 4, "middle")


def test_chunk_tokens_and_encoding():
    ids = list(range(1, 11))
    assert chunk_tokens(ids, 4) == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    assert chunk_tokens(ids, 4, stride=3) == [[1, 2, 3, 4], [4, 5, 6, 7], [7, 8, 9, 10]]
    assert chunk_tokens(ids[:4], 4) == [[1, 2, 3, 4]] and chunk_tokens([], 4) == [[]]
    # every token is in some window, in order
    for stride in (1, 2, 4):
        chunks = chunk_tokens(ids, 4, stride)
        assert sorted(set(sum(chunks, []))) == ids and chunks[-1][-1] == 10
    e = encode_chunks(ids, 6, cls_token_id=101, sep_token_id=102)
    assert e["input_ids"].tolist() == [[101, 1, 2, 3, 4, 102], [101, 5, 6, 7, 8, 102], [101, 9, 10, 102, 0, 0]]
    assert e["attention_mask"][2].tolist() == [1, 1, 1, 1, 0, 0]
    batch = collate_chunks([{**e, "labels": 1}, {**encode_chunks(ids[:2], 6, 101, 102), "labels": 0}])
    assert batch["input_ids"].shape == (2, 3, 6) and batch["chunk_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["attention_mask"][1, 1:].sum() == 0 and batch["labels"].tolist() == [1, 0]


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_chunk_pooling_finite_differences(mode):
    rng = np.random.default_rng(1)
    pooled = rng.normal(size=(3, 4, 5))
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]])
    result = check_forward_backward(lambda pooled: chunk_pooling_forward(pooled, mask, mode),
                                    lambda d, c: {"pooled": chunk_pooling_backward(d, c)}, {"pooled": pooled})
    # float64 centred differences, h = 1e-6 (gradcheck's docstring): round-off ~1e-10 relative
    assert result["pooled"].rel_error < 1e-7
    dpooled = result["pooled"].analytic.reshape(pooled.shape)
    assert np.all(dpooled[mask == 0] == 0)                   # padding chunks get no gradient
    fused, _ = chunk_pooling_forward(pooled, mask, mode)
    reference = [(pooled[b][mask[b] == 1].mean(0) if mode == "mean" else pooled[b][mask[b] == 1].max(0))
                 for b in range(3)]
    assert np.array_equal(fused, np.stack(reference)) if mode == "max" else np.allclose(fused, reference, 0, 1e-15)
    with pytest.raises(ValueError, match="example 0 has no real chunk"):
        chunk_pooling_forward(pooled, np.array([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]), mode)


def _torch_reference(model, inputs, mode):
    """The same function in torch: transformers' BertModel on the B*C windows, the fusion written
    with torch ops, dropout off, the classifier and cross-entropy."""
    import torch
    ids = torch.from_numpy(inputs["input_ids"])
    B, C, T = ids.shape
    out = model.bert(input_ids=ids.reshape(B * C, T),
                     attention_mask=torch.from_numpy(inputs["attention_mask"]).reshape(B * C, T))
    pooled = out.pooler_output.reshape(B, C, -1)                                        # (B, C, H)
    m = torch.from_numpy(inputs["chunk_mask"]).to(torch.float64)[:, :, None]            # (B, C, 1)
    if mode == "mean":
        fused = (pooled * m).sum(1) / m.sum(1)
    else:
        fused = pooled.masked_fill(m == 0, float("-inf")).max(dim=1).values
    logits = model.classifier(fused)
    loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(inputs["labels"]))
    return logits, loss


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_chunked_model_equals_torch(mode):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from heads.head_helpers import hf_model
    config = tiny_config(num_labels=3)
    ours = randomize(BertForChunkedSequenceClassification(config, dtype=np.float64, chunk_pooling=mode), seed=2)
    theirs = hf_model("BertForSequenceClassification", config)        # the same parameters and keys
    load_into_torch(theirs, ours.state_dict())
    theirs.eval()
    rng = np.random.default_rng(3)
    batch = collate_chunks([{**encode_chunks(rng.integers(5, 29, size=n).tolist(), 6, 1, 2), "labels": y}
                            for n, y in ((9, 2), (3, 0), (14, 1))])      # 3, 1 and 4 windows: padding chunks
    assert batch["chunk_mask"].tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]]

    out = ours(**batch)
    grads = ours.backward()
    logits, loss = _torch_reference(theirs, batch, mode)
    loss.backward()
    # float64 on both sides, same formulas in a different order: round-off only (head_helpers.REL_TOL)
    assert_close(out.logits, logits.detach().numpy(), "logits")
    assert_close(out.loss, loss.item(), "loss")
    torch_grads = {n: (p.grad.numpy() if p.grad is not None else np.zeros(tuple(p.shape)))
                   for n, p in theirs.named_parameters()}
    zero = {n for n in torch_grads if n.endswith("attention.self.key.bias")}     # softmax ignores it: ~0
    assert_grads_close(grads, torch_grads, zero=zero, tol=REL_TOL)

    # padding windows do not matter: other tokens there leave the logits unchanged
    changed = {**batch, "input_ids": batch["input_ids"].copy()}
    changed["input_ids"][1, 1:] = 7
    np.testing.assert_array_equal(ours(**changed).logits, out.logits)


def test_one_chunk_is_sequence_classification_and_saves_for_transformers(tmp_path):
    config = tiny_config(num_labels=2)
    ours = randomize(BertForChunkedSequenceClassification(config, dtype=np.float64, chunk_pooling="max"), seed=4)
    plain = BertForSequenceClassification(tiny_config(num_labels=2), dtype=np.float64)
    plain.load_state_dict(ours.state_dict())
    ids = np.random.default_rng(5).integers(1, 29, size=(2, 6))
    expected = plain(input_ids=ids).logits
    np.testing.assert_allclose(ours(input_ids=ids[:, None, :]).logits, expected, rtol=0, atol=1e-13)   # round-off

    ours.save_pretrained(tmp_path)
    reloaded = BertForChunkedSequenceClassification.from_pretrained(tmp_path, dtype=np.float64)
    assert reloaded.chunk_pooling == "max"
    ours.eval()                     # as the reloaded model (the fast path's eval forward may sum otherwise)
    np.testing.assert_array_equal(reloaded(input_ids=ids[:, None, :]).logits, ours(input_ids=ids[:, None, :]).logits)
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    hf = transformers.BertForSequenceClassification.from_pretrained(tmp_path, torch_dtype=torch.float64).eval()
    with torch.no_grad():
        hf_logits = hf(input_ids=torch.from_numpy(ids)).logits.numpy()
    assert_close(hf_logits, expected, "transformers' logits of the saved model")


def test_bad_chunk_inputs():
    model = BertForChunkedSequenceClassification(tiny_config(), dtype=np.float64)
    with pytest.raises(ValueError, match="give input_ids"):
        model(attention_mask=np.ones((2, 3, 5)))
    with pytest.raises(ValueError, match="input_ids must be 3-D"):
        model(input_ids=np.ones((2, 5), dtype=np.int64))
    with pytest.raises(ValueError, match="chunk_mask has shape"):
        model(input_ids=np.ones((2, 3, 5), dtype=np.int64), chunk_mask=np.ones((2, 2)))
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model(input_ids=np.ones((2, 3, 5), dtype=np.int64), attention_mask=np.ones((2, 2, 5)))
