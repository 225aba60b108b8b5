"""The bundled Shakespeare corpus in the pre-training input format.

tinyshakespeare.txt is speaker turns ("NAME:" on a line, the speech on the next lines, a
blank line after), not one sentence a line.  For pre-training:

    speech    the lines of one turn, the speaker's name dropped
    sentence  one line of a speech (a verse line or a line of prose)
    document  `speeches_per_document` consecutive speeches (a stretch of one scene), so that
              the next-sentence task has real continuations and other documents to draw from
"""
import os

from npbert.io._atomic import atomic_write

CORPUS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
TINYSHAKESPEARE = os.path.join(CORPUS_DIR, "tinyshakespeare.txt")
SAMPLE_TEXT = os.path.join(CORPUS_DIR, "sample_text.txt")


def read_speeches(path=TINYSHAKESPEARE):
    """The speeches, each a list of its lines, in order."""
    with open(path, encoding="utf-8") as f:
        blocks = f.read().split("\n\n")
    speeches = []
    for block in blocks:
        lines = [line.strip() for line in block.strip().split("\n") if line.strip()]
        if lines and lines[0].endswith(":"):
            lines = lines[1:]                           # the speaker's name
        if lines:
            speeches.append(lines)
    return speeches


def documents(speeches, speeches_per_document=8):
    """Consecutive speeches grouped into documents (lists of sentences)."""
    return [[line for speech in speeches[i:i + speeches_per_document] for line in speech]
            for i in range(0, len(speeches), speeches_per_document)]


def write_documents(docs, path):
    """One sentence a line, a blank line between documents (atomically)."""
    with atomic_write(path, "w") as f:
        f.write("\n\n".join("\n".join(doc) for doc in docs) + "\n")
