"""SQuAD v1.1 / v2.0 for BERT: google-research/bert's `run_squad.py`, read along.

    W = words of a paragraph (split on whitespace), P = WordPiece tokens of it,
    T = max_seq_length, Q = max_query_length

The same functions as Google's script, with its names and in its order:

    SquadExample, InputFeatures            one question; one window of it
    read_squad_examples                    SQuAD JSON -> [SquadExample]   (context split into words)
    convert_examples_to_features           [SquadExample] -> [InputFeatures]: WordPiece, doc_stride windows
    _improve_answer_span                   the answer's pieces, tightened to match the answer text
    _check_is_max_context                  which window scores a piece (the one with most context)
    RawResult, write_predictions,          (start_logits, end_logits) of every window -> the answer text
    get_final_text, _get_best_indexes,     (in npbert/tasks/squad_predictions.py)
    _compute_softmax

One window ("feature") is

    [CLS] q_1 .. q_n [SEP] p_s .. p_{s+L-1} [SEP] [PAD] ...        segment_ids 0 for the first part, 1 after
    |<------ n + 2 ------>|<----- L ----->|                        L <= T - n - 3

and the windows of one paragraph start at 0, doc_stride, 2 doc_stride, ... until one reaches the
end.  For the same input and a tokenizer that tokenizes as Google's FullTokenizer does (npbert's
BertTokenizer does, for the same vocab and casing), every field of every feature equals Google's
(tests/tasks/test_squad_vs_google.py).  Differences, all for input Google rejects or mangles:
a training question with several answers uses the first (transformers' reader does the same,
Google raises); an `answer_start` that does not point at the answer text, a missing key, a file
with no questions raise a ValueError naming the file and the question id.  Read-along:
docs/finetuning_qa.md.
"""
import collections
import json
import logging
from dataclasses import dataclass
from typing import Dict, List, Optional

from npbert.tasks.files import read_text_file
# the second half of run_squad.py, importable from here under Google's names
from npbert.tasks.squad_predictions import (RawResult, _compute_softmax, _get_best_indexes,  # noqa: F401
                                            get_final_text, write_predictions)

logger = logging.getLogger(__name__)

FIRST_UNIQUE_ID = 1000000000     # Google's first feature id; each window counts up from it


@dataclass
class SquadExample:
    """One question on one paragraph.  `doc_tokens` are the paragraph's whitespace-separated words;
    `start_position` / `end_position` index them (training only; -1 for an unanswerable v2 question)."""
    qas_id: str
    question_text: str
    doc_tokens: List[str]
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclass
class InputFeatures:
    """One window of one example, padded to max_seq_length T.

    tokens: the pieces before padding; token_to_orig_map / token_is_max_context: keyed by the
    position in `tokens` of each paragraph piece -> its word index in example.doc_tokens / whether
    this window is the one that scores it.  input_ids, input_mask, segment_ids: length T.
    start_position / end_position: positions in `tokens` (training; 0 = [CLS] when the answer is
    not in this window or there is none)."""
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: List[str]
    token_to_orig_map: Dict[int, int]
    token_is_max_context: Dict[int, bool]
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: Optional[bool] = None


def _is_whitespace(c):
    """Google's word separators for the context: space, tab, CR, LF and U+202F (narrow no-break space)."""
    return c == " " or c == "\t" or c == "\r" or c == "\n" or ord(c) == 0x202F


def _load_squad_json(input_file):
    """The list under "data" of a SQuAD file, or a ValueError that says what is wrong with the file."""
    text = read_text_file(input_file)
    try:
        input_data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{input_file}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(input_data, dict) or not isinstance(input_data.get("data"), list):
        raise ValueError(f'{input_file}: not a SQuAD file (expected an object with a "data" list)')
    return input_data["data"]


def _require(obj, key, where):
    if not isinstance(obj, dict) or key not in obj:
        raise ValueError(f'{where}: missing key "{key}"')
    return obj[key]


