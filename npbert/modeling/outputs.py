"""Output containers with transformers' attribute names.

An output is a dict of the fields that were computed (None fields are left out, as in
transformers' ModelOutput), readable as attributes, by name, or by position.  It prints as
transformers' dataclass does, every field listed:
`SequenceClassifierOutput(loss=None, logits=array(...), hidden_states=None, attentions=None)`.
"""


class ModelOutput(dict):
    _fields = ()

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

# ---- the heads' outputs (npbert/modeling/heads.py), fields as transformers' ---------------
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
