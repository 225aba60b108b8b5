"""Reading the tokenizer's text files: UTF-8 with the line of a bad byte, JSON objects with the
line and column of an error."""
import json
import re

_NEWLINE = re.compile("\r\n|\r|\n")


def decode_utf8(data, path):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = len(_NEWLINE.findall(data[: error.start].decode("utf-8"))) + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 text (byte 0x{data[error.start]:02x} at byte offset "
                         f"{error.start}); save the file as UTF-8") from None


def read_json_object(path):
    """A JSON file holding an object -> dict, or a ValueError naming the file and the problem."""
    with open(path, "rb") as f:
        text = decode_utf8(f.read(), path)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}, line {error.lineno} column {error.colno}: not valid JSON ({error.msg})") from None
    except (ValueError, RecursionError) as error:   # a number of 5000 digits, nesting 1000 deep
        raise ValueError(f"{path}: cannot be read as JSON ({error})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object ({{\"do_lower_case\": true, ...}}); it holds "
                         f"{_json_kind(value)}")
    return value


def _json_kind(value):
    kinds = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)
