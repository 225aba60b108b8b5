"""Output containers with transformers' attribute names.

An output is a dict of the fields that were computed (None fields are left out, as in
transformers' ModelOutput), readable as attributes, by name, or by position.  It prints as
transformers' dataclass does, every field listed:
`SequenceClassifierOutput(loss=None, logits=array(...), hidden_states=None, attentions=None)`.
Intermediates and IntermediateGrads (at the end) hold what npbert keeps on request beyond them.
"""
import numpy as np


class ModelOutput(dict):
    """transformers' ModelOutput: the fields that are not None, by attribute, key, index and
    `.get`, and `to_tuple()`.  An output of your own lists its fields as annotations, in order
    (as transformers' `@dataclass` outputs, without the decorator):

        class SentenceAndTokensOutput(npbert.ModelOutput):
            loss: float = None
            sentence_logits: np.ndarray = None          # (B, K)
            token_logits: np.ndarray = None             # (B, T, J)
            hidden_states: tuple = None
            attentions: tuple = None
    """
    _fields = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = [n for n in vars(cls).get("__annotations__", {}) if not n.startswith("_")]
        if own:
            cls._fields = tuple(f for f in cls._fields if f not in own) + tuple(own)
            for name in own:                       # a class attribute would hide the field's value
                if name in vars(cls):
                    delattr(cls, name)

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        super().__init__((k, kwargs[k]) for k in self._fields if kwargs.get(k) is not None)

    def __getattr__(self, name):
        if name in self._fields:
            return self.get(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}; fields: {self._fields}")

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return self.to_tuple()[key]
        return super().__getitem__(key)

    def to_tuple(self):
        return tuple(self.values())

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{k}={self.get(k)!r}" for k in self._fields) + ")"


def _output(name, *fields):
    return type(name, (ModelOutput,), {"_fields": fields, "__doc__": f"Fields: {', '.join(fields)}."})


BaseModelOutputWithPoolingAndCrossAttentions = _output(
    "BaseModelOutputWithPoolingAndCrossAttentions",
    "last_hidden_state", "pooler_output", "hidden_states", "attentions")

# ---- the heads' outputs (npbert/modeling/heads/), fields as transformers' ---------------
BertForPreTrainingOutput = _output(
    "BertForPreTrainingOutput",
    "loss", "prediction_logits", "seq_relationship_logits", "hidden_states", "attentions")
MaskedLMOutput = _output("MaskedLMOutput", "loss", "logits", "hidden_states", "attentions")
CausalLMOutputWithCrossAttentions = _output(
    "CausalLMOutputWithCrossAttentions",
    "loss", "logits", "past_key_values", "hidden_states", "attentions", "cross_attentions")
NextSentencePredictorOutput = _output("NextSentencePredictorOutput", "loss", "logits", "hidden_states", "attentions")
SequenceClassifierOutput = _output("SequenceClassifierOutput", "loss", "logits", "hidden_states", "attentions")
TokenClassifierOutput = _output("TokenClassifierOutput", "loss", "logits", "hidden_states", "attentions")
MultipleChoiceModelOutput = _output("MultipleChoiceModelOutput", "loss", "logits", "hidden_states", "attentions")
QuestionAnsweringModelOutput = _output(
    "QuestionAnsweringModelOutput", "loss", "start_logits", "end_logits", "hidden_states", "attentions")


# ---- intermediates and their gradients (npbert.interpret; no transformers counterpart) ------------
class _PerLayer:
    """Named tuples of per-layer arrays, printed as their shapes."""
    _fields = ()

    def __init__(self, **fields):
        for name in self._fields:
            setattr(self, name, fields[name])

    def __repr__(self):
        def shape(v):
            if v is None:
                return "None"
            if isinstance(v, tuple):
                return f"{len(v)} x {tuple(v[0].shape)}" if v else "()"
            return str(tuple(v.shape))
        return f"{type(self).__name__}(" + ", ".join(f"{n}={shape(getattr(self, n))}" for n in self._fields) + ")"


class Intermediates(_PerLayer):
    """What `model(..., output_intermediates=True)` keeps, as `output.intermediates`.  Per layer
    i < L (a tuple of L arrays each), in the order the forward makes them:

        query[i], key[i], value[i]   (B, N, T, D)  x W^T + b split into heads (the query not yet scaled)
        attention_scores[i]          (B, N, F, T)  query key^T * D**-0.5 + mask: the softmax's input
                                                   (the mask: 0 where attended, finfo.min where not)
        attentions[i]                (B, N, F, T)  the probabilities as used, dropout(softmax(scores))
                                                   * head_mask: output.attentions
        context_layer[i]             (B, F, H)     attentions @ value, heads merged: BertSelfAttention's output
        attention_output[i]          (B, T, H)     BertAttention's output (after its LayerNorm)
        intermediate_output[i]       (B, T, I)     the feed-forward activation act(a W1^T + b1)
        hidden_states[j], j <= L     (B, T, H)     the embeddings' output, then each layer's output:
                                                   output.hidden_states

    transformers' eager attention returns the probabilities after softmax and dropout as its
    "attention weights"; the scores here are what goes into that softmax."""
    _fields = ("query", "key", "value", "attention_scores", "attentions", "context_layer", "attention_output",
               "intermediate_output", "hidden_states")

    @classmethod
    def from_records(cls, embedding_output, records):
        fields = {name: tuple(r[name] for r in records) for name in cls._fields if name != "hidden_states"}
        return cls(hidden_states=(embedding_output,) + tuple(r["layer_output"] for r in records), **fields)


class IntermediateGrads(_PerLayer):
    """What `model.backward(..., return_intermediate_grads=True)` returns beside the parameter
    gradients: the gradient of the differentiated target (the loss, or sum(output * upstream))

        hidden_states[j], j <= L     (B, T, H)  with respect to hidden state j (j = 0: the embeddings'
                                                output), all its uses counted
        attentions[i], i < L         (B, N, F, T)  with respect to layer i's probabilities as used
        head_mask                    (L, N)     with respect to each head's head-mask value xi
                                                (probs = dropout(softmax(scores)) * xi; xi = 1 when the
                                                forward had no head_mask), summed over the batch
        pooler_output                (B, H)     with respect to the pooled output (what a head sends
                                                into the pooler); None for a model without a pooler"""
    _fields = ("hidden_states", "attentions", "head_mask", "pooler_output")

    @classmethod
    def from_records(cls, dembedding_output, records, dpooled=None):
        return cls(hidden_states=(dembedding_output,) + tuple(r["layer_output"] for r in records),
                   attentions=tuple(r["attentions"] for r in records),
                   head_mask=np.stack([r["head_mask"] for r in records]), pooler_output=dpooled)
