"""Overlapping windows over a sequence longer than the model takes (NER sentences, QA contexts).

    n = tokens to cover, M = tokens per window, S = tokens two consecutive windows share

overflow_windows(n, M, S): the windows transformers' fast tokenizers cut with
return_overflowing_tokens=True, stride=S (the pipelines' `stride`, run_qa.py's `doc_stride`):
they start at 0, M - S, 2 (M - S), ... and the last one is the first that reaches the end:

    n = 10, M = 4, S = 1:   [0, 4)  [3, 7)  [6, 10)

(Google's run_squad.py counts its doc_stride the other way, as the step M - S between starts;
npbert/tasks/squad.py keeps Google's meaning.)

max_context_window(spans, i): of the windows holding token i, the one where i has the most
context on its shorter side (Google's _check_is_max_context: min(left, right) + 0.01 M), so
that every token is read from the window that sees most around it.
"""


def overflow_windows(n, size, overlap=0):
    """[(start, stop)] covering range(n) with windows of `size` tokens sharing `overlap`; one
    (possibly empty) window when n <= size."""
    if size < 1:
        raise ValueError(f"a window must hold at least one token, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"stride (tokens shared by consecutive windows) must be in [0, {size}), the window "
                         f"size; got {overlap}")
    spans, start = [], 0
    while True:
        stop = min(start + size, n)
        spans.append((start, stop))
        if stop >= n:
            return spans
        start += size - overlap


def max_context_window(spans, i):
    """Index of the span in `spans` ((start, stop) pairs) where position i has the most context."""
    best, best_score = None, None
    for k, (start, stop) in enumerate(spans):
        if not start <= i < stop:
            continue
        score = min(i - start, stop - 1 - i) + 0.01 * (stop - start)
        if best_score is None or score > best_score:
            best, best_score = k, score
    if best is None:
        raise ValueError(f"position {i} is in none of the windows {spans}")
    return best
