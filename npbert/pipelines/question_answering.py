"""pipeline("question-answering"): the answer span of a question in a context, as transformers
4.x's QuestionAnsweringPipeline (its last release with it, 4.57) computes it.

    q = question tokens, C = max_seq_len - q - 3 context tokens per window, T = window length

1. Windows.  [CLS] question [SEP] context tokens [SEP], the context cut into windows of C
   tokens, consecutive windows sharing `doc_stride` tokens (transformers passes doc_stride to
   its tokenizer as the overlap; npbert/tasks/windows.py).  Defaults: max_seq_len =
   min(model_max_length, 384), doc_stride = min(max_seq_len // 2, 128).
2. Per window, BertForQuestionAnswering gives start and end logits (T,).  Positions that cannot
   answer (the question, [SEP]) get -10000, then each is a softmax over the window:
   p_start, p_end (T,).  The null score is p_start[0] * p_end[0] ([CLS]); the smallest over the
   windows is kept.  [CLS] is then set to 0.
3. Spans: score(s, e) = p_start[s] * p_end[e] for s <= e < s + max_answer_len; the
   2 top_k + 10 best of each window are kept.
4. Each span becomes characters of the context, widened to whole words (align_to_words: the
   first character of the start token's word to the last of the end token's word); answers of
   equal text (ignoring case) are merged, their scores added.
5. With handle_impossible_answer the null answer {"answer": "", "start": 0, "end": 0} with the
   null score competes; the top_k answers by score are returned: one dict when one is left,
   else a list.
"""
import numpy as np

from npbert.modeling import BertForQuestionAnswering
from npbert.pipelines.base import Pipeline
from npbert.tasks.windows import overflow_windows


def decode_spans(start, end, topk, max_answer_len, undesired_tokens):
    """The topk (start, end, score) with start <= end < start + max_answer_len.
    start, end: (1, T) probabilities; undesired_tokens: (1, T), 1 where a span may start or end."""
    outer = np.matmul(np.expand_dims(start, -1), np.expand_dims(end, 1))       # (1, T, T): p_s p_e
    candidates = np.tril(np.triu(outer), max_answer_len - 1)                   # e >= s, e - s < max_answer_len
    scores_flat = candidates.flatten()
    if topk == 1:
        idx_sort = [np.argmax(scores_flat)]
    elif len(scores_flat) < topk:
        idx_sort = np.argsort(-scores_flat)
    else:
        idx = np.argpartition(-scores_flat, topk)[0:topk]
        idx_sort = idx[np.argsort(-scores_flat[idx])]
    starts, ends = np.unravel_index(idx_sort, candidates.shape)[1:]
    # (as transformers: the allowed set is nonzero() of the (1, T) mask, whose row indices, all 0,
    # are in it too, so position 0 always counts as allowed)
    allowed = np.asarray(undesired_tokens.nonzero())
    keep = np.isin(starts, allowed) & np.isin(ends, allowed)
    starts, ends = starts[keep], ends[keep]
    return starts, ends, candidates[0, starts, ends]


def select_starts_ends(start, end, p_mask, attention_mask, min_null_score=1000000, top_k=1,
                       handle_impossible_answer=False, max_answer_len=15):
    """Window logits (1, T) -> (starts, ends, scores, min_null_score); p_mask (T,) is 1 where no
    answer may be (the question, [SEP], padding)."""
    undesired_tokens = np.abs(np.array(p_mask) - 1)                             # 1 = may answer
    if attention_mask is not None:
        undesired_tokens = undesired_tokens & attention_mask
    undesired_tokens_mask = undesired_tokens == 0.0
    start = np.where(undesired_tokens_mask, -10000.0, start)
    end = np.where(undesired_tokens_mask, -10000.0, end)
    start = np.exp(start - start.max(axis=-1, keepdims=True))
    start = start / start.sum()
    end = np.exp(end - end.max(axis=-1, keepdims=True))
    end = end / end.sum()
    if handle_impossible_answer:
        min_null_score = min(min_null_score, (start[0, 0] * end[0, 0]).item())
    start[0, 0] = end[0, 0] = 0.0                                               # [CLS] is no span
    starts, ends, scores = decode_spans(start, end, top_k, max_answer_len, undesired_tokens)
    return starts, ends, scores, min_null_score


