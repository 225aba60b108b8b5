"""Texts longer than BERT's window (Sun et al. 2019, "How to Fine-Tune BERT for Text Classification").

    B = batch, C = chunks (windows) per text, T = max_seq_length, H = hidden size, K = num_labels
    N = number of content tokens of a text (no [CLS]/[SEP]), M = max_tokens = T - 2

Two ways to fit a text of N > M tokens into [CLS] x_1 .. x_M [SEP]:

1. Truncation, `truncate_tokens(ids, max_tokens, strategy, head_tokens)`:
       head        x_1 .. x_M                                    (the usual cut)
       tail        x_{N-M+1} .. x_N
       head+tail   x_1 .. x_h  x_{N-(M-h)+1} .. x_N              h = head_tokens, M - h from the end
   Sun et al. keep 128 + 382 of a 512-token window (head+tail was their best on IMDb).
2. Chunks, `chunk_tokens(ids, max_tokens, stride)`: windows of M tokens starting every `stride`
   tokens; each window is encoded on its own, [CLS] w [SEP] -> pooled output p_c (H,), and the
   C pooled outputs are fused before the classifier:
       mean   f = sum_c m_c p_c / sum_c m_c                      m = chunk_mask (1 real, 0 padding)
       max    f_h = max_{c: m_c = 1} p_{c,h}                     per hidden unit
   then logits = classifier(dropout(f)) as in BertForSequenceClassification.  The backward
   through the fusion (docs/long_texts.md):
       mean   dp_c = m_c / sum_c' m_c' * df
       max    dp_{c,h} = df_h if c is the argmax of unit h, else 0
   `BertForChunkedSequenceClassification` has the parameters and state_dict keys of
   BertForSequenceClassification, so transformers' BertForSequenceClassification loads a saved one.
"""
import numpy as np

from npbert.modeling.heads import BertForSequenceClassification

TRUNCATION_STRATEGIES = ("head", "tail", "head+tail")
CHUNK_POOLINGS = ("mean", "max")


