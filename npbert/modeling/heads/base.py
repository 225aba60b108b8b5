"""What npbert's task heads share: the tied decoder weight's gradient, label checks, and `_BertHeadModel` (the `bert` forward call and its backward, with the
fast path's [CLS]-row shortcut).  A head of your own subclasses BertPreTrainedModel instead
(docs/custom_heads.md): nothing here is needed for it.

    B = batch, T = sequence length, H = hidden size, V = vocab size
"""
import numpy as np

from ..bert import _upstream
from ..loss_terms import IGNORE_INDEX  # noqa: F401  (the heads' ignore index, public here too)
from ..pretrained import BertPreTrainedModel

WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"
DECODER_WEIGHT = "cls.predictions.decoder.weight"
DECODER_BIAS = "cls.predictions.decoder.bias"
PREDICTIONS_BIAS = "cls.predictions.bias"


# ---- the tied decoder weight ------------------------------------------------------------
# `cls.predictions.decoder.weight` IS `bert.embeddings.word_embeddings.weight`: one (V, H)
# array with two names.  It is used twice, looked up at the input (embeddings: x = W[ids]) and
# multiplied at the output (decoder: logits = h @ W.T + b), so
#     d loss / d W = (gradient of the lookup) + (gradient of the decoder).
# This is the one place where the two are added.
def _sum_tied_decoder_gradient(grads):
    d_decoder = grads.pop(DECODER_WEIGHT, None)       # (V, H) = dlogits^T @ h, every row; absent when frozen
    if d_decoder is None:
        return
    d_lookup = grads.get(WORD_EMBEDDINGS)             # (V, H) scatter-add, padding row 0; absent with inputs_embeds
    grads[WORD_EMBEDDINGS] = d_decoder if d_lookup is None else d_lookup + d_decoder


def _class_labels(name, labels, shape):
    """Integer class labels (int64) of `shape`; also accepted as transformers' `labels.view(-1)`
    accepts them: flattened, or with a trailing axis of 1."""
    a = np.asarray(labels)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be integer class indices, got dtype {a.dtype}")
    shape = tuple(shape)
    n = int(np.prod(shape))
    if a.shape not in (shape, shape + (1,), (n,)):
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    return a.reshape(shape).astype(np.int64, copy=False)


def _grad_or_zeros(name, value, shape, dtype):
    d = _upstream(name, value, shape, dtype)
    return np.zeros(shape, dtype=dtype) if d is None else d.copy()


class _BertHeadModel(BertPreTrainedModel):
    """What the heads share: the `bert` forward call and its backward."""

    _reads_pooled_only = False        # True: the head reads only bert's pooled [CLS] output
    regroup_refusal = None            # its loss reads the real tokens only (a head whose does not says why)

    def _bert_forward(self, input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                      inputs_embeds, output_hidden_states, output_attentions):
        # A head that reads only the pooled output reads row 0 of the last hidden state: the last
        # layer may then compute that row alone (BertEncoder.forward's read_rows).
        return self.bert.forward(input_ids=input_ids, attention_mask=attention_mask,
                                 token_type_ids=token_type_ids, position_ids=position_ids, head_mask=head_mask,
                                 inputs_embeds=inputs_embeds, output_hidden_states=output_hidden_states,
                                 output_attentions=output_attentions,
                                 read_rows=(0, 1) if self._reads_pooled_only else None)

    def _bert_backward(self, cache, grads, hidden_states, attentions, last_hidden_state=None, pooler_output=None):
        bert_grads, dinputs_embeds = self.bert._backward(cache, last_hidden_state=last_hidden_state,
                                                         pooler_output=pooler_output,
                                                         hidden_states=hidden_states, attentions=attentions)
        grads.update(bert_grads)
        return grads, dinputs_embeds
