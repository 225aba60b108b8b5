"""The official SQuAD metrics (evaluate-v1.1.py and evaluate-v2.0.py of the SQuAD site), read along.

Both compare a predicted answer with each gold answer after `normalize_answer` (lower case, no
punctuation, no articles a/an/the, single spaces) and keep the best over the gold answers:

    exact = 1 if normalize(pred) == normalize(gold) else 0
    f1    = 2 P R / (P + R),  P = common / len(pred tokens),  R = common / len(gold tokens)
            (common = size of the multiset intersection of the two token lists)

and report 100 * the mean over questions.  v2.0 adds unanswerable questions (no gold answer;
the gold is then "" and only the prediction "" scores 1), the split HasAns_* / NoAns_*, and,
given each question's no-answer probability (`na_probs`), the best threshold: predicting "" for
every question whose probability exceeds it gives `best_exact` / `best_f1`.

    squad_evaluate(dataset, predictions, na_probs=None, version_2_with_negative=None) -> dict

v1.1 gives {"exact_match", "f1"} (a question without a prediction scores 0); v2.0 gives
{"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1",
"NoAns_total"} (+ "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh" with na_probs);
as the v2.0 script, a question without a prediction is left out, with a warning.
"""
import collections
import logging
import re
import string

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace (both official scripts)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def get_tokens(s):
    return normalize_answer(s).split() if s else []


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    """v2.0's token F1: when either side has no tokens, 1 if both have none, else 0."""
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def _f1_v1(prediction, ground_truth):
    """v1.1's token F1 (no special case for empty answers: no common token gives 0)."""
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _questions(dataset):
    """(id, gold answer texts) of every question of a SQuAD "data" list (or of the whole file's dict)."""
    if isinstance(dataset, dict):
        if "data" not in dataset:
            raise ValueError('squad_evaluate: dataset must be the SQuAD file\'s "data" list or the whole file')
        dataset = dataset["data"]
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                yield qa["id"], [a["text"] for a in qa.get("answers", [])]


def _evaluate_v1(dataset, predictions):
    f1 = exact_match = total = 0
    for qid, ground_truths in _questions(dataset):
        total += 1
        if qid not in predictions:
            logger.warning("Unanswered question %s will receive score 0.", qid)
            continue
        prediction = predictions[qid]
        exact_match += max(float(normalize_answer(prediction) == normalize_answer(gt)) for gt in ground_truths)
        f1 += max(_f1_v1(prediction, gt) for gt in ground_truths)
    if total == 0:
        raise ValueError("squad_evaluate: the dataset has no questions")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def get_raw_scores(dataset, preds):
    """Per question, the best exact / F1 over its gold answers ("" when it has none)."""
    exact_scores = {}
    f1_scores = {}
    for qid, answers in _questions(dataset):
        gold_answers = [a for a in answers if normalize_answer(a)]
        if not gold_answers:
            gold_answers = [""]          # unanswerable: the only correct prediction is ""
        if qid not in preds:
            logger.warning("Missing prediction for %s", qid)
            continue
        a_pred = preds[qid]
        exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
        f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    """A question whose no-answer probability exceeds the threshold counts as predicted "":
    score 1 if it is unanswerable, else 0."""
    new_scores = {}
    for qid, s in scores.items():
        pred_na = na_probs[qid] > na_prob_thresh
        new_scores[qid] = float(not qid_to_has_ans[qid]) if pred_na else s
    return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    if qid_list is None:
        qid_list = list(exact_scores)
    total = len(qid_list)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
        ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
        ("total", total),
    ])


def merge_eval(main_eval, new_eval, prefix):
    for k in new_eval:
        main_eval[f"{prefix}_{k}"] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """The na-probability threshold that maximises the score.

    Start from "every question predicted the empty answer" (score = number of unanswerable questions) and walk
    the questions by increasing na probability, letting each in turn keep its prediction:
    an answerable one gains its score, an unanswerable one loses 1 if its prediction is not "".
    """
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for qid in qid_list:
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
    best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
    best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
    main_eval["best_exact"] = best_exact
    main_eval["best_exact_thresh"] = exact_thresh
    main_eval["best_f1"] = best_f1
    main_eval["best_f1_thresh"] = f1_thresh


def squad_evaluate(dataset, predictions, na_probs=None, version_2_with_negative=None, na_prob_thresh=1.0):
    """The official scores of `predictions` ({question id: answer text}) on `dataset`.

    version_2_with_negative: None decides from the data (v2.0 when any question has no answer or
    an `is_impossible` key).  na_probs: {question id: probability of no answer} (v2.0 only);
    na_prob_thresh: the official script's --na-prob-thresh (default 1.0: never overrides).
    """
    questions = list(_questions(dataset))
    if not questions:
        raise ValueError("squad_evaluate: the dataset has no questions")
    if version_2_with_negative is None:
        version_2_with_negative = any(not answers for _, answers in questions) or _has_is_impossible(dataset)
    if not version_2_with_negative:
        if na_probs is not None:
            raise ValueError("squad_evaluate: na_probs is for SQuAD v2.0")
        return dict(_evaluate_v1(dataset, predictions))

    if na_probs is None:
        na_probs_used = {k: 0.0 for k in predictions}
    else:
        missing = [qid for qid, _ in questions if qid in predictions and qid not in na_probs]
        if missing:
            raise ValueError(f"squad_evaluate: na_probs has no value for question {missing[0]}")
        na_probs_used = na_probs
    qid_to_has_ans = {qid: bool(answers) for qid, answers in questions}
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = get_raw_scores(dataset, predictions)
    if not exact_raw:
        raise ValueError("squad_evaluate: no question of the dataset has a prediction")
    exact_thresh = apply_no_ans_threshold(exact_raw, na_probs_used, qid_to_has_ans, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, na_probs_used, qid_to_has_ans, na_prob_thresh)
    out_eval = make_eval_dict(exact_thresh, f1_thresh)
    has_ans_qids = [k for k in has_ans_qids if k in exact_thresh]
    no_ans_qids = [k for k in no_ans_qids if k in exact_thresh]
    if has_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids), "HasAns")
    if no_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids), "NoAns")
    if na_probs is not None:
        find_all_best_thresh(out_eval, predictions, exact_raw, f1_raw, na_probs_used, qid_to_has_ans)
    return dict(out_eval)


def _has_is_impossible(dataset):
    data = dataset["data"] if isinstance(dataset, dict) else dataset
    return any("is_impossible" in qa for article in data for p in article["paragraphs"] for qa in p["qas"])