def truncate_tokens(ids, max_tokens, strategy="head", head_tokens=128):
    """The N content tokens `ids` cut to at most `max_tokens` (M) by `strategy`; unchanged when N <= M.
    head+tail keeps the first `head_tokens` (h) and the last M - h."""
    if strategy not in TRUNCATION_STRATEGIES:
        raise ValueError(f"truncation strategy must be one of {TRUNCATION_STRATEGIES}, got {strategy!r}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    ids = list(ids)
    if len(ids) <= max_tokens:
        return ids
    if strategy == "head":
        return ids[:max_tokens]
    if strategy == "tail":
        return ids[len(ids) - max_tokens:]
    if not 0 <= head_tokens <= max_tokens:
        raise ValueError(f"head_tokens must be in [0, {max_tokens}] (max_seq_length - 2), got {head_tokens}")
    tail_tokens = max_tokens - head_tokens
    return ids[:head_tokens] + (ids[len(ids) - tail_tokens:] if tail_tokens else [])


def chunk_tokens(ids, max_tokens, stride=None):
    """Windows of at most `max_tokens` tokens starting at 0, stride, 2 stride, ..., the last one
    reaching the end (so windows overlap by max_tokens - stride; stride=None means max_tokens, no
    overlap).  A text of N <= max_tokens tokens is one window; an empty text is one empty window."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    stride = max_tokens if stride is None else stride
    if not 1 <= stride <= max_tokens:
        raise ValueError(f"stride must be in [1, max_tokens={max_tokens}], got {stride}")
    ids = list(ids)
    chunks = []
    start = 0
    while True:
        chunks.append(ids[start:start + max_tokens])
        if start + max_tokens >= len(ids):
            return chunks
        start += stride


def encode_chunks(ids, max_seq_length, cls_token_id, sep_token_id, pad_token_id=0, stride=None, max_chunks=None):
    """Content token ids -> one example for BertForChunkedSequenceClassification:
    {"input_ids", "attention_mask", "token_type_ids"} each (C, T) int64, every row [CLS] w [SEP] + padding.
    max_chunks keeps the first C windows (None: all)."""
    chunks = chunk_tokens(ids, max_seq_length - 2, stride)
    if max_chunks is not None:
        chunks = chunks[:max_chunks]
    C = len(chunks)
    input_ids = np.full((C, max_seq_length), pad_token_id, dtype=np.int64)     # (C, T)
    attention_mask = np.zeros((C, max_seq_length), dtype=np.int64)              # (C, T)
    for c, chunk in enumerate(chunks):
        row = [cls_token_id] + chunk + [sep_token_id]
        input_ids[c, :len(row)] = row
        attention_mask[c, :len(row)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "token_type_ids": np.zeros((C, max_seq_length), dtype=np.int64)}


def collate_chunks(examples, pad_token_id=0):
    """A list of encode_chunks() examples (plus "labels") -> a batch: input_ids, attention_mask,
    token_type_ids (B, C_max, T), chunk_mask (B, C_max) (1 for a real window, 0 for padding rows,
    which are all [PAD] with attention_mask 0), and labels stacked when every example has them."""
    if not examples:
        raise ValueError("collate_chunks: no examples")
    T = examples[0]["input_ids"].shape[1]
    C = max(e["input_ids"].shape[0] for e in examples)
    B = len(examples)
    batch = {"input_ids": np.full((B, C, T), pad_token_id, dtype=np.int64),
             "attention_mask": np.zeros((B, C, T), dtype=np.int64),
             "token_type_ids": np.zeros((B, C, T), dtype=np.int64),
             "chunk_mask": np.zeros((B, C), dtype=np.int64)}
    for b, e in enumerate(examples):
        if e["input_ids"].shape[1] != T:
            raise ValueError(f"collate_chunks: example {b} has windows of {e['input_ids'].shape[1]} tokens, "
                             f"example 0 of {T}")
        n = e["input_ids"].shape[0]
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            batch[name][b, :n] = e[name]
        batch["chunk_mask"][b, :n] = 1
    if all("labels" in e for e in examples):
        batch["labels"] = np.asarray([e["labels"] for e in examples])
    return batch


def _flatten_chunks(name, value, ndim):
    """(B, C, T[, H]) -> ((B*C, T[, H]), the original shape); None -> (None, None)."""
    if value is None:
        return None, None
    a = np.asarray(value)
    if a.ndim != ndim:
        dims = "(batch, chunks, sequence" + (", hidden_size)" if ndim == 4 else ")")
        raise ValueError(f"BertForChunkedSequenceClassification: {name} must be {ndim}-D {dims}, got shape {a.shape}")
    return a.reshape(-1, *a.shape[2:]), a.shape


# =========================================================================================
# Fusing the chunks' pooled outputs: forward and backward
# =========================================================================================
def chunk_pooling_forward(pooled, chunk_mask, mode):
    """pooled (B, C, H), chunk_mask (B, C) of 0/1 -> fused (B, H), cache.  Padding chunks never count."""
    B, C, H = pooled.shape
    m = np.asarray(chunk_mask).astype(bool)                                     # (B, C)
    if m.shape != (B, C):
        raise ValueError(f"chunk_mask has shape {m.shape}, the inputs have (batch, chunks) = ({B}, {C})")
    if not m.any(axis=1).all():
        raise ValueError(f"chunk_mask: example {int(np.argmin(m.any(axis=1)))} has no real chunk")
    if mode == "mean":
        w = m.astype(pooled.dtype)[:, :, None]                                   # (B, C, 1)
        count = w.sum(axis=1)                                                    # (B, 1)
        fused = (pooled * w).sum(axis=1) / count                                 # f = sum_c m_c p_c / sum_c m_c
        return fused, ("mean", w / count[:, None, :], pooled.shape)
    if mode == "max":
        masked = np.where(m[:, :, None], pooled, -np.inf)                        # (B, C, H), padding never wins
        argmax = masked.argmax(axis=1)                                           # (B, H) the winning chunk per unit
        fused = np.take_along_axis(pooled, argmax[:, None, :], axis=1)[:, 0, :]  # (B, H) f_h = p_{argmax_h, h}
        return fused, ("max", argmax, pooled.shape)
    raise ValueError(f"chunk pooling must be one of {CHUNK_POOLINGS}, got {mode!r}")


def chunk_pooling_backward(dfused, cache):
    """dfused (B, H) -> dpooled (B, C, H)."""
    mode, saved, shape = cache
    if mode == "mean":
        return saved * dfused[:, None, :]                                        # dp_c = m_c / sum m * df
    dpooled = np.zeros(shape, dtype=dfused.dtype)                                # (B, C, H)
    np.put_along_axis(dpooled, saved[:, None, :], dfused[:, None, :], axis=1)    # only the argmax chunk gets df_h
    return dpooled


class BertForChunkedSequenceClassification(BertForSequenceClassification):
    """Long-text classification: C windows per text through `bert`, the pooled outputs (B, C, H)
    fused by mean or max over the real windows (`chunk_mask`), then dropout + classifier and the
    loss exactly as BertForSequenceClassification (whose parameters and state_dict keys it has).

    chunk_pooling: "mean" or "max"; default config.chunk_pooling, else "mean".  It is kept in the
    config (saved with it).  hidden_states / attentions are per window, (B*C, ...);
    inputs_embeds_grad is (B, C, T, H).
    """

    def __init__(self, config, seed=0, dtype=np.float32, chunk_pooling=None, **kwargs):
        chunk_pooling = chunk_pooling or getattr(config, "chunk_pooling", None) or "mean"
        if chunk_pooling not in CHUNK_POOLINGS:
            raise ValueError(f"chunk_pooling must be one of {CHUNK_POOLINGS}, got {chunk_pooling!r}")
        config.chunk_pooling = chunk_pooling
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.chunk_pooling = chunk_pooling
        self._chunk_mask = None

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, chunk_mask=None,
                labels=None):
        """input_ids, attention_mask, token_type_ids, position_ids: (B, C, T); inputs_embeds (B, C, T, H);
        chunk_mask (B, C), default all ones; labels as BertForSequenceClassification's, (B,) or (B, K)."""
        flatten = _flatten_chunks
        input_ids, ids_shape = flatten("input_ids", input_ids, 3)
        inputs_embeds, embeds_shape = flatten("inputs_embeds", inputs_embeds, 4)
        if ids_shape is None and embeds_shape is None:
            raise ValueError(f"{type(self).__name__}: give input_ids (B, C, T) or inputs_embeds (B, C, T, H)")
        B, C = (ids_shape or embeds_shape)[:2]
        flat = {}
        for name, value in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids),
                            ("position_ids", position_ids)):
            flat[name], shape = flatten(name, value, 3)
            if shape is not None and shape[:2] != (B, C):
                raise ValueError(f"{type(self).__name__}: {name} has shape {shape}, the inputs have "
                                 f"(batch, chunks) = ({B}, {C})")
        # The fusion runs inside _bert_forward below (it turns the B*C pooled outputs into B), so the
        # mask goes there through the instance for the length of this call.
        self._chunk_mask = np.ones((B, C), dtype=np.int64) if chunk_mask is None else chunk_mask
        try:
            output, cache = super().forward(input_ids, flat["attention_mask"], flat["token_type_ids"],
                                            flat["position_ids"], head_mask, inputs_embeds, output_hidden_states,
                                            output_attentions, labels=labels)
        finally:
            self._chunk_mask = None
        cache["chunks"] = (B, C)
        return output, cache

    def _bert_forward(self, *args):
        """bert on the B*C windows, then the fusion: pooler_output (B*C, H) -> (B, C, H) -> (B, H)."""
        outputs, bert_cache = super()._bert_forward(*args)
        m = np.asarray(self._chunk_mask)
        B, C = m.shape[:2] if m.ndim == 2 else (None, None)
        if m.ndim != 2 or outputs.pooler_output.shape[0] != B * C:
            raise ValueError(f"chunk_mask has shape {m.shape}, the inputs have "
                             f"{outputs.pooler_output.shape[0]} windows")
        pooled = outputs.pooler_output.reshape(B, C, -1)                          # (B, C, H)
        fused, pool_cache = chunk_pooling_forward(pooled, m, self.chunk_pooling)  # (B, H)
        outputs = type(outputs)(**{**outputs, "pooler_output": fused})
        return outputs, (bert_cache, pool_cache)

    def _bert_backward(self, cache, grads, hidden_states, attentions, last_hidden_state=None, pooler_output=None):
        bert_cache, pool_cache = cache
        dpooled = chunk_pooling_backward(pooler_output, pool_cache)              # (B, C, H)
        return super()._bert_backward(bert_cache, grads, hidden_states, attentions,
                                      pooler_output=dpooled.reshape(-1, dpooled.shape[-1]))   # (B*C, H)

    def _backward(self, cache, **upstream):
        grads, dinputs_embeds = super()._backward(cache, **upstream)
        B, C = cache["chunks"]
        if dinputs_embeds is not None:
            dinputs_embeds = dinputs_embeds.reshape(B, C, *dinputs_embeds.shape[1:])   # (B, C, T, H)
        return grads, dinputs_embeds

