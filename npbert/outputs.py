"""Model outputs with transformers' names (transformers.modeling_outputs), public and stable.

`ModelOutput` is the base of each: the fields that are not None, by attribute, key, index and
`.get`, and `to_tuple()`.  An output of your own lists its fields as annotations (docs/custom_heads.md):

    class SentenceAndTagsOutput(ModelOutput):
        loss: float = None
        sentence_logits: np.ndarray = None
        tag_logits: np.ndarray = None
"""
from npbert.modeling.outputs import (BaseModelOutputWithPoolingAndCrossAttentions, BertForPreTrainingOutput,
                                     CausalLMOutputWithCrossAttentions, MaskedLMOutput, ModelOutput,
                                     MultipleChoiceModelOutput, NextSentencePredictorOutput,
                                     QuestionAnsweringModelOutput, SequenceClassifierOutput, TokenClassifierOutput)

__all__ = ["ModelOutput", "BaseModelOutputWithPoolingAndCrossAttentions", "BertForPreTrainingOutput", "MaskedLMOutput",
           "CausalLMOutputWithCrossAttentions", "NextSentencePredictorOutput", "SequenceClassifierOutput",
           "TokenClassifierOutput", "MultipleChoiceModelOutput", "QuestionAnsweringModelOutput"]
