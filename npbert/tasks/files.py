"""Opening a task's data file: the whole text, or a ValueError naming the file."""
import os

from npbert.io.text import read_text


def read_text_file(path, encoding="utf-8-sig"):
    """The file's text (a UTF-8 byte-order mark dropped); an error for a missing or empty file, or
    one that is not UTF-8 (naming the line)."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file")
    text = read_text(path, encoding)           # not UTF-8: an error naming the file and line
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    return text
