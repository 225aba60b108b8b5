"""The worked examples of docs/tokenizer.md hold (run as doctests)."""
import doctest
import os

from npbert.tokenization import BertTokenizer

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "tokenizer.md")


def test_docs_examples(minilm_dir):
    with open(DOC, encoding="utf-8") as f:
        # a code fence ends an example's expected output, as a blank line does
        text = "".join("\n" if line.startswith("```") else line for line in f)
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    test = doctest.DocTestParser().get_doctest(text, {"tokenizer": tokenizer}, "tokenizer.md", DOC, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 12
    assert result.failed == 0
