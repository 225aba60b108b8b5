"""npbert.explain: one sentence through a BERT, every tensor of the forward and its gradient, as a
page (docs/explain.md) or as text (`npbert explain`).  A library: `npbert explain` parses its flags,
calls it and prints.

    write_page(path, model, tokenizer, text, text_pair=None, labels=None, seed=0)   the page, any model
    build_page_data(model, tokenizer, text, ...)     its data block as a dict, and the Checks
    render_page(data)                                that dict as the HTML document
    explain_text(bert, tokenizer, text, out, seed=0) the text walk of a BertModel
    labels_from_text(model, tokenizer, text, ...)    --label's text as the head's label arrays
    LookupTokenizer, TINY_VOCAB, TINY_CONFIG, random_model   the small random model and its vocabulary
    decode(t), tensor(x)                             a tensor of the data block <-> a numpy array

The stages and their gradients are npbert/reference.py's activations and grads_acts (stages.py),
checked against the model's own outputs and public backward; every gradient checked against finite
differences goes through npbert.gradcheck (checks.py).  The page's HTML, CSS and JS are the package
data files page.html, page.css, page.js.
"""
from .checks import Checks
from .data import SCHEMA, build_page_data, page_upstream
from .errors import ExplainError
from .labels import labels_from_text
from .models import random_model
from .page import render_page, write_page
from .rows import decode, tensor
from .tokens import TINY_CONFIG, TINY_VOCAB, LookupTokenizer, encode
from .walk import explain_text

__all__ = ["write_page", "build_page_data", "render_page", "explain_text", "labels_from_text", "LookupTokenizer",
           "TINY_VOCAB", "TINY_CONFIG", "random_model", "decode", "tensor", "encode", "page_upstream", "Checks",
           "ExplainError", "SCHEMA"]
