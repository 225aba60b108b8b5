"""The `npbert explain --html` page: render_page(data) -> one HTML document, page.html filled in with
page.css, page.js and the data block inline, nothing fetched; write_page(path, model, tokenizer, text)
builds the data (data.py) and writes it.  The three files are package data (pyproject.toml), read with
importlib.resources, so a linter and a browser's devtools read them as what they are."""
import html
import json
import os
import string
from importlib import resources

from npbert.io._atomic import atomic_write

from .data import build_page_data
from .errors import ExplainError


def package_file(name):
    """The text of one of npbert/explain's data files (page.html, page.css, page.js)."""
    return resources.files("npbert.explain").joinpath(name).read_text(encoding="utf-8")


def _e(x):
    return html.escape(str(x), quote=True)


def _tokens_table(data):
    cols = range(len(data["tokens"]))

    def row(name, cls, cells):
        tds = "".join(f'<td class="tokcol{" type1" if data["token_type_ids"][t] else ""}" data-t="{t}">{_e(v)}</td>'
                      for t, v in zip(cols, cells))
        return f'<tr class="{cls}"><th>{name}</th>{tds}</tr>'
    return ("<table>" + row("position", "", cols) + row("token", "tok", data["tokens"])
            + row("input_ids", "", data["input_ids"]) + row("token_type_ids", "", data["token_type_ids"])
            + row("attention_mask", "", data["attention_mask"]) + "</table>")


def _legend(data):
    c, T = data["model"]["config"], len(data["tokens"])
    sizes = {"B": 1, "T": T, "F": T, "H": c["H"], "N": c["N"], "D": c["D"], "I": c["I"], "L": c["L"],
             "V": c["V"], "P": c["P"], "Y": c["Y"], "K": c.get("K"), "C": c.get("C")}
    return "".join(f"<span><b>{d}</b>{_e(text)} = {sizes[d]}</span>" for d, text in data["dims"].items())


def _check_lines(checks):
    return "".join(f'<div class="check {"ok" if ch["ok"] else "bad"}">{"&#10003;" if ch["ok"] else "&#10007;"} '
                   f'{_e(ch["what"])}: max|diff| {ch["max_abs_diff"]:.1e} ({_e(ch["rule"])}, tol {ch["tol"]:.0e})</div>'
                   for ch in checks)


def _panel(title, path):
    return f'<div class="panel"><div class="ptitle">{title}</div><div class="loss-map" data-tensor="{path}"></div></div>'


def _loss_box(data):
    """What the gradients are of: the loss, and what it hands to BERT."""
    loss, head = data["loss"], data["model"]["head"]
    top = f'<code>{_e(loss["formula"])}</code> = {loss["value"]:.6g}, '
    if loss["labels"] is None:
        unread = ([] if not any(s["section"] == "pooler" for s in data["stages"]) else ["the pooler"]) + (
            [f"{head['class']}'s outputs"] if head else [])
        note = (f" {' and '.join(unread)} {'do' if len(unread) > 1 or head else 'does'} not feed it: "
                f"{'their' if len(unread) > 1 or head else 'its'} gradients are 0." if unread else "")
        hint = " (Give a label with --label for the head's loss.)" if head else ""
        return (top + f'with U (B, T, H) drawn from N(0, 1) (seed {loss["seed"]}), in the data block as loss.U. '
                f"It reaches BERT as d loss / d last_hidden_state = U;{note}{hint}"
                f'<div class="pair" style="margin-top:8px">{_panel("U = d loss / d last_hidden_state", "U")}</div>'
                f'{_check_lines(loss["checks"])}')
    labels = ", ".join(f"{k}={v}" for k, v in loss["labels"].items())
    rows = "".join(f'<tr><td><code>{_e(t["name"])}</code></td><td>{t["weight"]:g}</td><td>{t["count"]}</td>'
                   f'<td>{t["mean"]:.6g}</td></tr>' for t in loss["terms"])
    panels = _panel("d loss / d last_hidden_state (what the head hands down)", "upstream.last_hidden_state")
    if loss["upstream"]["pooler_output"] is not None:
        panels += _panel("d loss / d pooler_output", "upstream.pooler_output")
    return (top + f'the loss of {_e(head["class"])}(..., {_e(labels)}), a sum of weighted means as its '
            "<code>loss_terms</code> declare them (npbert/modeling/loss_terms.py):"
            '<table class="terms"><tr><th>term</th><th>weight</th><th>items (count)</th><th>mean</th></tr>'
            f'{rows}</table>It reaches BERT through {_e(head["class"])}.backward() (its intermediate gradients) as:'
            f'<div class="pair" style="margin-top:8px">{panels}</div>{_check_lines(loss["checks"])}')


