"""Sentence embeddings with a BertModel: mean pooling over the attention mask and optional L2
normalisation (npbert/ops/pooling.py), forward and backward; what sentence-transformers computes
for all-MiniLM-L6-v2.

    emb = SentenceEmbedding(model)                      # a BertModel
    u = emb(input_ids=..., attention_mask=...)          # (B, H), unit rows
    grads = emb.backward(du)                            # d sum(u * du) / d every parameter of the model
    encode(model, tokenizer, ["a sentence", ...])       # (n, H) for texts, in batches
"""
import numpy as np

from npbert.ops.pooling import mean_pooling_backward, mean_pooling_forward, normalize_backward, normalize_forward

from .pretrained import no_grad


class SentenceEmbedding:
    def __init__(self, model, normalize=True):
        self.model, self.normalize = model, normalize
        self._cache = None

    def __call__(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None):
        if attention_mask is None:
            shape = (inputs_embeds if input_ids is None else np.asarray(input_ids)).shape[:2]
            attention_mask = np.ones(shape, dtype=np.int64)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                         inputs_embeds=inputs_embeds)
        e, pool_cache = mean_pooling_forward(out.last_hidden_state, attention_mask)       # (B, H)
        norm_cache = None
        if self.normalize:
            e, norm_cache = normalize_forward(e)
        self._cache = (pool_cache, norm_cache)
        return e

    def backward(self, de):
        """Gradients of sum(embeddings * de) w.r.t. the model's parameters (a dict, as model.backward)."""
        if self._cache is None:
            raise RuntimeError("SentenceEmbedding.backward() before a forward call")
        pool_cache, norm_cache = self._cache
        de = np.asarray(de, dtype=self.model.dtype)
        if norm_cache is not None:
            de = normalize_backward(de, norm_cache)
        return self.model.backward(last_hidden_state=mean_pooling_backward(de, pool_cache))


def encode(model, tokenizer, texts, normalize=True, batch_size=32, max_length=None):
    """(len(texts), H) sentence embeddings, in eval mode without keeping activations."""
    if isinstance(texts, str):
        texts = [texts]
    max_length = max_length or model.config.max_position_embeddings
    emb = SentenceEmbedding(model, normalize)
    out = []
    with no_grad():
        for start in range(0, len(texts), batch_size):
            enc = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                            max_length=max_length, return_tensors="np")
            out.append(emb(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                           token_type_ids=enc.get("token_type_ids")))
    return np.concatenate(out, axis=0)
