"""BertForPreTraining.gather_masked_lm: MLM logits only at the labelled positions give the same
loss and the same gradients as the full (B, T, V) computation."""
import numpy as np

from npbert.config import BertConfig
from npbert.modeling import BertForPreTraining


def test_gather_equals_full():
    cfg = BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=24, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    model = BertForPreTraining(cfg, seed=3, dtype=np.float64)
    rng = np.random.default_rng(0)
    B, T = 3, 16
    ids = rng.integers(5, 97, (B, T))
    mask = np.ones((B, T), dtype=np.int64)
    mask[2, 12:] = 0
    labels = np.full((B, T), -100)
    chosen = rng.random((B, T)) < 0.2
    chosen[0, 3] = True
    labels[chosen] = rng.integers(5, 97, chosen.sum())
    nsp = np.array([0, 1, 1])
    results = []
    for gather in (False, True):
        model.gather_masked_lm = gather
        out = model(input_ids=ids, attention_mask=mask, labels=labels, next_sentence_label=nsp)
        grads = model.backward()
        results.append((float(out["loss"]), out["prediction_logits"], grads))
    (loss_full, logits_full, g_full), (loss_g, logits_g, g_g) = results
    assert logits_g.shape == (int(chosen.sum()), 97)
    # float64 throughout: only summation order differs, so 1e-12 relative
    np.testing.assert_allclose(logits_g, logits_full[chosen], rtol=1e-12, atol=1e-12)
    assert abs(loss_g - loss_full) <= 1e-12 * abs(loss_full)
    assert g_full.keys() == g_g.keys()
    for k in g_full:
        np.testing.assert_allclose(g_g[k], g_full[k], rtol=1e-10, atol=1e-13, err_msg=k)
