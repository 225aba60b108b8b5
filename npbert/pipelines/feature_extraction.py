"""pipeline("feature-extraction"): the last hidden state of a text, as transformers'
FeatureExtractionPipeline: `[[[h_1], ..., [h_T]]]`, nested lists (1, T, H) per text, or the
array with return_tensors=True.  No pooling: for one vector per sentence see npbert embed
(mean pooling, docs/sentence_embeddings.md)."""
import numpy as np

from npbert.modeling import BertModel
from npbert.pipelines.base import Pipeline


class FeatureExtractionPipeline(Pipeline):
    task = "feature-extraction"
    model_class = BertModel
    token_outputs = ("last_hidden_state", "logits")     # (an npbert model given with a head: its logits)

    def _check_parameters(self, truncation=None, tokenize_kwargs=None, return_tensors=False):
        if truncation is not None and "truncation" in (tokenize_kwargs or {}):
            raise ValueError("truncation parameter defined twice (given as keyword argument as well as in "
                             "tokenize_kwargs)")

    def _preprocess(self, text, truncation=None, tokenize_kwargs=None, return_tensors=False):
        kwargs = dict(tokenize_kwargs or {})
        if truncation is not None:
            kwargs["truncation"] = truncation
        return [self._sequence(self._encode(text, **kwargs))], None

    def _postprocess(self, context, outputs, truncation=None, tokenize_kwargs=None, return_tensors=False):
        out = outputs[0]
        hidden = out["last_hidden_state"] if "last_hidden_state" in out else out["logits"]    # (T, H)
        hidden = np.array(hidden[None])                                                        # (1, T, H), a copy
        return hidden if return_tensors else hidden.tolist()
