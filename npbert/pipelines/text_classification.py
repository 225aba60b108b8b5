"""pipeline("text-classification") (alias "sentiment-analysis"): labels and scores of a text or
a pair, as transformers' TextClassificationPipeline.

    [CLS] text [SEP] (pair [SEP]) -> BertForSequenceClassification -> logits (K,) -> scores (K,)

The scores are softmax(logits) for single-label models, sigmoid(logits) for multi-label models
and one-output models, the logits themselves for regression (config.problem_type), or as
`function_to_apply` says.  Result shapes, as transformers gives them:

    clf("text")                   -> [{"label", "score"}]           the best label
    clf(["a", "b"])               -> [{"label", "score"}, ...]       the best label of each
    clf("text", top_k=2)          -> [{"label", "score"}, ...]       the 2 best, best first
    clf(["a", "b"], top_k=None)   -> [[...], [...]]                  every label of each
    clf({"text": a, "text_pair": b}) -> {"label", "score"}           a pair
"""
import numpy as np

from npbert.modeling import BertForSequenceClassification
from npbert.pipelines.base import Pipeline, sigmoid, softmax

FUNCTIONS = ("softmax", "sigmoid", "none")
_NOT_GIVEN = object()


class TextClassificationPipeline(Pipeline):
    task = "text-classification"
    model_class = BertForSequenceClassification
    sequence_outputs = ("logits",)

    def _check_parameters(self, top_k=_NOT_GIVEN, function_to_apply=None, **tokenizer_kwargs):
        if function_to_apply is not None and str(function_to_apply).lower() not in FUNCTIONS:
            raise ValueError(f"function_to_apply must be one of {FUNCTIONS}, got {function_to_apply!r}")
        if top_k is not _NOT_GIVEN and top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")

    def __call__(self, inputs, batch_size=None, **kwargs):
        legacy = "top_k" not in kwargs and "top_k" not in self.defaults
        results = super().__call__(inputs, batch_size, **kwargs)
        if isinstance(inputs, str) and legacy:
            return [results]              # transformers wraps the one result of a string in a list
        return results

    def _preprocess(self, example, top_k=_NOT_GIVEN, function_to_apply=None, **tokenizer_kwargs):
        if isinstance(example, dict):
            if "text" not in example:
                raise ValueError('a text pair is given as {"text": ..., "text_pair": ...}')
            enc = self._encode(example["text"], example.get("text_pair"), **tokenizer_kwargs)
        elif isinstance(example, (list, tuple)):
            raise ValueError('a text pair is given as {"text": ..., "text_pair": ...}, not as a list')
        else:
            enc = self._encode(example, **tokenizer_kwargs)
        return [self._sequence(enc)], None

    def _postprocess(self, context, outputs, top_k=_NOT_GIVEN, function_to_apply=None, **tokenizer_kwargs):
        return self.postprocess(outputs[0]["logits"], function_to_apply, top_k)        # logits (K,)

    def scores(self, logits, function_to_apply=None):
        """logits (K,) -> scores (K,), transformers' choice of function by the config."""
        config = self.model.config
        if function_to_apply is None:
            if config.problem_type == "regression":
                function_to_apply = "none"
            elif config.problem_type == "multi_label_classification" or config.num_labels == 1:
                function_to_apply = "sigmoid"
            else:
                function_to_apply = "softmax"
        logits = np.asarray(logits)
        return {"softmax": softmax, "sigmoid": sigmoid, "none": lambda x: x}[str(function_to_apply).lower()](logits)

    def postprocess(self, logits, function_to_apply=None, top_k=_NOT_GIVEN):
        scores = self.scores(logits, function_to_apply)
        id2label = self.model.config.id2label
        if top_k is _NOT_GIVEN:                                           # legacy: the best label only
            return {"label": id2label[int(scores.argmax())], "score": scores.max().item()}
        ranked = [{"label": id2label[i], "score": s.item()} for i, s in enumerate(scores)]
        ranked.sort(key=lambda x: x["score"], reverse=True)
        return ranked if top_k is None else ranked[:top_k]