def whitespace_tokenize(text):
    """Google's tokenization.whitespace_tokenize: strip, then split on runs of whitespace."""
    text = text.strip()
    return text.split() if text else []


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """Read a SQuAD JSON file into a list of SquadExample.

    The context is split into words at whitespace; `char_to_word_offset[i]` is the word that
    character i belongs to (a space belongs to the word before it), which maps the character offset
    `answer_start` to word positions.  With `is_training`, each question's (first) answer gives
    start_position / end_position in words; an answer whose words do not contain the answer text
    (it starts or ends inside a word, e.g. "Japan" in "Japanese") is skipped with a warning, as
    Google does.  With `version_2_with_negative`, training questions read `is_impossible`.
    """
    input_data = _load_squad_json(input_file)
    examples = []
    num_skipped = 0
    for a, entry in enumerate(input_data):
        for p, paragraph in enumerate(_require(entry, "paragraphs", f"{input_file}: data[{a}]")):
            where = f"{input_file}: data[{a}].paragraphs[{p}]"
            paragraph_text = _require(paragraph, "context", where)
            doc_tokens = []                  # (W,) the words
            char_to_word_offset = []         # (len(context),) word index of every character
            prev_is_whitespace = True
            for c in paragraph_text:
                if _is_whitespace(c):
                    prev_is_whitespace = True
                else:
                    if prev_is_whitespace:
                        doc_tokens.append(c)
                    else:
                        doc_tokens[-1] += c
                    prev_is_whitespace = False
                char_to_word_offset.append(len(doc_tokens) - 1)

            for q, qa in enumerate(_require(paragraph, "qas", where)):
                qas_id = _require(qa, "id", f"{where}.qas[{q}]")
                where_q = f"{input_file}: question {qas_id}"
                question_text = _require(qa, "question", where_q)
                start_position = None
                end_position = None
                orig_answer_text = None
                is_impossible = False
                if is_training:
                    if version_2_with_negative:
                        is_impossible = bool(_require(qa, "is_impossible", where_q))
                    if not is_impossible:
                        answers = _require(qa, "answers", where_q)
                        if not answers:
                            raise ValueError(f"{where_q}: a training question needs an answer (or "
                                             f"is_impossible with --version_2_with_negative)")
                        answer = answers[0]      # Google demands exactly one; transformers takes the first
                        orig_answer_text = _require(answer, "text", where_q + " answer 0")
                        answer_offset = _require(answer, "answer_start", where_q + " answer 0")
                        answer_length = len(orig_answer_text)
                        found = paragraph_text[answer_offset:answer_offset + answer_length] \
                            if isinstance(answer_offset, int) and answer_offset >= 0 else None
                        if answer_length == 0 or found != orig_answer_text:
                            raise ValueError(f"{where_q}: answer_start {answer_offset!r} does not point at the "
                                             f"answer text {orig_answer_text!r} (the context has {found!r} there)")
                        start_position = char_to_word_offset[answer_offset]
                        end_position = char_to_word_offset[answer_offset + answer_length - 1]
                        # The words must contain the answer: they do not when it starts or ends
                        # inside a word, which this whitespace split cannot represent.
                        actual_text = " ".join(doc_tokens[start_position:(end_position + 1)])
                        cleaned_answer_text = " ".join(whitespace_tokenize(orig_answer_text))
                        if actual_text.find(cleaned_answer_text) == -1:
                            logger.warning("Could not find answer: '%s' vs. '%s'", actual_text, cleaned_answer_text)
                            num_skipped += 1
                            continue
                    else:
                        start_position = -1
                        end_position = -1
                        orig_answer_text = ""

                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question_text, doc_tokens=doc_tokens,
                    orig_answer_text=orig_answer_text, start_position=start_position,
                    end_position=end_position, is_impossible=is_impossible))
    if not examples:
        raise ValueError(f"{input_file}: no questions" + (f" ({num_skipped} skipped)" if num_skipped else ""))
    if num_skipped:
        logger.warning("%s: skipped %d of %d training questions whose answer is not made of whole words",
                       input_file, num_skipped, num_skipped + len(examples))
    return examples


_DocSpan = collections.namedtuple("DocSpan", ["start", "length"])   # a window: pieces [start, start + length)


