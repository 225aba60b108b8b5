"""`npbert predict`: run a fine-tuned model over a file and write one JSON line per example.

    npbert predict --model runs/tnews --input test.json --output predictions.jsonl

The task is the one the checkpoint was trained for (its config.json's `architectures`; --task
to say it), and the answers are those of npbert.pipeline for that task (transformers'
pipelines' numbers).  Input, by its extension (or --input_format):
  .csv .tsv .json .jsonl   a table, the columns found as `npbert finetune` finds them (text:
                           sentence, text, sentence1, question, content, title; the pair's column;
                           question + context for QA; id, idx or guid as the example's id)
  .json holding "data"     SQuAD v1.1 / v2.0 (question answering)
  .conll                   CoNLL words, one a line, a blank line between sentences (NER: a tag per word)
  anything else            plain text, one example a line (for NER: the line's entities)
Output, one record a line (npbert/tasks/records.py):
  text-classification   {"id", "label", "score", "scores": the top_k labels}
  token-classification  {"id", "text", "entities": [{"entity_group", "score", "word", "start", "end"}]}
                        (CoNLL input: also "words", "tags", "scores" per word)
  question-answering    {"id", "label": the answer ("" for none), "score", "start", "end", "answers"}
  multiple-choice       {"id", "label": the choice's index, "choice", "score", "scores"}
  fill-mask             {"id", "text", "label": the best token, "score", "scores": top_k candidates}
"""
import json
import os
import sys
import time

import numpy as np

import npbert
from npbert.cli.common import (CliError, UsageError, add_task_argument, load_checkpoint, load_tokenizer, positive_int,
                               read_model_config, resolve_max_seq_length)
from npbert.cli.outputs import refuse_overwriting_inputs
from npbert.io._atomic import atomic_write
from npbert.pipelines.architectures import check_architectures
from npbert.task_names import ARCHITECTURE_TASKS
from npbert.tasks.files import read_text_file
from npbert.tasks.multiple_choice import encode_multiple_choice, read_multiple_choice
from npbert.tasks.readers import find_columns, read_conll, read_table
from npbert.tasks.records import classification_record, example_id, softmax, token_record, write_records
from npbert.tasks.squad import _load_squad_json
from npbert.training.progress import format_duration

# The tasks predict runs (their names and aliases: npbert/task_names.py, as every command).
TASKS = ("text-classification", "token-classification", "question-answering", "multiple-choice", "fill-mask")
FORMATS = ("auto", "table", "squad", "conll", "text")


def add_parser(commands):
    p = commands.add_parser("predict", help="predict with a fine-tuned model over a file (JSON lines out)",
                            description=__doc__.split("\n", 1)[1])
    p.add_argument("--model", required=True, metavar="DIR", help="a fine-tuned checkpoint directory (npbert finetune's "
                                                                  "--output_dir)")
    p.add_argument("--input", required=True, metavar="FILE", help="the examples (formats above)")
    p.add_argument("--output", required=True, metavar="FILE", help="the JSON lines to write")
    add_task_argument(p, "predict", TASKS, help="the task (default: the one the checkpoint's config.json names)")
    p.add_argument("--input_format", choices=FORMATS, default="auto", help="how to read --input (auto: by extension)")
    p.add_argument("--top_k", type=positive_int, default=5, help="labels, answers or tokens kept per example")
    p.add_argument("--max_seq_length", type=positive_int, default=None,
                   help="tokens per sequence or window (default: the model's limit; 384 for question answering)")
    p.add_argument("--text_column_name", help="the column holding the text (default: found by name)")
    p.add_argument("--text_pair_column_name", help="the column holding the second text of a pair")
    p.add_argument("--ignore_architectures", action="store_true",
                   help="run a head trained for another task than --task (config.json's architectures), "
                        "which is otherwise refused")
    ner = p.add_argument_group("token classification")
    ner.add_argument("--aggregation_strategy", choices=("simple", "first", "average", "max"), default="first",
                     help="how tokens become words and entities (transformers' names)")
    ner.add_argument("--stride", type=int, default=None,
                     help="a text longer than a window is read in windows sharing this many tokens "
                          "(default: half a window)")
    qa = p.add_argument_group("question answering")
    qa.add_argument("--doc_stride", type=int, default=None,
                    help="tokens two windows of a long context share (default: min(max_seq_length // 2, 128))")
    qa.add_argument("--max_answer_len", type=positive_int, default=15, help="the longest answer, in tokens")
    qa.add_argument("--handle_impossible_answer", action="store_true",
                    help='let "no answer" ("") compete (SQuAD v2.0; on by default for a v2.0 file)')
    p.set_defaults(run=run)


