"""Sentence embeddings from token vectors (Sentence-BERT, Reimers & Gurevych 2019), the recipe of
all-MiniLM-L6-v2: the mean of the token vectors over the attention mask, then L2-normalised.

    mean_pooling:  e = sum_t m_t h_t / max(sum_t m_t, 1e-9)          h (B, T, H), m (B, T) -> e (B, H)
                   backward: dh_t = m_t de / max(sum_t m_t, 1e-9)
    normalize:     u = e / max(||e||, 1e-12)                          (B, H) -> (B, H)
                   backward: du -> (du - u (u . du)) / ||e||    (for ||e|| > 1e-12)
"""
import numpy as np


def mean_pooling_forward(hidden_states, attention_mask):
    m = np.asarray(attention_mask).astype(hidden_states.dtype)[..., None]          # (B, T, 1)
    count = np.maximum(m.sum(axis=1), hidden_states.dtype.type(1e-9))             # (B, 1)
    return (hidden_states * m).sum(axis=1) / count, (m, count)


def mean_pooling_backward(de, cache):
    m, count = cache
    return m * (de / count)[:, None, :]                                            # (B, T, H)


def normalize_forward(e, eps=1e-12):
    norm = np.maximum(np.linalg.norm(e, axis=-1, keepdims=True), e.dtype.type(eps))   # (B, 1)
    u = e / norm
    return u, (u, norm)


def normalize_backward(du, cache):
    u, norm = cache
    return (du - u * (u * du).sum(axis=-1, keepdims=True)) / norm