def _pooler_section(data):
    if any(s["section"] == "pooler" for s in data["stages"]):
        return '<h2 id="pooler">Pooler <small>BertPooler, docs/encoder.md</small></h2>\n<div id="pooler-cards"></div>'
    return (f'<h2 id="pooler">Pooler</h2>\n<div class="box">This checkpoint has no pooler: '
            f'{_e(data["model"]["head"]["class"])} reads last_hidden_state.</div>')


def _head_section(data):
    head = data["model"]["head"]
    if head is None:
        return ""
    return (f'<h2 id="head">Head <small>{_e(head["class"])}: its outputs ({_e(", ".join(head["outputs"]))}), '
            'docs/heads.md</small></h2>\n<div id="head-cards"></div>')


def render_page(data):
    """The whole page as a string."""
    m, c, g = data["model"], data["model"]["config"], data["gradient_check"]
    ok = data["checks"]["ok"]
    verdict = (f'<span class="verdict ok">PASS: {data["checks"]["count"]} checks</span>' if ok else
               f'<span class="verdict bad">FAIL: {len(data["checks"]["failed"])} of {data["checks"]["count"]} '
               f'checks: {_e(", ".join(data["checks"]["failed"]))}</span>')
    text = _e(data["text"]) + (f' &nbsp;|&nbsp; {_e(data["text_pair"])}' if data["text_pair"] is not None else "")
    # The data block: JSON with "<" escaped, so that no string in it can end the script element.
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return string.Template(package_file("page.html")).substitute(
        title=_e(data["text"]), style=package_file("page.css"), verdict=verdict, text=text,
        description=_e(m["description"]),
        sizes=(f'L={c["L"]} layers, H={c["H"]}, N={c["N"]} heads, D={c["D"]}, I={c["I"]}, V={c["V"]}, '
               f'hidden_act={_e(c["hidden_act"])},\n{m["num_parameters"]:,} parameters'),
        dtype=_e(m["dtype"]), head_link='<a href="#head">head</a> ' if m["head"] else "",
        legend=_legend(data), tokenizer=_e(data["tokenizer"]), tokens=_tokens_table(data), loss=_loss_box(data),
        pooler=_pooler_section(data), head=_head_section(data),
        gradient_check_title=(f'{_e(g["of"])}.backward against npbert.gradcheck, float64, as the text '
                              f'<code>npbert explain</code>: {"passed" if g["ok"] else "FAILED"}, {g["count"]} '
                              f'checks over {g["tensors"]} tensors'),
        gradient_check=_e(g["text"]), schema=_e(data["schema"]), data=blob, script=package_file("page.js"))


def write_page(path, model, tokenizer, text, text_pair=None, labels=None, seed=0, description=None,
               tokenizer_description=None):
    """Write the page of `text` (and `text_pair`) through `model` to `path`, atomically: a BertModel
    or a head around one, npbert's or your own (docs/custom_heads.md), with `labels` ({label argument:
    array for one example}, as its forward takes them) for the head's loss.  `tokenizer`: any with
    transformers' slow-tokenizer methods (npbert.BertTokenizer, or npbert.explain.LookupTokenizer for
    the built-in vocabulary).  The forward runs in the model's dtype, the backward in float64.
    Returns the data block (a dict; data["checks"]["ok"] is the verdict)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ExplainError(f"{path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise ExplainError(f"{path}: is a folder; give a file name such as explain.html")
    data, _ = build_page_data(model, tokenizer, text, text_pair, labels, seed, folder, description,
                              tokenizer_description)
    page = render_page(data)
    with atomic_write(path, "w") as f:
        f.write(page)
    return data
