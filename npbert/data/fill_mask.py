"""Fill-mask, as transformers' `pipeline("fill-mask")`: for the [MASK] of a text, the top_k
tokens with their probabilities.

    softmax(logits[b, t_mask, :])  (V,) -> the top_k ids, best first
    each result: {"score": p, "token": id, "token_str": decode([id]),
                  "sequence": decode(input_ids with [MASK] := id, skip_special_tokens=True)}
One [MASK]: a list of top_k dicts; several: a list of such lists, one per [MASK], each filled
alone and "sequence" decoded with the special tokens kept (as the pipeline does).
"""
import numpy as np


def fill_mask(model, tokenizer, text, top_k=5):
    """model: BertForMaskedLM or BertForPreTraining (eval mode is set for the call)."""
    import npbert
    if tokenizer.mask_token is None or tokenizer.mask_token_id is None:
        raise ValueError("the tokenizer's vocabulary has no mask token: fill-mask needs one")
    enc = tokenizer(text, return_tensors="np", truncation=True,
                    max_length=model.config.max_position_embeddings)
    input_ids = enc["input_ids"]                                                   # (1, T)
    masked = np.flatnonzero(input_ids[0] == tokenizer.mask_token_id)
    if len(masked) == 0:
        raise ValueError(f"No mask_token ({tokenizer.mask_token}) found on the input: {text!r}")
    was_training = model.training
    model.eval()
    try:
        with npbert.no_grad():
            out = model(input_ids=input_ids, attention_mask=enc["attention_mask"],
                        token_type_ids=enc.get("token_type_ids"))
    finally:
        model.train(was_training)
    logits = out["prediction_logits"] if "prediction_logits" in out else out["logits"]      # (1, T, V)
    results = []
    single = len(masked) == 1            # the pipeline keeps [CLS]/[SEP]/[MASK] in "sequence" with several masks
    for t in masked:
        z = logits[0, t].astype(np.float64)                                        # (V,)
        p = np.exp(z - z.max())
        p /= p.sum()                                                               # softmax
        k = min(top_k, len(p))
        top = np.argsort(-p, kind="stable")[:k]
        one = []
        for i in top:
            ids = input_ids[0].copy()
            ids[t] = i
            one.append({"score": float(p[i]), "token": int(i), "token_str": tokenizer.decode([int(i)]),
                        "sequence": tokenizer.decode(ids.tolist(), skip_special_tokens=single)})
        results.append(one)
    return results[0] if len(results) == 1 else results