# ---- reading ------------------------------------------------------------------------------------
def input_format(path, given):
    if given != "auto":
        return given
    ext = os.path.splitext(path)[1].lower()
    if ext in (".csv", ".tsv", ".jsonl"):
        return "table"
    if ext == ".json":
        head = read_text_file(path).lstrip()[:1]
        if head == "{":
            try:
                if "data" in json.loads(read_text_file(path)):
                    return "squad"
            except json.JSONDecodeError:
                pass
        return "table"
    if ext in (".conll", ".iob", ".bio"):
        return "conll"
    return "text"


def read_lines(path):
    return [(n, line.strip()) for n, line in enumerate(read_text_file(path).splitlines(), 1) if line.strip()]


def read_examples(args, task, fmt):
    """[(id, example)] for the task: a text, a {"text", "text_pair"} pair, a list of words, a
    {"question", "context"} dict, or a multiple-choice example."""
    path = args.input
    if task == "multiple-choice":
        return [(e["id"], e) for e in read_multiple_choice(path, require_labels=False)]
    if task == "question-answering":
        if fmt == "squad":
            out = []
            for article in _load_squad_json(path):
                for paragraph in article.get("paragraphs", []):
                    for qa in paragraph.get("qas", []):
                        out.append((qa.get("id"), {"question": qa["question"], "context": paragraph["context"]}))
            return out
        if fmt != "table":
            raise UsageError(f"--input {path}: question answering reads a SQuAD .json or a table with question and "
                             "context columns")
        rows = read_table(path)
        for line, row in rows:
            for k in ("question", "context"):
                if k not in row or row[k] is None:
                    raise CliError(f"{path}:{line}: no {k!r} (question answering needs question and context columns)")
                check_text(row[k], k, path, line)
        return [(example_id(row, line), {"question": row["question"], "context": row["context"]}) for line, row in rows]
    if fmt == "conll":
        if task != "token-classification":
            raise UsageError(f"--input {path}: a CoNLL file is for token classification, not {task}")
        return [(line, words) for line, words, _ in read_conll(path, with_tags=False)]
    if fmt == "squad":
        raise UsageError(f"--input {path}: a SQuAD file is for question answering, not {task}")
    if fmt == "text":
        return read_lines(path)
    rows = read_table(path)
    text_col, pair_col, _ = find_columns(path, rows, args.text_column_name, args.text_pair_column_name, None,
                                         need_label=False)
    out = []
    for line, row in rows:
        for col in (text_col, pair_col) if pair_col else (text_col,):
            check_text(row[col], col, path, line)
        text = {"text": row[text_col], "text_pair": row[pair_col]} if pair_col else row[text_col]
        out.append((example_id(row, line), text))
    return out


def check_text(value, column, path, line):
    """A text field must be a non-empty string: a number, a list or null is named as such."""
    if not isinstance(value, str):
        shown = "null" if value is None else f"{type(value).__name__} {value!r}"[:80]
        raise CliError(f"{path}:{line}: the text ({column}) must be a string, got {shown}; quote it in the file")
    if not value.strip():
        raise CliError(f"{path}:{line}: the text ({column}) is empty")


# ---- predicting ---------------------------------------------------------------------------------
class Progress:
    """`predict: 120/1000 examples | 3.2 examples/s | ETA 4m35s` on stderr: rewritten in place on a
    terminal, else a line every 30 seconds; nothing for a run shorter than that."""

    def __init__(self, total, stream=None):
        self.total, self.stream, self.t0, self.last = total, stream or sys.stderr, time.perf_counter(), 0.0
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, done):
        now = time.perf_counter() - self.t0
        if now - self.last < (1.0 if self.tty else 30.0) and done < self.total:
            return
        if done == self.total and self.last == 0.0:
            return
        self.last = now
        rate = done / now if now > 0 else 0.0
        eta = format_duration((self.total - done) / rate) if rate > 0 else "?"
        line = f"predict: {done}/{self.total} examples | {rate:.2f} examples/s | ETA {eta}"
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        if self.tty and done == self.total:
            self.stream.write("\n")
        self.stream.flush()


