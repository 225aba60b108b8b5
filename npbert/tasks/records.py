"""The prediction records of `npbert finetune --do_predict` and `npbert predict`: one JSON object
a line (predictions.jsonl), each naming its example and giving the label with its scores.

    classification   {"id", "label", "score", "scores": [{"label", "score"}, ...]}   the top_k, best first;
                     multi-label: "label" lists the labels scored above 0.5; regression: "label" is the value
    token tags       {"id", "text", "words", "tags", "scores", "entities": [{"entity_group", "score", "word",
                      "start", "end", "first_word", "last_word"}]}     start/end: characters of "text"
    question answer  {"id", "label" (the answer; "" for no answer), "score", "start", "end",
                      "answers": [{"answer", "score", "start", "end"}, ...]}     characters of the context
    multiple choice  {"id", "label" (the choice's index), "choice", "score", "scores": [per choice]}

Scores are probabilities: softmax over the labels (single-label), sigmoid per label
(multi-label), the raw value for regression, as transformers' text-classification pipeline.
"""
import json

import numpy as np

from npbert.ops.softmax import softmax_forward

TOP_K = 5


def softmax(logits):
    """softmax over the last axis, in float64 (npbert.ops.softmax)."""
    return softmax_forward(np.asarray(logits, dtype=np.float64))[0]


def example_id(row, line, ids=("id", "idx", "guid", "qid")):
    """The example's own id (an id / idx / guid column) or, without one, its line in the file."""
    for key in ids:
        if isinstance(row, dict) and row.get(key) not in (None, ""):
            return row[key]
    return line


def classification_record(ex_id, logits, id2label, problem_type, top_k=TOP_K):
    """One text's record from its logits (K,)."""
    logits = np.asarray(logits, dtype=np.float64).reshape(-1)
    if problem_type == "regression":
        value = float(logits[0])
        return {"id": ex_id, "label": value, "score": value}
    if problem_type == "multi_label_classification" or len(logits) == 1:
        probs = 1.0 / (1.0 + np.exp(-logits))
        chosen = [id2label[k] for k in np.flatnonzero(probs > 0.5)]
        label, score = (chosen, float(probs.max())) if len(logits) > 1 else (
            id2label[0] if probs[0] > 0.5 else None, float(probs[0]))
    else:
        probs = softmax(logits)
        best = int(np.argmax(probs))
        label, score = id2label[best], float(probs[best])
    order = np.argsort(-probs, kind="stable")[:top_k]
    return {"id": ex_id, "label": label, "score": score,
            "scores": [{"label": id2label[int(k)], "score": float(probs[k])} for k in order]}


def bio_spans(tags):
    """[(first, last)] index ranges of the entries that group into one entity, as transformers'
    token-classification pipeline groups them: an entry joins the one before when both have the
    same type and it is not a B- tag ("O" entries group too; callers drop them)."""
    spans = []
    for i, tag in enumerate(tags):
        bi, kind = tag_parts(tag)
        if spans and kind == tag_parts(tags[spans[-1][1]])[1] and bi != "B":
            spans[-1] = (spans[-1][0], i)
        else:
            spans.append((i, i))
    return spans


def tag_parts(tag):
    """("B" or "I", type): B-X and I-X by their prefix; a tag without one continues (I)."""
    if tag.startswith("B-"):
        return "B", tag[2:]
    if tag.startswith("I-"):
        return "I", tag[2:]
    return "I", tag


def token_record(ex_id, words, tags, scores):
    """One sentence's record: its words, a tag and a score per word, and the entities grouped
    from them with their character spans in " ".join(words)."""
    starts, position = [], 0
    for w in words:
        starts.append(position)
        position += len(w) + 1
    entities = []
    for first, last in bio_spans(tags):
        kind = tag_parts(tags[first])[1]
        if kind == "O":
            continue
        entities.append({"entity_group": kind, "score": float(np.mean(scores[first:last + 1])),
                         "word": " ".join(words[first:last + 1]), "start": starts[first],
                         "end": starts[last] + len(words[last]), "first_word": first, "last_word": last})
    return {"id": ex_id, "text": " ".join(words), "words": list(words), "tags": list(tags),
            "scores": [round(float(s), 6) for s in scores], "entities": entities}


def write_records(f, records):
    """JSON lines to an open text file."""
    for record in records:
        f.write(json.dumps(record, ensure_ascii=False, default=_plain) + "\n")


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
