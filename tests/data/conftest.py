import pytest

from npbert.data import corpus
from npbert.data.vocab import build_vocab, write_vocab


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory):
    """Google-format documents from the first 40 kB of the bundled Shakespeare and a 400-token
    vocabulary learned from them: (documents file, vocab file)."""
    d = tmp_path_factory.mktemp("small_corpus")
    with open(corpus.corpus_path(), encoding="utf-8") as f:
        text = f.read()[:40000]
    docs = corpus.shakespeare_documents(text, 6)
    path = corpus.write_documents(docs, str(d / "docs.txt"))
    vocab = write_vocab(build_vocab([s for doc in docs for s in doc], 400), str(d / "vocab.txt"))
    return path, vocab