def convert_examples_to_features(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64,
                                 is_training=False, output_fn=None):
    """[SquadExample] -> [InputFeatures], one per window; `unique_id` counts from 1000000000.

    Args:
        tokenizer: anything with `tokenize(text)` and `convert_tokens_to_ids(tokens)` (npbert's
            BertTokenizer, Google's FullTokenizer).
        max_seq_length (T): the window's length with [CLS], the question, two [SEP] and padding.
        doc_stride: how far each window starts after the previous one, in pieces.
        max_query_length (Q): the question is cut to its first Q pieces.
        is_training: fill start_position / end_position (the examples must have been read so).
        output_fn: called with each feature as it is made (Google's callback), besides the return.
    """
    if max_seq_length < 4:
        raise ValueError(f"max_seq_length must leave room for [CLS] q [SEP] p [SEP], got {max_seq_length}")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be >= 1, got {doc_stride}")
    features = []
    unique_id = FIRST_UNIQUE_ID
    for (example_index, example) in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)
        if len(query_tokens) > max_query_length:
            query_tokens = query_tokens[0:max_query_length]

        # words -> pieces, both ways: word i is pieces [orig_to_tok_index[i], orig_to_tok_index[i + 1])
        tok_to_orig_index = []           # (P,) the word of every piece
        orig_to_tok_index = []           # (W,) the first piece of every word
        all_doc_tokens = []              # (P,) the paragraph's pieces
        for (i, token) in enumerate(example.doc_tokens):
            orig_to_tok_index.append(len(all_doc_tokens))
            sub_tokens = tokenizer.tokenize(token)
            for sub_token in sub_tokens:
                tok_to_orig_index.append(i)
                all_doc_tokens.append(sub_token)

        tok_start_position = None
        tok_end_position = None
        if is_training and example.is_impossible:
            tok_start_position = -1
            tok_end_position = -1
        if is_training and not example.is_impossible:
            if example.start_position is None:
                raise ValueError(f"question {example.qas_id}: no answer position; for is_training=True read the "
                                 f"file with read_squad_examples(..., is_training=True)")
            # the answer's words -> from the first piece of its first word to the last piece of its last word
            tok_start_position = orig_to_tok_index[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
            else:
                tok_end_position = len(all_doc_tokens) - 1
            (tok_start_position, tok_end_position) = _improve_answer_span(
                all_doc_tokens, tok_start_position, tok_end_position, tokenizer, example.orig_answer_text)

        # room for the paragraph in one window: T minus the question, [CLS] and the two [SEP]
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        if max_tokens_for_doc < 1:
            raise ValueError(f"question {example.qas_id}: max_seq_length={max_seq_length} leaves no room for the "
                             f"paragraph after a question of {len(query_tokens)} pieces; lower max_query_length")

        # The sliding windows: each is max_tokens_for_doc pieces (the last may be shorter) and
        # starts doc_stride after the previous one (or right after it, if the window is shorter).
        doc_spans = []
        start_offset = 0
        while start_offset < len(all_doc_tokens):
            length = len(all_doc_tokens) - start_offset
            if length > max_tokens_for_doc:
                length = max_tokens_for_doc
            doc_spans.append(_DocSpan(start=start_offset, length=length))
            if start_offset + length == len(all_doc_tokens):
                break
            start_offset += min(length, doc_stride)

        for (doc_span_index, doc_span) in enumerate(doc_spans):
            tokens = []
            token_to_orig_map = {}
            token_is_max_context = {}
            segment_ids = []
            tokens.append("[CLS]")
            segment_ids.append(0)
            for token in query_tokens:
                tokens.append(token)
                segment_ids.append(0)
            tokens.append("[SEP]")
            segment_ids.append(0)

            for i in range(doc_span.length):
                split_token_index = doc_span.start + i
                token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
                is_max_context = _check_is_max_context(doc_spans, doc_span_index, split_token_index)
                token_is_max_context[len(tokens)] = is_max_context
                tokens.append(all_doc_tokens[split_token_index])
                segment_ids.append(1)
            tokens.append("[SEP]")
            segment_ids.append(1)

            input_ids = list(tokenizer.convert_tokens_to_ids(tokens))
            input_mask = [1] * len(input_ids)      # 1 for real tokens, 0 for padding: only real ones are attended to

            # zero-pad up to the sequence length
            while len(input_ids) < max_seq_length:
                input_ids.append(0)
                input_mask.append(0)
                segment_ids.append(0)

            start_position = None
            end_position = None
            if is_training and not example.is_impossible:
                # A window that does not hold the whole answer is trained to point at [CLS] (0, 0).
                doc_start = doc_span.start
                doc_end = doc_span.start + doc_span.length - 1
                if tok_start_position >= doc_start and tok_end_position <= doc_end:
                    doc_offset = len(query_tokens) + 2                  # [CLS] question [SEP]
                    start_position = tok_start_position - doc_start + doc_offset
                    end_position = tok_end_position - doc_start + doc_offset
                else:
                    start_position = 0
                    end_position = 0
            if is_training and example.is_impossible:
                start_position = 0
                end_position = 0

            feature = InputFeatures(
                unique_id=unique_id, example_index=example_index, doc_span_index=doc_span_index,
                tokens=tokens, token_to_orig_map=token_to_orig_map, token_is_max_context=token_is_max_context,
                input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                start_position=start_position, end_position=end_position, is_impossible=example.is_impossible)
            features.append(feature)
            if output_fn is not None:
                output_fn(feature)
            unique_id += 1
    return features


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """The pieces [new_start, new_end] inside [input_start, input_end] whose text equals the
    tokenized answer, or the input span when none does.

    The answer was mapped to whole words; WordPiece may split a word so that the answer is a
    sub-span: answer "1895" in the word "(1895-1943)." whose pieces are "( 1895 - 1943 ) .".
    The search tries the earliest start first and, for each start, the latest end first.
    """
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            text_span = " ".join(doc_tokens[new_start:(new_end + 1)])
            if text_span == tok_answer_text:
                return (new_start, new_end)
    return (input_start, input_end)


def _check_is_max_context(doc_spans, cur_span_index, position):
    """Whether window `cur_span_index` is the one that scores the piece at `position`.

    With overlapping windows a piece is in several; the one chosen gives it the most context:
        score = min(pieces left of it, pieces right of it) + 0.01 * window length
    (the first window wins a tie).  E.g. "the man went to the store and bought a gallon of milk",
    windows "to the store and bought" and "and bought a gallon of": "bought" has context
    min(4, 0) in the first and min(1, 3) in the second, which scores it.
    """
    best_score = None
    best_span_index = None
    for (span_index, doc_span) in enumerate(doc_spans):
        end = doc_span.start + doc_span.length - 1
        if position < doc_span.start or position > end:
            continue
        num_left_context = position - doc_span.start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index
