"""The bundled corpora (npbert/data/corpus/, see NOTICE there) and how the demo turns
tinyshakespeare.txt into pre-training documents.

tinyshakespeare.txt is a run of speaker turns ("First Citizen:" on a line of its own, then the
speech, then a blank line), not one sentence a line.  Google's pre-training input is one sentence
a line with a blank line between documents, so `shakespeare_documents` makes:
  - a speech = the lines of one turn joined by spaces (the speaker's name dropped);
  - sentences = the speech split after ". ", "! " or "? " (the mark stays with its sentence);
  - a document = `speeches_per_document` consecutive speeches (a stretch of one scene), so that
    next sentence prediction has real continuations (within a document) and random ones (from
    another document) to tell apart.
"""
import os
import re

CORPUS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
CORPORA = ("tinyshakespeare.txt", "sample_text.txt")

_SPEAKER = re.compile(r"^[A-Z][A-Za-z' ]*(?:\s+[A-Z][A-Za-z']*)*:$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def corpus_path(name="tinyshakespeare.txt"):
    """Path of a bundled corpus file: 'tinyshakespeare.txt' or 'sample_text.txt'."""
    if name not in CORPORA:
        raise ValueError(f"no bundled corpus {name!r}; there are {CORPORA}")
    return os.path.join(CORPUS_DIR, name)


def split_sentences(text):
    """'Speak, speak. Resolved! Is it?' -> ['Speak, speak.', 'Resolved!', 'Is it?']"""
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if s]


def shakespeare_speeches(text):
    """The speeches of a tinyshakespeare-style text: a list of (speaker, speech text)."""
    speeches = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [ln.strip() for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        speaker = None
        if _SPEAKER.match(lines[0]):
            speaker, lines = lines[0][:-1], lines[1:]
        if lines:
            speeches.append((speaker, " ".join(lines)))
    return speeches


def shakespeare_documents(text, speeches_per_document=8):
    """tinyshakespeare text -> documents (lists of sentences), as described in the module docstring."""
    if speeches_per_document < 1:
        raise ValueError(f"speeches_per_document must be >= 1, got {speeches_per_document}")
    speeches = shakespeare_speeches(text)
    documents = []
    for start in range(0, len(speeches), speeches_per_document):
        sentences = [s for _, speech in speeches[start:start + speeches_per_document]
                     for s in split_sentences(speech)]
        if sentences:
            documents.append(sentences)
    return documents


def write_documents(documents, path):
    """Write documents in Google's input format (one sentence a line, a blank line between
    documents), atomically."""
    from npbert.io._atomic import atomic_write
    with atomic_write(path, "w") as f:
        f.write("\n\n".join("\n".join(doc) for doc in documents) + "\n")
    return path
