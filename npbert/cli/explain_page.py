"""The `npbert explain --html` page: render_page(data) -> one HTML document with its style, its
script (explain_page_js.py) and its data block inline, nothing fetched.  The static parts (title,
dims legend, tokens, loss, gradient check) are written here; the stage cards are drawn by the
script from the data block."""
import html
import json

from npbert.cli.explain_page_js import SCRIPT

STYLE = """
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; background: #f4f5f7;
       margin: 0; }
main { max-width: 1240px; margin: 0 auto; padding: 0 20px 40px; }
header { background: #1d2330; color: #fff; padding: 18px 20px 14px; }
header .inner { max-width: 1240px; margin: 0 auto; }
header h1 { margin: 0 0 4px; font-size: 22px; font-weight: 600; }
header .sub { color: #c9cfdb; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 10px; font-weight: 600; margin-left: 8px; }
.verdict.ok { background: #1f7a3d; } .verdict.bad { background: #b3261e; }
h2 { font-size: 18px; margin: 28px 0 10px; font-weight: 600; }
h2 small { font-weight: 400; color: #5b6373; font-size: 13px; margin-left: 8px; }
.box { background: #fff; border: 1px solid #dde1e8; border-radius: 8px; padding: 12px 16px; margin: 12px 0; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; }
.legend span b { display: inline-block; min-width: 18px; padding: 0 4px; margin-right: 4px; border-radius: 4px;
                 background: #e8ecf4; text-align: center; font-family: ui-monospace, monospace; }
.tokens { overflow-x: auto; }
.tokens table { border-collapse: collapse; font-size: 13px; }
.tokens th { text-align: right; color: #5b6373; font-weight: 500; padding: 2px 8px 2px 0; }
.tokens td { text-align: center; padding: 2px 6px; border-left: 1px solid #eef0f4; cursor: pointer; }
.tokens tr.tok td { font-weight: 600; font-family: ui-monospace, monospace; }
.tokens td.type1 { background: #fff3d6; }
.tokens td.on { outline: 2px solid #2166ac; outline-offset: -2px; }
nav { position: sticky; top: 0; z-index: 5; background: #ffffffee; border-bottom: 1px solid #dde1e8;
      padding: 8px 20px; display: flex; gap: 14px; align-items: center; flex-wrap: wrap; }
nav a { color: #2166ac; text-decoration: none; }
nav select { font: inherit; padding: 2px 4px; }
.stage { background: #fff; border: 1px solid #dde1e8; border-radius: 8px; padding: 12px 16px; margin: 12px 0; }
.stage .head { display: flex; align-items: baseline; gap: 10px; flex-wrap: wrap; }
.stage .num { background: #1d2330; color: #fff; border-radius: 10px; padding: 0 8px; font-size: 12px; }
.stage h3 { margin: 0; font-size: 15px; }
.stage .module { color: #5b6373; font-size: 12.5px; }
.meta { display: flex; gap: 14px; flex-wrap: wrap; align-items: center; margin: 6px 0 8px; font-size: 13px; }
.formula { background: #f3f5f9; padding: 1px 6px; border-radius: 4px; }
.shape .dim { display: inline-block; border: 1px solid #9aa6bd; border-radius: 4px; padding: 0 5px; margin-right: 3px;
              font-family: ui-monospace, monospace; font-size: 12px; background: #f8f9fc; }
.meta a { color: #2166ac; font-size: 12.5px; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.panel { min-width: 0; }
.ptitle { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: #5b6373; margin-bottom: 4px; }
.ptitle.grad { color: #8a4b08; }
canvas.map { display: block; max-width: 100%; }
.bar { display: flex; flex-wrap: wrap; align-items: center; gap: 2px 6px; font-size: 11.5px; color: #5b6373;
       margin-top: 4px; }
.bar span { white-space: nowrap; }
.bar .clip { color: #9aa3b3; }
.bar canvas { width: 160px; height: 10px; border: 1px solid #ccd2dd; }
.nums, .hover { font: 12px ui-monospace, monospace; color: #333; white-space: pre; }
.hover { color: #5b6373; min-height: 1.4em; }
.check { font-size: 12.5px; margin-top: 6px; }
table.terms { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
table.terms td, table.terms th { padding: 1px 10px 1px 0; text-align: left; }
.check.ok { color: #1f7a3d; } .check.bad { color: #b3261e; font-weight: 600; } .check.none { color: #7b8394; }
.attention { border-top: 1px dashed #dde1e8; margin-top: 10px; padding-top: 10px; }
.thumbs { display: flex; flex-wrap: wrap; gap: 8px; margin-bottom: 10px; }
.thumbwrap { text-align: center; font-size: 11px; color: #5b6373; }
canvas.thumb { display: block; border: 2px solid transparent; cursor: pointer; }
canvas.thumb.on { border-color: #b2182b; }
.bars { max-width: 620px; }
.barrow { display: grid; grid-template-columns: 150px 1fr 52px; gap: 8px; align-items: center; font-size: 12.5px; }
.barrow.self .tok { font-weight: 700; }
.barrow .tok { text-align: right; font-family: ui-monospace, monospace; overflow: hidden; white-space: nowrap; }
.track { background: #eef0f4; height: 11px; border-radius: 3px; overflow: hidden; }
.fill { display: block; height: 100%; background: #08306b; }
.val { font-family: ui-monospace, monospace; color: #333; }
pre { background: #fff; border: 1px solid #dde1e8; border-radius: 8px; padding: 12px; overflow-x: auto;
      font-size: 11.5px; }
#npbert-status { color: #7b8394; font-size: 12px; margin-top: 20px; }
"""


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
                   f'{_e(ch["what"])}: max|diff| {ch["max_abs_diff"]:.1e} (tolerance {ch["tol"]:.0e} &times; '
                   f'(1 + max|value|))</div>' for ch in checks)


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
                f'<div class="pair" style="margin-top:8px">{_panel("U = d loss / d last_hidden_state", "U")}</div>')
    labels = ", ".join(f"{k}={v}" for k, v in loss["labels"].items())
    rows = "".join(f'<tr><td><code>{_e(t["name"])}</code></td><td>{t["weight"]:g}</td><td>{t["count"]}</td>'
                   f'<td>{t["mean"]:.6g}</td></tr>' for t in loss["terms"])
    panels = _panel("d loss / d last_hidden_state (what the head hands down)", "upstream.last_hidden_state")
    if loss["upstream"]["pooler_output"] is not None:
        panels += _panel("d loss / d pooler_output", "upstream.pooler_output")
    return (top + f'the loss of {_e(head["class"])}(..., {_e(labels)}), a sum of weighted means as its '
            "<code>loss_terms</code> declare them (npbert/modeling/loss_terms.py):"
            '<table class="terms"><tr><th>term</th><th>weight</th><th>items (count)</th><th>mean</th></tr>'
            f'{rows}</table>It reaches BERT through {_e(head["class"])}.backward() as:'
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
    m, c = data["model"], data["model"]["config"]
    ok = data["checks"]["ok"]
    verdict = (f'<span class="verdict ok">PASS: {data["checks"]["count"]} checks</span>' if ok else
               f'<span class="verdict bad">FAIL: {len(data["checks"]["failed"])} of {data["checks"]["count"]} '
               f'checks: {_e(", ".join(data["checks"]["failed"]))}</span>')
    text = _e(data["text"]) + (f' &nbsp;|&nbsp; {_e(data["text_pair"])}' if data["text_pair"] is not None else "")
    g = data["gradient_check"]
    # The data block: JSON with "<" escaped, so that no string in it can end the script element.
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>npbert explain: {_e(data["text"])}</title>
<style>{STYLE}</style></head>
<body>
<header><div class="inner"><h1>npbert explain {verdict}</h1>
<div class="sub">&ldquo;{text}&rdquo; through {_e(m["description"])}</div>
<div class="sub">L={c["L"]} layers, H={c["H"]}, N={c["N"]} heads, D={c["D"]}, I={c["I"]}, V={c["V"]}, hidden_act={_e(c["hidden_act"])},
{m["num_parameters"]:,} parameters; forward in {_e(m["dtype"])} (eval: dropout off), backward in float64</div></div></header>
<nav><b>view</b> <select id="layer" aria-label="layer"></select> <select id="head" aria-label="head"></select>
<select id="token" aria-label="query token"></select>
<a href="#embeddings">embeddings</a> <a href="#layer">encoder layer</a> <a href="#pooler">pooler</a>
{'<a href="#head">head</a> ' if data["model"]["head"] else ""}<a href="#backward">backward</a> <a href="#gradient-check">gradient check</a></nav>
<main>
<h2>Dimensions <small>the letters of every shape below (docs/index.md)</small></h2>
<div class="box legend">{_legend(data)}</div>
<h2>Tokens <small>{_e(data["tokenizer"])}; click a token to see what it attends to</small></h2>
<div class="box tokens">{_tokens_table(data)}</div>
<h2 id="backward">What the gradients are of <small>every stage shows its value (left) and d loss / d value (right)</small></h2>
<div class="box">{_loss_box(data)}
The backward runs in float64 on the same weights, one stage after the other from the top down, each step
checked against <code>reference.bert_layer_backward</code> and <code>model.backward</code>.</div>
<p>Each stage below is recomputed from the parameters by <code>npbert/reference.py</code> (the link goes to its line),
in the order of the forward pass; a stage that is an output of the model is checked against it.
Colours: red positive, blue negative, white zero, saturating at the 99th percentile of |value| shown
(BERT's few outlier dimensions would otherwise leave the rest white); probabilities white to blue, 0 to 1.
Hover over a map to read a value.</p>
<h2 id="embeddings">Embeddings <small>BertEmbeddings, docs/embeddings.md</small></h2>
<div id="embeddings-cards"></div>
<h2 id="layer"><span id="layer-title">encoder.layer</span> <small>BertLayer: choose the layer and head at the top</small></h2>
<div id="layer-cards"></div>
{_pooler_section(data)}
{_head_section(data)}
<h2 id="gradient-check">Gradient check <small>{_e(g["of"])}.backward against finite differences, float64, as the text
<code>npbert explain</code>: {"passed" if g["ok"] else "FAILED"}, {g["count"]} checks over {g["tensors"]} tensors</small></h2>
<pre>{_e(g["text"])}</pre>
<p>Every number on this page is in the <code>&lt;script type="application/json" id="npbert-data"&gt;</code> block
(schema {_e(data["schema"])}: docs/explain.md).</p>
<div id="npbert-status" data-state="loading">the page's script has not run (is JavaScript off?)</div>
</main>
<script type="application/json" id="npbert-data">{blob}</script>
<script>{SCRIPT}</script>
</body></html>
"""
