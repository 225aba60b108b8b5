"""From start/end logits to answer texts: the second half of google-research/bert's `run_squad.py`.

    write_predictions     every window's n-best (start, end) pairs -> the best answer of each question
    get_final_text        the predicted pieces' text projected back onto the original words
    _get_best_indexes     the n_best_size highest logits' positions
    _compute_softmax      probabilities of the n-best list

For each question, over all its windows: the `n_best_size` best start positions times the
`n_best_size` best end positions, kept if both are paragraph pieces scored in this window
(`token_is_max_context` for the start), end >= start and end - start + 1 <= max_answer_length;
ranked by start_logit + end_logit.  With SQuAD v2.0 the null answer ("" at [CLS]) competes with
    score_null = min over windows of (start_logits[0] + end_logits[0])
and the question is predicted unanswerable iff
    score_diff = score_null - (start_logit + end_logit of the best non-null answer) > null_score_diff_threshold.
Equal to Google's function on the same features and logits (tests/tasks/test_squad_vs_google.py).
"""
import collections
import json
import logging
import math

import numpy as np

from npbert.io._atomic import atomic_write
from npbert.tokenization.basic import BasicTokenizer

logger = logging.getLogger(__name__)

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
RawResult.__doc__ = """The model's output for one feature: start_logits, end_logits (T,) each."""

