"""Reading fine-tuning data: tables (.csv / .tsv with a header, .json / .jsonl one object a
line) and CoNLL files for token classification.  Every error names the file and the line.

    read_table(path)            -> list of (line_number, row dict)
    find_columns(rows, ...)     -> the text / text-pair / label column names, given or found
    read_conll(path)            -> list of (line_number, words, tags)
"""
import csv
import io
import json
import os

from npbert.tasks.files import read_text_file

TEXT_COLUMNS = ("sentence", "text", "sentence1", "question", "content", "title")
PAIR_COLUMNS = {"sentence1": "sentence2", "question": "sentence", "text": "text_pair", "premise": "hypothesis"}
LABEL_COLUMNS = ("label", "labels", "label_desc", "category")


def read_table(path):
    """Rows of a .csv/.tsv (first line the header) or .json/.jsonl (an object a line, or one
    JSON list of objects) as [(line_number, {column: value})]."""
    ext = os.path.splitext(path)[1].lower()
    text = read_text_file(path)
    rows = []
    if ext in (".csv", ".tsv"):
        rows = _read_csv(path, text, "\t" if ext == ".tsv" else ",")
    elif ext in (".json", ".jsonl"):
        stripped = text.lstrip()
        if stripped.startswith("["):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
            for k, obj in enumerate(data):
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}: item {k} is not an object")
                rows.append((k + 1, obj))
        else:
            for line, raw in enumerate(text.splitlines(), 1):
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{line}: not valid JSON ({e.msg})") from None
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}:{line}: a JSON line must be an object, got {type(obj).__name__}")
                rows.append((line, obj))
    else:
        raise ValueError(f"{path}: unknown file type {ext!r}; use .csv, .tsv, .json or .jsonl")
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def _read_csv(path, text, delimiter):
    # csv refuses a field longer than field_size_limit() (128 KiB by default); no field can be
    # longer than the file, so the limit is raised to the file's length while it is read.
    before = csv.field_size_limit()
    csv.field_size_limit(max(before, len(text) + 1))
    try:
        reader = csv.reader(io.StringIO(text), delimiter=delimiter)
        rows, header = [], None
        try:
            for row in reader:
                line = reader.line_num
                if not row or not any(cell.strip() for cell in row):
                    continue
                if header is None:
                    header = [h.strip() for h in row]
                    if len(set(header)) != len(header):
                        raise ValueError(f"{path}:{line}: the header repeats a column name: {header}")
                    continue
                if len(row) != len(header):
                    raise ValueError(f"{path}:{line}: {len(row)} fields, the header has {len(header)} ({header})")
                rows.append((line, dict(zip(header, row))))
        except csv.Error as e:
            raise ValueError(f"{path}:{reader.line_num}: not valid {'TSV' if delimiter == chr(9) else 'CSV'} ({e})") \
                from None
        return rows
    finally:
        csv.field_size_limit(before)


def find_columns(path, rows, text_column=None, pair_column=None, label_column=None, need_label=True):
    """(text, pair or None, label or None) column names: the given ones checked, else found by
    the usual names (sentence, sentence1/sentence2, text, label, CLUE's label_desc, ...)."""
    columns = list(rows[0][1])
    if text_column is None:
        text_column = next((c for c in TEXT_COLUMNS if c in columns), None)
        if text_column is None:
            raise ValueError(f"{path}: no text column found among {columns}; name it with --text_column_name")
        if pair_column is None and PAIR_COLUMNS.get(text_column) in columns:
            pair_column = PAIR_COLUMNS[text_column]
    if label_column is None and need_label:
        label_column = next((c for c in LABEL_COLUMNS if c in columns), None)
        if label_column is None:
            raise ValueError(f"{path}: no label column found among {columns}; name it with --label_column_name")
    for name in (text_column, pair_column, label_column):
        if name is None:
            continue
        for line, row in rows:
            if name not in row:
                raise ValueError(f"{path}:{line}: column {name!r} is missing (the row has {sorted(row)})")
    return text_column, pair_column, label_column


def read_conll(path, with_tags=True):
    """[(line_number, words, tags)]: `token<TAB or space>tag` lines, a blank line between
    sentences, -DOCSTART- lines skipped.  Weibo's `char+segment-digit` tokens (科0) lose the
    digit when every token of the file is one character followed by one digit.  With
    with_tags=False (words to predict) a line may hold the word alone, and tags are None."""
    text = read_text_file(path)
    sentences, words, tags, start = [], [], [], None
    for line_number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("-DOCSTART-"):
            if words:
                sentences.append((start, words, tags))
            words, tags, start = [], [], None
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if not with_tags:
            parts = parts + ["O"]
        if len(parts) < 2:
            raise ValueError(f"{path}:{line_number}: expected `token<TAB>tag`, got {raw!r}")
        if start is None:
            start = line_number
        words.append(parts[0])
        tags.append(parts[-1])
    if words:
        sentences.append((start, words, tags))
    if not sentences:
        raise ValueError(f"{path}: no sentences")
    tokens = [w for _, ws, _ in sentences for w in ws]
    if all(len(w) == 2 and w[1].isdigit() for w in tokens):           # Weibo: 科0 -> 科
        sentences = [(n, [w[0] for w in ws], ts) for n, ws, ts in sentences]
    if not with_tags:
        return [(n, ws, None) for n, ws, _ in sentences]
    for n, ws, ts in sentences:
        for t in ts:
            if t != "O" and not (len(t) > 2 and t[:2] in ("B-", "I-", "E-", "S-")):
                raise ValueError(f"{path}: sentence at line {n}: tag {t!r} is not O or B-/I-<type> (BIO)")
    return sentences
