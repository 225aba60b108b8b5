"""Opening a task's data file: the whole text, or a ValueError naming the file."""
import os


def read_text_file(path, encoding="utf-8-sig"):
    """The file's text (a UTF-8 byte-order mark dropped); an error for a missing or empty file."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file")
    with open(path, "r", encoding=encoding) as f:
        text = f.read()
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    return text