class QuestionAnsweringPipeline(Pipeline):
    task = "question-answering"
    model_class = BertForQuestionAnswering
    token_outputs = ("start_logits", "end_logits")

    def _check_parameters(self, top_k=1, doc_stride=None, max_answer_len=15, max_seq_len=None,
                          max_question_len=64, handle_impossible_answer=False, align_to_words=True):
        if not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k parameter should be >= 1 (got {top_k!r})")
        if not isinstance(max_answer_len, int) or max_answer_len < 1:
            raise ValueError(f"max_answer_len parameter should be >= 1 (got {max_answer_len!r})")
        if max_seq_len is not None and not 4 <= max_seq_len <= self.model.config.max_position_embeddings:
            raise ValueError(f"max_seq_len must be in [4, {self.model.config.max_position_embeddings}] "
                             f"(max_position_embeddings), got {max_seq_len}")

    def __call__(self, *args, **kwargs):
        """pipe(question=..., context=...) (strings, or lists of them), pipe({"question", "context"}),
        pipe([{...}, ...]) or pipe(question, context)."""
        question, context = kwargs.pop("question", None), kwargs.pop("context", None)
        batch_size = kwargs.pop("batch_size", None)
        if args:
            if len(args) == 2 and all(isinstance(a, str) for a in args):
                inputs = [{"question": args[0], "context": args[1]}]
            elif len(args) == 1:
                inputs = args[0]
            else:
                raise ValueError("give question=..., context=..., or a dict / list of dicts with both")
        elif question is not None and context is not None:
            if isinstance(question, list) and isinstance(context, str):
                inputs = [{"question": q, "context": context} for q in question]
            elif isinstance(question, list) and isinstance(context, list):
                if len(question) != len(context):
                    raise ValueError("Questions and contexts don't have the same lengths")
                inputs = [{"question": q, "context": c} for q, c in zip(question, context)]
            elif isinstance(question, str) and isinstance(context, str):
                inputs = [{"question": question, "context": context}]
            else:
                raise ValueError("question and context must be strings or lists of strings")
        else:
            raise ValueError("question-answering needs a question and a context")
        if isinstance(inputs, dict):
            inputs = [inputs]
        for item in inputs:
            if not isinstance(item, dict):
                raise ValueError(f"{item!r:.60} must be a dict with question and context")
            for k in ("question", "context"):
                if k not in item:
                    raise KeyError("You need to provide a dictionary with keys {question:..., context:...}")
                if item[k] is None or not isinstance(item[k], str):
                    raise ValueError(f"`{k}` must be a string, got {type(item[k]).__name__}")
                if not item[k]:
                    raise ValueError(f"`{k}` cannot be empty")
        params = self._params(kwargs)
        results = self._run_examples(inputs, batch_size, params)
        return results[0] if len(results) == 1 else results

    def windows(self, question, context, max_seq_len=None, doc_stride=None):
        """The windows of one example: [{"input_ids", "token_type_ids", "attention_mask": (1, T),
        "p_mask": (T,), "offsets": [(start, end)] * T, "word_ids": [word or None] * T}], offsets
        and words those of the context (None outside it)."""
        tok = self.tokenizer
        if max_seq_len is None:
            max_seq_len = min(self.max_length, 384)
        if doc_stride is None:
            doc_stride = min(max_seq_len // 2, 128)
        if doc_stride > max_seq_len:
            raise ValueError(f"`doc_stride` ({doc_stride}) is larger than `max_seq_len` ({max_seq_len})")
        q_ids = tok(question, add_special_tokens=False, verbose=False)["input_ids"]
        ctx = tok(context, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        ctx_ids, ctx_offsets, ctx_words = ctx["input_ids"], [tuple(o) for o in ctx["offset_mapping"]], ctx.word_ids()
        room = max_seq_len - len(q_ids) - 3                                   # C
        if room < 1:
            raise ValueError(f"the question is {len(q_ids)} tokens: with [CLS] and two [SEP] it leaves no room for "
                             f"the context in max_seq_len={max_seq_len}")
        if doc_stride >= room:
            raise ValueError(f"doc_stride={doc_stride} must be smaller than the {room} context tokens of a window "
                             f"(max_seq_len {max_seq_len} - question {len(q_ids)} - 3)")
        out = []
        for start, stop in overflow_windows(len(ctx_ids), room, doc_stride):
            n_ctx = stop - start
            input_ids = [tok.cls_token_id] + q_ids + [tok.sep_token_id] + ctx_ids[start:stop] + [tok.sep_token_id]
            head = len(q_ids) + 2
            p_mask = [0] + [1] * (head - 1) + [0] * n_ctx + [1]               # [CLS] stays allowed
            out.append({"input_ids": np.asarray([input_ids], dtype=np.int64),
                        "token_type_ids": np.asarray([[0] * head + [1] * (n_ctx + 1)], dtype=np.int64),
                        "attention_mask": np.ones((1, len(input_ids)), dtype=np.int64),
                        "p_mask": p_mask,
                        "offsets": [(0, 0)] * head + ctx_offsets[start:stop] + [(0, 0)],
                        "word_ids": [None] * head + ctx_words[start:stop] + [None]})
        return out

    @staticmethod
    def get_indices(window, s, e, align_to_words=True):
        """Characters [start, end) of the context for tokens s..e: whole words (the words' tokens
        inside this window), or the tokens' own offsets for a token outside the context."""
        offsets, words = window["offsets"], window["word_ids"]
        if align_to_words and words[s] is not None and words[e] is not None:
            first = next(i for i, w in enumerate(words) if w == words[s])
            last = max(i for i, w in enumerate(words) if w == words[e])
            return offsets[first][0], offsets[last][1]
        return offsets[s][0], offsets[e][1]

    def _preprocess(self, example, top_k=1, doc_stride=None, max_answer_len=15, max_seq_len=None,
                    max_question_len=64, handle_impossible_answer=False, align_to_words=True):
        windows = self.windows(example["question"], example["context"], max_seq_len, doc_stride)
        return [self._sequence(w) for w in windows], (example["context"], windows)

    def _postprocess(self, prepared, outputs, top_k=1, doc_stride=None, max_answer_len=15, max_seq_len=None,
                     max_question_len=64, handle_impossible_answer=False, align_to_words=True):
        context, windows = prepared
        min_null_score = 1000000
        answers = []
        for window, out in zip(windows, outputs):
            pre_topk = top_k * 2 + 10 if align_to_words else top_k
            starts, ends, scores, min_null_score = select_starts_ends(
                out["start_logits"][None], out["end_logits"][None], window["p_mask"], window["attention_mask"],
                min_null_score, pre_topk, handle_impossible_answer, max_answer_len)           # logits (1, T)
            for s, e, score in zip(starts, ends, scores):
                start, end = self.get_indices(window, int(s), int(e), align_to_words)
                text = context[start:end]
                same = next((a for a in answers if a["answer"].lower() == text.lower()), None)
                if same is not None:
                    same["score"] += score.item()
                else:
                    answers.append({"score": score.item(), "start": start, "end": end, "answer": text})
        if handle_impossible_answer:
            answers.append({"score": min_null_score, "start": 0, "end": 0, "answer": ""})
        answers = sorted(answers, key=lambda x: x["score"], reverse=True)[:top_k]
        return answers[0] if len(answers) == 1 else answers
