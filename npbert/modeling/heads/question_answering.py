"""Extractive question answering: BertForQuestionAnswering (start and end logits over the tokens).

    B = batch, T = sequence length, H = hidden size
"""
import numpy as np

from ..bert import BertModel
from ..loss_terms import LossTerm, batch_length, batch_rows, cross_entropy, has_labels
from ..leaf_modules import Linear
from ..outputs import QuestionAnsweringModelOutput
from ..pretrained import BertPreTrainedModel
from .base import _BertHeadModel, _grad_or_zeros


class BertForQuestionAnswering(_BertHeadModel):
    """Span extraction: qa_outputs (H -> 2) on every token, split into start_logits and
    end_logits (B, T).  Positions are clamped to [0, T]; position T (an answer outside the
    window) is the ignore index.  loss = (start cross-entropy + end cross-entropy) / 2, computed
    when both start_positions and end_positions are given."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("qa_outputs.",)
    attribution_targets = {"span": None}      # ("start" | "end", position): start_logits or end_logits
    regroup_refusal = "its softmax covers the padded positions, so the padding is part of the loss"

    def loss_terms(self, batch):
        """transformers' `total_loss = (start_loss + end_loss) / 2`, computed when both positions are
        given: start and end, weight 1/2 each, a cross-entropy over the T positions, each a mean over
        the examples whose position is inside the window (positions are clamped to [0, T], and T,
        "outside this window", is the ignore index)."""
        if not has_labels(batch, "start_positions", "end_positions"):
            return []
        B, T = batch_rows(batch), batch_length(batch)
        return [LossTerm(side, f"{side}_logits", cross_entropy, self._positions(f"{side}_positions",
                                                                                 batch[f"{side}_positions"], B, T),
                         weight=0.5, ignore_index=T)
                for side in ("start", "end")]

    def __init__(self, config, seed=0, dtype=np.float32, **kwargs):
        super().__init__(config, seed=seed, dtype=dtype, **kwargs)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False, _parent=self, _prefix="bert.")
        self.qa_outputs = Linear(self.state, "qa_outputs.", config.hidden_size, config.num_labels)
        self.post_init()

    @staticmethod
    def _positions(name, positions, B, T):
        """(B,) or (B, 1) integer token positions, clamped to [0, T]; T means "not in this window"."""
        a = np.asarray(positions)
        if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{name} must be integer token positions, got dtype {a.dtype}")
        if a.ndim > 1:
            a = a.squeeze(-1)
        if a.shape != (B,):
            raise ValueError(f"{name} has shape {np.shape(positions)}, expected ({B},)")
        return np.clip(a.astype(np.int64), 0, T)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, output_hidden_states=False, output_attentions=False, start_positions=None,
                end_positions=None):
        """start_positions, end_positions: (B,) token indices of the answer span."""
        if self.num_labels != 2:
            raise ValueError(f"BertForQuestionAnswering splits qa_outputs into start and end logits and needs "
                             f"config.num_labels == 2, got {self.num_labels}")
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        logits, qa_cache = self.qa_outputs.forward(outputs.last_hidden_state)                                # (B, T, 2)
        start_logits = np.ascontiguousarray(logits[..., 0])                                         # (B, T)
        end_logits = np.ascontiguousarray(logits[..., 1])                                           # (B, T)
        # the loss: loss_terms above, computed on these outputs by the model's call
        output = QuestionAnsweringModelOutput(start_logits=start_logits, end_logits=end_logits,
                                              hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "qa": qa_cache, "shape": start_logits.shape}

    def _backward(self, cache, start_logits=None, end_logits=None, hidden_states=None, attentions=None):
        dtype = self.state.dtype
        dstart = _grad_or_zeros("start_logits", start_logits, cache["shape"], dtype)                # (B, T)
        dend = _grad_or_zeros("end_logits", end_logits, cache["shape"], dtype)                      # (B, T)
        dlogits = np.stack([dstart, dend], axis=-1)                                                 # (B, T, 2)
        dsequence, g = self.qa_outputs.backward(dlogits, cache["qa"])                      # (B, T, H)
        return self._bert_backward(cache["bert"], g, hidden_states, attentions,
                                   last_hidden_state=dsequence)
