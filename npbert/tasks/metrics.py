"""Metrics of the fine-tuning tasks, with the formulas scikit-learn, scipy and seqeval use.

    accuracy          mean(pred == label)
    f1                2 P R / (P + R) of the positive class (binary) or averaged over the classes (macro)
    matthews_corrcoef (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)), its multi-class form
    pearson           cov(x, y) / (std x std y)
    spearman          pearson of the ranks (ties get their average rank)
    entity scores     seqeval (default mode, BIO/IOB2): an entity is a maximal B-X I-X ... run;
                      precision = correct entities / predicted, recall = correct / true
"""
import numpy as np


def accuracy(preds, labels):
    preds, labels = np.asarray(preds), np.asarray(labels)
    return float((preds == labels).mean()) if labels.size else float("nan")


def f1_score(preds, labels, average="binary", pos_label=1):
    preds, labels = np.asarray(preds), np.asarray(labels)
    classes = [pos_label] if average == "binary" else sorted(set(labels.tolist()) | set(preds.tolist()))
    scores = []
    for c in classes:
        tp = np.sum((preds == c) & (labels == c))
        fp = np.sum((preds == c) & (labels != c))
        fn = np.sum((preds != c) & (labels == c))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def matthews_corrcoef(preds, labels):
    """The multi-class MCC (Gorodkin 2004), as scikit-learn: from the confusion matrix C,
    (c s - sum_k p_k t_k) / sqrt((s^2 - sum p_k^2)(s^2 - sum t_k^2))."""
    preds, labels = np.asarray(preds), np.asarray(labels)
    classes = sorted(set(labels.tolist()) | set(preds.tolist()))
    index = {c: i for i, c in enumerate(classes)}
    C = np.zeros((len(classes), len(classes)))
    for p, t in zip(preds.tolist(), labels.tolist()):
        C[index[t], index[p]] += 1
    t_sum, p_sum = C.sum(axis=1), C.sum(axis=0)
    c, s = np.trace(C), C.sum()
    denom = np.sqrt((s * s - p_sum @ p_sum) * (s * s - t_sum @ t_sum))
    return 0.0 if denom == 0 else float((c * s - t_sum @ p_sum) / denom)


def pearsonr(x, y):
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    xc, yc = x - x.mean(), y - y.mean()
    denom = np.sqrt((xc @ xc) * (yc @ yc))
    return float(xc @ yc / denom) if denom > 0 else float("nan")


def _ranks(x):
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):                       # ties: the average rank
        tied = x == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def spearmanr(x, y):
    return pearsonr(_ranks(x), _ranks(y))


def get_entities(tags):
    """[(type, start, end)] of the entities in one BIO tag sequence, as seqeval's default mode:
    an entity starts at B-X, or at I-X after O or another type, and runs while I-X follows."""
    entities, current = [], None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, kind = tag.partition("-") if tag != "O" else ("O", "", "")
        starts = prefix == "B" or (prefix == "I" and (current is None or current[0] != kind))
        ends = current is not None and (prefix in ("O", "B") or starts or kind != current[0])
        if ends:
            entities.append((current[0], current[1], i - 1))
            current = None
        if starts:
            current = (kind, i)
    return entities


def entity_scores(true_sequences, pred_sequences):
    """precision, recall, f1 (micro over entities) and token accuracy, as seqeval's
    precision_score / recall_score / f1_score / accuracy_score."""
    true_ents, pred_ents = set(), set()
    right = total = 0
    for k, (t, p) in enumerate(zip(true_sequences, pred_sequences)):
        if len(t) != len(p):
            raise ValueError(f"sequence {k}: {len(t)} true tags, {len(p)} predicted")
        true_ents |= {(k,) + e for e in get_entities(t)}
        pred_ents |= {(k,) + e for e in get_entities(p)}
        right += sum(a == b for a, b in zip(t, p))
        total += len(t)
    correct = len(true_ents & pred_ents)
    precision = correct / len(pred_ents) if pred_ents else 0.0
    recall = correct / len(true_ents) if true_ents else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "accuracy": right / total if total else float("nan")}
