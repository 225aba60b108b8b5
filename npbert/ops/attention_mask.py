"""The 1/0 attention mask -> the additive mask the encoder's layers add to their scores.

    (B, T) -> (B, 1, 1, T),  (B, F, T) -> (B, 1, F, T);  extended = (1 - mask) * finfo(dtype).min

BertModel builds its mask with this function; npbert.functional and npbert.testing re-export it
under transformers' name.
"""
import numpy as np


def get_extended_attention_mask(attention_mask, input_shape=None, dtype=np.float64, is_decoder=False):
    """The 1/0 attention mask -> the additive mask the encoder's layers receive, as BertModel
    builds it (and transformers 4.x's `get_extended_attention_mask`; in 5.x, masking_utils'
    eager masks hold the same numbers):

        (B, T)     -> (B, 1, 1, T)   every query row sees the same keys
        (B, F, T)  -> (B, 1, F, T)   one row of keys per query
        extended = (1 - mask) * finfo(dtype).min      0 where attended, finfo.min where masked

    With is_decoder=True a 2-D mask is also made causal (query i sees keys <= i): (B, 1, T, T).
    input_shape: (B, T), checked against the mask when given (needed only for a decoder with
    attention_mask None, which then attends everywhere it may).  attention_mask None -> None
    (no mask) for an encoder.  Values other than 0 and 1 are an error."""
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"get_extended_attention_mask: dtype must be floating point, got {dtype}")
    if attention_mask is None:
        if not is_decoder:
            return None
        if input_shape is None:
            raise ValueError("get_extended_attention_mask: a decoder with attention_mask=None needs input_shape (B, T)")
        attention_mask = np.ones(tuple(input_shape), dtype=dtype)
    m = np.asarray(attention_mask)
    if m.dtype == object or not (np.issubdtype(m.dtype, np.number) or m.dtype == bool):
        raise TypeError(f"attention_mask must be numeric, got dtype {m.dtype}")
    if m.ndim == 2:
        if input_shape is not None and m.shape != tuple(input_shape):
            raise ValueError(f"attention_mask has shape {m.shape}, the inputs are {tuple(input_shape)}")
        T = m.shape[1]
        m = m[:, None, None, :]                                                # (B, 1, 1, T)
        if is_decoder:
            m = m * np.tril(np.ones((T, T), dtype=dtype))                      # (B, 1, T, T), causal
    elif m.ndim == 3:
        if input_shape is not None and m.shape != (input_shape[0], input_shape[1], input_shape[1]):
            raise ValueError(f"a 3-D attention_mask must be (batch, from_seq, to_seq) = "
                             f"({input_shape[0]}, {input_shape[1]}, {input_shape[1]}), got {m.shape}")
        m = m[:, None, :, :]                                                   # (B, 1, F, T)
    else:
        raise ValueError(f"attention_mask must be 2-D (batch, seq) or 3-D (batch, seq, seq), got shape {m.shape}")
    if not np.isin(m, (0, 1)).all():
        raise ValueError("attention_mask must hold only 1 (attend) and 0 (masked)")
    return (1.0 - m.astype(dtype)) * np.finfo(dtype).min
