"""pipeline("fill-mask"): the most likely tokens for each [MASK], as transformers' FillMaskPipeline.

    T = tokens, V = vocabulary size

    text with [MASK] -> BertForMaskedLM -> logits (T, V) -> softmax at each mask -> top_k tokens

Each candidate is {"score", "token" (id), "token_str", "sequence" (the text with the token put
in)}; a text with one mask gives a list of top_k candidates, a text with several masks a list of
such lists (each mask scored on its own, not jointly).  `targets` limits the candidates to the
given words (a word outside the vocabulary stands for its first WordPiece, with a warning).

A checkpoint without a trained masked-LM head (a BertModel, a fine-tuned classifier) loads with
the warning that its head "is newly initialized": its answers are then random.
"""
import warnings

import numpy as np

from npbert.modeling import BertForMaskedLM
from npbert.pipelines.base import Pipeline, softmax


class FillMaskPipeline(Pipeline):
    task = "fill-mask"
    model_class = BertForMaskedLM
    token_outputs = ("logits",)

    def _check_parameters(self, top_k=5, targets=None, tokenizer_kwargs=None):
        if not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        if self.tokenizer.mask_token_id is None:
            raise ValueError("fill-mask: the tokenizer defines no mask token")

    def __call__(self, inputs, batch_size=None, **kwargs):
        results = super().__call__(inputs, batch_size, **kwargs)
        if isinstance(inputs, list) and len(inputs) == 1:
            return results[0]
        return results

    def target_ids(self, targets):
        """The vocabulary ids of `targets` (a word or a list), without repeats."""
        if isinstance(targets, str):
            targets = [targets]
        vocab = self.tokenizer.get_vocab()
        ids = []
        for target in targets:
            id_ = vocab.get(target)
            if id_ is None:
                pieces = self.tokenizer(target, add_special_tokens=False)["input_ids"]
                if not pieces:
                    warnings.warn(f"The specified target token `{target}` does not exist in the model vocabulary. "
                                  "We cannot replace it with anything meaningful, ignoring it", stacklevel=4)
                    continue
                id_ = pieces[0]
                warnings.warn(f"The specified target token `{target}` does not exist in the model vocabulary. "
                              f"Replacing with `{self.tokenizer.convert_ids_to_tokens(id_)}`.", stacklevel=4)
            ids.append(id_)
        ids = sorted(set(ids))
        if not ids:
            raise ValueError("At least one target must be provided when passed.")
        return np.array(ids)

    def _preprocess(self, text, top_k=5, targets=None, tokenizer_kwargs=None):
        tok = self.tokenizer
        enc = self._encode(text, **(tokenizer_kwargs or {}))
        input_ids = enc["input_ids"][0]                                              # (T,)
        masked = np.flatnonzero(input_ids == tok.mask_token_id)
        if masked.size == 0:
            raise ValueError(f"fill-mask: no mask_token ({tok.mask_token}) found in the input {text[:60]!r}")
        return [self._sequence(enc)], (input_ids, masked)

    def _postprocess(self, context, outputs, top_k=5, targets=None, tokenizer_kwargs=None):
        tok = self.tokenizer
        input_ids, masked = context
        logits = outputs[0]["logits"][masked, :]                                    # (masks, V)
        probs = softmax(logits)
        target_ids = None if targets is None else self.target_ids(targets)
        if target_ids is not None:
            probs = probs[..., target_ids]
            top_k = min(top_k, len(target_ids))
        single = len(masked) == 1
        result = []
        for i, row in enumerate(probs):
            best = np.argsort(-row, kind="stable")[:top_k]
            candidates = []
            for p in best:
                token = int(target_ids[p]) if target_ids is not None else int(p)
                filled = input_ids.copy()
                filled[masked[i]] = token
                filled = filled[filled != tok.pad_token_id]
                candidates.append({"score": row[p].item(), "token": token, "token_str": tok.decode([token]),
                                   "sequence": tok.decode(filled.tolist(), skip_special_tokens=single)})
            result.append(candidates)
        return result[0] if single else result
