"""Extractive question answering: BertForQuestionAnswering (start and end logits over the tokens).

    B = batch, T = sequence length, H = hidden size
"""
import numpy as np

from ..bert import BertModel
from ..loss_terms import LossTerm, batch_labels, term_scale
from ..nn import Linear
from ..outputs import QuestionAnsweringModelOutput
from ..pretrained import BertPreTrainedModel
from .base import _BertHeadModel, _grad_or_zeros, _loss_upstream


class BertForQuestionAnswering(_BertHeadModel):
    """Span extraction: qa_outputs (H -> 2) on every token, split into start_logits and
    end_logits (B, T).  Positions are clamped to [0, T]; position T (an answer outside the
    window) is the ignore index.  loss = (start cross-entropy + end cross-entropy) / 2, computed
    when both start_positions and end_positions are given."""

    _fresh_prefixes = BertPreTrainedModel._fresh_prefixes + ("qa_outputs.",)
    _loss_needs = "it needs both start_positions= and end_positions="
    _main_output = "start_logits"
    attribution_targets = {"span": None}      # ("start" | "end", position): start_logits or end_logits

    def loss_terms(self, batch):
        """start and end, weight 1/2 each: means over the examples whose position is inside the
        window (positions are clamped to [0, T], and T is ignored)."""
        T = np.shape(batch.get("input_ids") if batch.get("input_ids") is not None else batch["inputs_embeds"])[1]
        return [LossTerm(side, 0.5, int(np.count_nonzero(
                    np.clip(batch_labels(self, batch, f"{side}_positions").reshape(-1).astype(np.int64), 0, T) != T)))
                for side in ("start", "end")]

    def regroup_kind(self, labels):
        return ("BertForQuestionAnswering: its softmax covers the padded positions, so the padding is part of "
                "the loss")

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
        ops = self.ops
        if self.num_labels != 2:
            raise ValueError(f"BertForQuestionAnswering splits qa_outputs into start and end logits and needs "
                             f"config.num_labels == 2, got {self.num_labels}")
        outputs, bert_cache = self._bert_forward(input_ids, attention_mask, token_type_ids, position_ids,
                                                 head_mask, inputs_embeds, output_hidden_states, output_attentions)
        logits, qa_cache = self.qa_outputs.forward(outputs.last_hidden_state)                                # (B, T, 2)
        start_logits = np.ascontiguousarray(logits[..., 0])                                         # (B, T)
        end_logits = np.ascontiguousarray(logits[..., 1])                                           # (B, T)
        total_loss, loss_cache, loss_means = None, None, None
        if start_positions is not None and end_positions is not None:
            B, T = start_logits.shape
            ignored_index = T       # positions outside the window are clamped to T and ignored
            start_positions = self._positions("start_positions", start_positions, B, T)
            end_positions = self._positions("end_positions", end_positions, B, T)
            start_loss, start_cache = ops.cross_entropy_forward(start_logits, start_positions, ignore_index=ignored_index)
            end_loss, end_cache = ops.cross_entropy_forward(end_logits, end_positions, ignore_index=ignored_index)
            total_loss = (start_loss + end_loss) / start_logits.dtype.type(2)
            loss_cache = (start_cache, end_cache)
            loss_means = {"start": start_loss, "end": end_loss}
        output = QuestionAnsweringModelOutput(loss=total_loss, start_logits=start_logits, end_logits=end_logits,
                                              hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output, {"bert": bert_cache, "qa": qa_cache, "loss": loss_cache, "loss_means": loss_means,
                        "shape": start_logits.shape}

    def _backward(self, cache, loss=None, start_logits=None, end_logits=None, hidden_states=None, attentions=None):
        ops = self.ops
        dtype = self.state.dtype
        dloss = _loss_upstream(self, cache, loss, (start_logits, end_logits, hidden_states, attentions))
        dstart = _grad_or_zeros("start_logits", start_logits, cache["shape"], dtype)                # (B, T)
        dend = _grad_or_zeros("end_logits", end_logits, cache["shape"], dtype)                      # (B, T)
        if dloss is not None:
            start_cache, end_cache = cache["loss"]
            # total_loss = (start_loss + end_loss) / 2 (each term's scale its own with loss_scales)
            dstart += ops.cross_entropy_backward(term_scale(dloss, "start") / 2, start_cache)
            dend += ops.cross_entropy_backward(term_scale(dloss, "end") / 2, end_cache)
        dlogits = np.stack([dstart, dend], axis=-1)                                                 # (B, T, 2)
        dsequence, g = self.qa_outputs.backward(dlogits, cache["qa"])                      # (B, T, H)
        return self._bert_backward(cache["bert"], g, hidden_states, attentions,
                                   last_hidden_state=dsequence)