class Truncations:
    """The examples cut to --max_seq_length (text classification, fill-mask): counted while
    predicting and reported once at the end, as run_glue.py truncates but says nothing.  Token
    classification and question answering read a long text in windows instead, and lose nothing."""

    def __init__(self, tokenizer, max_length):
        self.tokenizer, self.max_length = tokenizer, max_length
        self.examples, self.dropped, self.longest = [], 0, 0

    def check(self, ex_id, text, text_pair=None):
        # a WordPiece token covers at least one character (or is [UNK] for a whole word), so a text of
        # fewer characters than the budget cannot be cut: only longer ones are tokenized twice
        if len(text) + len(text_pair or "") + 3 <= self.max_length:
            return
        n = len(self.tokenizer(text, text_pair)["input_ids"])
        if n > self.max_length:
            self.examples.append(ex_id)
            self.dropped += n - self.max_length
            self.longest = max(self.longest, n)

    def report(self, total, stream=None):
        if not self.examples:
            return
        shown = ", ".join(map(str, self.examples[:5])) + (" ..." if len(self.examples) > 5 else "")
        print(f"note: {len(self.examples)} of {total} examples were longer than --max_seq_length "
              f"{self.max_length} tokens and were cut to it ({self.dropped} tokens dropped in all; the longest had "
              f"{self.longest}; examples {shown}): their predictions read only {self.max_length} tokens of them "
              "(token classification and question answering read long texts in windows)", file=stream or sys.stderr)


def record_maker(args, task, model, tokenizer, fmt, truncations=None):
    """A function (id, example) -> record for the task; `truncations` (a Truncations) counts
    the texts cut to --max_seq_length."""
    top_k = args.top_k
    if task == "text-classification":
        pipe = npbert.pipeline(task, model=model, tokenizer=tokenizer)
        config = model.config

        def classify(ex_id, text):
            first, second = (text["text"], text.get("text_pair")) if isinstance(text, dict) else (text, None)
            if truncations is not None:
                truncations.check(ex_id, first, second)
            enc = pipe._encode(first, second, truncation=True, max_length=args.max_seq_length)
            logits = pipe._forward(enc).logits[0]
            return classification_record(ex_id, logits, config.id2label, config.problem_type, top_k)
        return classify
    if task == "token-classification":
        pipe = npbert.pipeline(task, model=model, tokenizer=tokenizer)
        stride = args.stride if args.stride is not None else (pipe.max_length - 2) // 2

        def tag(ex_id, example):
            if isinstance(example, list):                      # CoNLL words: a tag per word
                tags, scores = pipe.word_tags(example, stride=stride)
                return token_record(ex_id, example, tags, scores)
            entities = pipe(example, aggregation_strategy=args.aggregation_strategy, stride=stride)
            return {"id": ex_id, "text": example,
                    "entities": [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in e.items()}
                                 for e in entities]}
        return tag
    if task == "question-answering":
        pipe = npbert.pipeline(task, model=model, tokenizer=tokenizer)
        impossible = args.handle_impossible_answer or (fmt == "squad" and _squad_v2(args.input))

        def answer(ex_id, example):
            found = pipe(example, top_k=top_k, handle_impossible_answer=impossible, max_answer_len=args.max_answer_len,
                         max_seq_len=args.max_seq_length, doc_stride=args.doc_stride)
            found = found if isinstance(found, list) else [found]
            best = found[0]
            return {"id": ex_id, "label": best["answer"], "score": best["score"], "start": best["start"],
                    "end": best["end"], "answers": found}
        return answer
    if task == "multiple-choice":

        def choose(ex_id, example):
            enc = encode_multiple_choice(example, tokenizer, args.max_seq_length)
            with npbert.no_grad():
                logits = model(**{k: enc[k][None] for k in ("input_ids", "attention_mask", "token_type_ids")}).logits[0]
            probs = softmax(logits)
            best = int(np.argmax(probs))
            return {"id": ex_id, "label": best, "choice": example["choices"][best], "score": float(probs[best]),
                    "scores": [round(float(p), 6) for p in probs]}
        return choose
    pipe = npbert.pipeline("fill-mask", model=model, tokenizer=tokenizer)

    def fill(ex_id, text):
        text = text["text"] if isinstance(text, dict) else text
        if truncations is not None:
            truncations.check(ex_id, text)
        found = pipe(text, top_k=top_k, tokenizer_kwargs={"truncation": True, "max_length": args.max_seq_length})
        groups = found if found and isinstance(found[0], list) else [found]
        return {"id": ex_id, "text": text, "label": [g[0]["token_str"] for g in groups] if len(groups) > 1
                else groups[0][0]["token_str"], "score": groups[0][0]["score"],
                "scores": found}
    return fill


