"""pipeline("feature-extraction"): the last hidden state of a text, as transformers'
FeatureExtractionPipeline: `[[[h_1], ..., [h_T]]]`, nested lists (1, T, H) per text, or the
array with return_tensors=True.  No pooling: for one vector per sentence see npbert embed
(mean pooling, docs/sentence_embeddings.md)."""
from npbert.modeling import BertModel
from npbert.pipelines.base import Pipeline


class FeatureExtractionPipeline(Pipeline):
    task = "feature-extraction"
    model_class = BertModel

    def _check_parameters(self, truncation=None, tokenize_kwargs=None, return_tensors=False):
        if truncation is not None and "truncation" in (tokenize_kwargs or {}):
            raise ValueError("truncation parameter defined twice (given as keyword argument as well as in "
                             "tokenize_kwargs)")

    def _run(self, text, truncation=None, tokenize_kwargs=None, return_tensors=False):
        kwargs = dict(tokenize_kwargs or {})
        if truncation is not None:
            kwargs["truncation"] = truncation
        out = self._forward(self._encode(text, **kwargs))
        hidden = out.last_hidden_state if "last_hidden_state" in out else out.logits      # (1, T, H)
        return hidden if return_tensors else hidden.tolist()