_PrelimPrediction = collections.namedtuple(
    "PrelimPrediction", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestPrediction = collections.namedtuple("NbestPrediction", ["text", "start_logit", "end_logit"])


def _as_floats(logits, name, unique_id):
    values = np.asarray(logits, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"feature {unique_id}: {name} must be 1-D (T,), got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"feature {unique_id}: {name} holds NaN or infinite values")
    return values.tolist()        # Python floats: the same arithmetic as Google's lists, and JSON-serialisable


def write_predictions(all_examples, all_features, all_results, n_best_size=20, max_answer_length=30,
                      do_lower_case=True, version_2_with_negative=False, null_score_diff_threshold=0.0,
                      output_prediction_file=None, output_nbest_file=None, output_null_log_odds_file=None,
                      verbose_logging=False):
    """Returns (predictions, nbest, scores_diff), OrderedDicts keyed by question id:
    the answer text; its n-best list [{"text", "probability", "start_logit", "end_logit"}, ...];
    (v2 only) score_diff.  Each is also written as JSON (atomically) to the output file given.

    all_results: RawResult(unique_id, start_logits (T,), end_logits (T,)) for every feature.
    """
    example_index_to_features = collections.defaultdict(list)
    for feature in all_features:
        example_index_to_features[feature.example_index].append(feature)
    unique_id_to_result = {}
    for result in all_results:
        unique_id_to_result[result.unique_id] = RawResult(
            result.unique_id, _as_floats(result.start_logits, "start_logits", result.unique_id),
            _as_floats(result.end_logits, "end_logits", result.unique_id))

    all_predictions = collections.OrderedDict()
    all_nbest_json = collections.OrderedDict()
    scores_diff_json = collections.OrderedDict()

    for (example_index, example) in enumerate(all_examples):
        features = example_index_to_features[example_index]
        prelim_predictions = []
        # the minimum null score (start + end logit at [CLS]) over the windows, and where it is
        score_null = 1000000             # large and positive
        min_null_feature_index = 0
        null_start_logit = 0
        null_end_logit = 0
        for (feature_index, feature) in enumerate(features):
            if feature.unique_id not in unique_id_to_result:
                raise ValueError(f"question {example.qas_id}: no result for feature {feature.unique_id}")
            result = unique_id_to_result[feature.unique_id]
            if len(result.start_logits) < len(feature.tokens) or len(result.end_logits) < len(feature.tokens):
                raise ValueError(f"feature {feature.unique_id}: {len(result.start_logits)} logits for "
                                 f"{len(feature.tokens)} tokens")
            start_indexes = _get_best_indexes(result.start_logits, n_best_size)
            end_indexes = _get_best_indexes(result.end_logits, n_best_size)
            if version_2_with_negative:
                feature_null_score = result.start_logits[0] + result.end_logits[0]
                if feature_null_score < score_null:
                    score_null = feature_null_score
                    min_null_feature_index = feature_index
                    null_start_logit = result.start_logits[0]
                    null_end_logit = result.end_logits[0]
            for start_index in start_indexes:
                for end_index in end_indexes:
                    # a span must lie in the paragraph part of this window, start where the
                    # window has the piece's max context, end after it and be short enough
                    if start_index >= len(feature.tokens) or end_index >= len(feature.tokens):
                        continue
                    if start_index not in feature.token_to_orig_map or end_index not in feature.token_to_orig_map:
                        continue
                    if not feature.token_is_max_context.get(start_index, False):
                        continue
                    if end_index < start_index:
                        continue
                    length = end_index - start_index + 1
                    if length > max_answer_length:
                        continue
                    prelim_predictions.append(_PrelimPrediction(
                        feature_index=feature_index, start_index=start_index, end_index=end_index,
                        start_logit=result.start_logits[start_index], end_logit=result.end_logits[end_index]))

        if version_2_with_negative:
            prelim_predictions.append(_PrelimPrediction(
                feature_index=min_null_feature_index, start_index=0, end_index=0,
                start_logit=null_start_logit, end_logit=null_end_logit))
        prelim_predictions = sorted(prelim_predictions, key=lambda x: (x.start_logit + x.end_logit), reverse=True)

        seen_predictions = {}
        nbest = []
        for pred in prelim_predictions:
            if len(nbest) >= n_best_size:
                break
            feature = features[pred.feature_index]
            if pred.start_index > 0:     # a non-null prediction
                tok_tokens = feature.tokens[pred.start_index:(pred.end_index + 1)]
                orig_doc_start = feature.token_to_orig_map[pred.start_index]
                orig_doc_end = feature.token_to_orig_map[pred.end_index]
                orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
                tok_text = " ".join(tok_tokens)
                # de-tokenize: glue the "##" pieces back, clean whitespace
                tok_text = tok_text.replace(" ##", "")
                tok_text = tok_text.replace("##", "")
                tok_text = tok_text.strip()
                tok_text = " ".join(tok_text.split())
                orig_text = " ".join(orig_tokens)
                final_text = get_final_text(tok_text, orig_text, do_lower_case, verbose_logging)
                if final_text in seen_predictions:
                    continue
                seen_predictions[final_text] = True
            else:
                final_text = ""
                seen_predictions[final_text] = True
            nbest.append(_NbestPrediction(text=final_text, start_logit=pred.start_logit, end_logit=pred.end_logit))

        # v2: the null answer is always in the n-best list
        if version_2_with_negative and "" not in seen_predictions:
            nbest.append(_NbestPrediction(text="", start_logit=null_start_logit, end_logit=null_end_logit))
        # no valid span at all (rare): a nonce prediction, as Google does
        if not nbest:
            nbest.append(_NbestPrediction(text="empty", start_logit=0.0, end_logit=0.0))

        total_scores = []
        best_non_null_entry = None
        for entry in nbest:
            total_scores.append(entry.start_logit + entry.end_logit)
            if not best_non_null_entry and entry.text:
                best_non_null_entry = entry
        probs = _compute_softmax(total_scores)

        nbest_json = []
        for (i, entry) in enumerate(nbest):
            output = collections.OrderedDict()
            output["text"] = entry.text
            output["probability"] = probs[i]
            output["start_logit"] = entry.start_logit
            output["end_logit"] = entry.end_logit
            nbest_json.append(output)

        if not version_2_with_negative:
            all_predictions[example.qas_id] = nbest_json[0]["text"]
        elif best_non_null_entry is None:
            # only the null answer is left (Google fails here): unanswerable, by any margin
            scores_diff_json[example.qas_id] = math.inf
            all_predictions[example.qas_id] = ""
        else:
            # predict "" iff the null score minus the best non-null score exceeds the threshold
            score_diff = score_null - best_non_null_entry.start_logit - best_non_null_entry.end_logit
            scores_diff_json[example.qas_id] = score_diff
            if score_diff > null_score_diff_threshold:
                all_predictions[example.qas_id] = ""
            else:
                all_predictions[example.qas_id] = best_non_null_entry.text
        all_nbest_json[example.qas_id] = nbest_json

    for path, obj in ((output_prediction_file, all_predictions), (output_nbest_file, all_nbest_json),
                      (output_null_log_odds_file, scores_diff_json if version_2_with_negative else None)):
        if path is not None and obj is not None:
            with atomic_write(path, "w") as writer:
                writer.write(json.dumps(obj, indent=4) + "\n")
    return all_predictions, all_nbest_json, scores_diff_json


def _strip_spaces(text):
    """text without its spaces, and the map from positions in it to positions in text."""
    ns_chars = []
    ns_to_s_map = collections.OrderedDict()
    for (i, c) in enumerate(text):
        if c == " ":
            continue
        ns_to_s_map[len(ns_chars)] = i
        ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Project the predicted text (normalised pieces, e.g. "steve smith") onto the original words
    ("Steve Smith's") to get the original spelling of just the prediction ("Steve Smith").

    orig_text is basic-tokenized (lower-cased, accents stripped, punctuation split) as the
    pieces were; after removing spaces both sides have the same characters one to one, if the
    lengths agree, so pred_text's span in the tokenized text maps back to a span of orig_text.
    When any step fails, orig_text is returned whole.
    """
    tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    tok_text = " ".join(tokenizer.tokenize(orig_text))

    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            logger.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return orig_text
    end_position = start_position + len(pred_text) - 1

    (orig_ns_text, orig_ns_to_s_map) = _strip_spaces(orig_text)
    (tok_ns_text, tok_ns_to_s_map) = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logger.info("Length not equal after stripping spaces: '%s' vs '%s'", orig_ns_text, tok_ns_text)
        return orig_text

    # tokenized text position -> space-free position -> original text position
    tok_s_to_ns_map = {tok_index: i for (i, tok_index) in tok_ns_to_s_map.items()}

    def to_orig(position):
        """A position in tok_text -> the same character's position in orig_text, or None."""
        ns_position = tok_s_to_ns_map.get(position)
        return None if ns_position is None else orig_ns_to_s_map.get(ns_position)

    orig_start_position = to_orig(start_position)
    if orig_start_position is None:
        if verbose_logging:
            logger.info("Couldn't map start position")
        return orig_text
    orig_end_position = to_orig(end_position)
    if orig_end_position is None:
        if verbose_logging:
            logger.info("Couldn't map end position")
        return orig_text

    return orig_text[orig_start_position:(orig_end_position + 1)]


def _get_best_indexes(logits, n_best_size):
    """Positions of the n_best_size largest logits, largest first (ties: the lower position first)."""
    index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
    return [index for index, _ in index_and_score[:n_best_size]]


def _compute_softmax(scores):
    """softmax(scores) as Python floats: exp(s - max) / sum exp(s - max)."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total_sum = 0.0
    for x in exp_scores:
        total_sum += x               # summed left to right, as Google does, for identical probabilities
    return [x / total_sum for x in exp_scores]
