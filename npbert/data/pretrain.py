"""What `npbert pretrain`, `npbert fill-mask` and `npbert demo` share: Google's model sizes,
the pre-training metrics, and fill-mask as transformers' pipeline reports it."""
import numpy as np

# google-research/bert's small models (Turc et al. 2019): layers L, hidden H; heads H/64, intermediate 4H.
MODEL_SIZES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768)}


def config_for_size(size, vocab_size, max_position_embeddings=512, **overrides):
    from npbert.config import BertConfig
    if size not in MODEL_SIZES:
        raise ValueError(f"model size {size!r}: one of {list(MODEL_SIZES)}")
    L, H = MODEL_SIZES[size]
    return BertConfig(vocab_size=vocab_size, hidden_size=H, num_hidden_layers=L, num_attention_heads=max(1, H // 64),
                      intermediate_size=4 * H, max_position_embeddings=max_position_embeddings, **overrides)


def preprocess_logits_for_metrics(logits, labels):
    """Keep the argmaxes only: (prediction_logits (N, T, V), seq_relationship_logits (N, 2)) ->
    ((N, T), (N,)), so that evaluation does not hold N x T x V logits."""
    mlm, nsp = logits
    return mlm.argmax(-1), nsp.argmax(-1)


def compute_pretraining_metrics(eval_pred):
    """MLM accuracy over the predicted positions, NSP accuracy over the examples."""
    (mlm_pred, nsp_pred), (labels, nsp_labels) = eval_pred.predictions, eval_pred.label_ids
    chosen = labels != -100
    return {"mlm_accuracy": float((mlm_pred[chosen] == labels[chosen]).mean()) if chosen.any() else float("nan"),
            "nsp_accuracy": float((nsp_pred == nsp_labels).mean())}


def evaluate_pretraining(model, dataset, batch_size=64):
    """(mlm_accuracy, nsp_accuracy, mlm_loss-free) of `model` on a PretrainingDataset, in eval mode."""
    import npbert
    from npbert.training import default_data_collator
    was = model.training
    model.eval()
    right = total = nsp_right = 0
    try:
        for start in range(0, len(dataset), batch_size):
            batch = default_data_collator([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            labels, nsp = batch.pop("labels"), batch.pop("next_sentence_label")
            with npbert.no_grad():
                out = model(**batch)
            chosen = labels != -100
            right += int((out.prediction_logits.argmax(-1)[chosen] == labels[chosen]).sum())
            total += int(chosen.sum())
            nsp_right += int((out.seq_relationship_logits.argmax(-1) == nsp).sum())
    finally:
        model.train(was)
    return right / max(total, 1), nsp_right / max(len(dataset), 1)


def frequency_baseline(train_dataset, eval_dataset):
    """MLM accuracy of always guessing the token most often masked in training (a floor any
    learning must beat), and its token id."""
    counts = {}
    for i in range(len(train_dataset)):
        lab = train_dataset[i]["labels"]
        for t in lab[lab != -100]:
            counts[int(t)] = counts.get(int(t), 0) + 1
    top = max(counts, key=counts.get)
    right = total = 0
    for i in range(len(eval_dataset)):
        lab = eval_dataset[i]["labels"]
        lab = lab[lab != -100]
        right += int((lab == top).sum())
        total += len(lab)
    return right / max(total, 1), top


def fill_mask(model, tokenizer, text, top_k=5):
    """transformers' fill-mask pipeline: for the [MASK] in `text`, the top_k tokens as dicts
    {"score", "token", "token_str", "sequence"}; a list of such lists when there are several masks."""
    import npbert
    if tokenizer.mask_token not in text:
        raise ValueError(f"the text has no {tokenizer.mask_token} token to fill: {text!r}")
    enc = tokenizer(text, return_tensors="np")
    ids = enc["input_ids"]
    max_len = model.config.max_position_embeddings
    if ids.shape[1] > max_len:
        raise ValueError(f"the text is {ids.shape[1]} tokens long; the model takes at most {max_len}")
    with npbert.no_grad():
        logits = model(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
    logits = logits.logits if "logits" in logits else logits.prediction_logits
    positions = np.flatnonzero(ids[0] == tokenizer.mask_token_id)
    results = []
    for pos in positions:
        row = logits[0, pos].astype(np.float64)
        probs = np.exp(row - row.max())
        probs /= probs.sum()
        best = np.argsort(-probs, kind="stable")[:top_k]
        entries = []
        for t in best:
            filled = ids[0].copy()
            filled[pos] = t
            entries.append({"score": float(probs[t]), "token": int(t),
                            "token_str": tokenizer.decode([int(t)]),
                            "sequence": tokenizer.decode(filled.tolist(), skip_special_tokens=True)})
        results.append(entries)
    return results[0] if len(results) == 1 else results
