"""`npbert explain` reads as its legend says (issue 10): every dimension letter used is in the
legend, Q is labelled with the query length F, and the gradient table keeps its columns."""
import io
import re

from npbert.cli import explain as cli_explain
from npbert.cli import build_parser


def _explain_text():
    args = build_parser().parse_args(["explain", "--random", "--dtype", "float64"])
    out = io.StringIO()
    assert cli_explain.text(args, out) == 0
    return out.getvalue()


def test_legend_columns_and_labels():
    text = _explain_text()
    lines = text.split("\n")
    legend = " ".join(line for line in lines[lines.index(next(x for x in lines if "  dims " in x)):][:2])
    defined = set(re.findall(r"\b([A-Z]) [a-z]", legend))
    used = set()
    for line in lines:
        m = re.search(r"\)\s+([A-Z](?:,[A-Z])*)\s", line)
        if m:
            used |= set(m.group(1).split(","))
    header = re.search(r"\bL=\d+ layers, H=.*V=\d+, P=\d+, Y=\d+", text)
    assert header, "the model line gives L, V, P, Y"
    assert used and used <= defined, f"dims used but not in the legend: {sorted(used - defined)}"
    assert {"L", "V", "P", "Y"} <= defined
    q_line = next(x for x in lines if "-> Q" in x)
    assert "B,N,F,D" in q_line                          # queries are F in the legend
    # the gradient table: the last column starts at the same place on every row, the key bias's too
    header_line = next(x for x in lines if x.rstrip().endswith("verdict"))
    end = len(header_line.rstrip())
    start = lines.index(header_line) + 1
    rows = [x for x in lines[start:] if re.match(r"  \S+.*\(\d", x)]
    rows = rows[:next((i for i, x in enumerate(rows) if x.startswith("  (*)")), len(rows))]
    key_rows = [x for x in rows if "key.bias" in x]
    assert key_rows and len(rows) > 10
    for row in rows:
        assert len(row.rstrip()) == end, row
