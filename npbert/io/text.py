"""Reading text input files with errors that name the file and the line.

    read_text(path)                 the whole file as str (UTF-8, a byte-order mark dropped)
    decode_error(path, data, err)   "file:line: not UTF-8 text (byte 0xe9 at column 23) ..."
"""


def decode_error(path, data, error):
    """The message for a UnicodeDecodeError `error` raised decoding the bytes `data` of `path`."""
    line = data.count(b"\n", 0, error.start) + 1
    column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
    return (f"{path}:{line}: not UTF-8 text (byte 0x{data[error.start]:02x} at column {column}); save the file as "
            "UTF-8 (e.g. iconv -f latin1 -t utf-8)")


def read_text(path, encoding="utf-8-sig"):
    """The text of `path`; ValueError naming file and line when it is not valid `encoding`."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(decode_error(path, data, e)) from None