def _squad_v2(path):
    return any(qa.get("is_impossible") for a in _load_squad_json(path) for p in a.get("paragraphs", [])
               for qa in p.get("qas", []))


def choose_task(args, config):
    if args.task:
        return args.task                           # (canonical: add_task_argument)
    for name in getattr(config, "architectures", None) or ():
        if ARCHITECTURE_TASKS.get(name) in TASKS:
            return ARCHITECTURE_TASKS[name]
    raise UsageError(f"--model {args.model}: its config.json names no fine-tuned task (architectures "
                     f"{getattr(config, 'architectures', None)}); give --task, or fine-tune it first (npbert finetune)")


def load_for(task, path):
    cls = {"text-classification": npbert.BertForSequenceClassification,
           "token-classification": npbert.BertForTokenClassification,
           "question-answering": npbert.BertForQuestionAnswering,
           "multiple-choice": npbert.BertForMultipleChoice, "fill-mask": npbert.BertForMaskedLM}[task]
    head = {"text-classification": "classifier.", "token-classification": "classifier.",
            "question-answering": "qa_outputs.", "multiple-choice": "classifier.", "fill-mask": "cls.predictions."}[task]
    return load_checkpoint(cls, path, "--model", require_trained=head, what=f"{task} head ({head}*)")


def check_output(output, input_path, model):
    """Refuse, before anything runs, an --output that would replace the input or a file of the
    model (cli/outputs.py), or cannot be a file."""
    if os.path.isdir(output):
        raise UsageError(f"--output {output}: is a directory; give the file to write (e.g. "
                         f"{os.path.join(output, 'predictions.jsonl')})")
    refuse_overwriting_inputs([("--output", output)], [("--input", input_path), ("--model", model)])
    parent = os.path.dirname(os.path.abspath(output))
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise UsageError(f"--output {output}: {parent} is a file, not a directory")


def check_task_fits(task, config, args):
    """The checkpoint's head must be the one the task reads (config.json's `architectures`);
    --ignore_architectures runs it anyway."""
    if args.ignore_architectures:
        return
    try:
        check_architectures(task, getattr(config, "architectures", None), f"--model {args.model}",
                            how="--task {task}", override="--ignore_architectures")
    except ValueError as e:
        raise UsageError(str(e)) from None


def run(args):
    config = read_model_config(args.model)
    task = choose_task(args, config)
    default = 384 if task == "question-answering" else config.max_position_embeddings
    args.max_seq_length = resolve_max_seq_length(args.max_seq_length, config, default=default,
                                                 where=f" ({args.model})")
    if not os.path.isfile(args.input):
        raise UsageError(f"--input {args.input}: no such file")
    check_output(args.output, args.input, args.model)
    check_task_fits(task, config, args)
    model = load_for(task, args.model)
    tokenizer = load_tokenizer(args.model)
    tokenizer.model_max_length = min(tokenizer.model_max_length, args.max_seq_length)
    fmt = input_format(args.input, args.input_format)
    try:
        examples = read_examples(args, task, fmt)
        truncations = Truncations(tokenizer, args.max_seq_length)
        make = record_maker(args, task, model, tokenizer, fmt, truncations)
        print(f"predict: {task} with {args.model} on {len(examples)} examples from {args.input} ({fmt})",
              file=sys.stderr)
        progress = Progress(len(examples))
        records = []
        for k, (ex_id, example) in enumerate(examples):
            try:
                records.append(make(ex_id, example))
            except ValueError as e:
                raise CliError(f"{args.input}: example {ex_id}: {e}") from None
            progress.update(k + 1)
    except ValueError as e:
        raise CliError(str(e)) from None
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with atomic_write(args.output, "w") as f:
        write_records(f, records)
    truncations.report(len(records))
    print(f"wrote {args.output}: {len(records)} predictions")
    return 0
