"""`npbert explain --html OUT.html`: the walk of `npbert explain` as one self-contained page.

    npbert explain --html OUT.html [--model DIR | --random] [--text "..."] [--text_pair "..."]

The page shows, for one sentence (or pair) through one BERT, every tensor of the forward pass
(npbert/cli/explain_stages.py: computed from the parameters by npbert/reference.py, checked against
the model's own outputs), the gradient of a stated loss with respect to each of them, and the text
`explain`'s gradient check against finite differences.  Every number it draws is in the page's
`<script type="application/json" id="npbert-data">` block (schema: docs/explain.md, "The data
block"); the drawing is npbert/cli/explain_page.py.  Exit status 0 when every check passes, 1 when
one fails, as the text `explain`.

    B = batch, T = sequence length (keys), F = sequence length (queries),
    H = hidden size, N = attention heads, D = H / N head size, I = intermediate size
"""
import base64
import contextlib
import inspect
import io
import json
import os
import sys
import time
import urllib.parse
import warnings

import numpy as np

import npbert
from npbert import reference
from npbert.cli.common import CliError, UsageError
from npbert.cli.explain_page import render_page
from npbert.cli.explain_stages import SECTIONS, run_backward, run_forward, source_line
from npbert.ops.softmax import softmax_forward
from npbert.cli.explain_walk import Checks, gradient_check, upstream_gradients
from npbert.io._atomic import atomic_write

SCHEMA = "npbert-explain/1"
DIMS = {"B": "batch", "T": "tokens (keys)", "F": "tokens (queries; F = T here)", "H": "hidden size",
        "N": "attention heads", "D": "head size H / N", "I": "intermediate size", "L": "layers",
        "V": "vocab size", "P": "max positions", "Y": "token types"}
# float64 backward walk against the model's backward: the same ops in float64, summed in another
# order in places (the fast path), so round-off of ~1e-15 relative; 1e-9 leaves a wide margin while
# a wrong stage (a missing residual, a transposed head) is off by O(1).
BACKWARD_TOL = 1e-9


def tensor(x):
    """An array as the page stores it: float32, little-endian, base64 (docs/explain.md)."""
    a = np.ascontiguousarray(x, dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode("ascii")}


def decode(t):
    """The inverse of tensor(): a numpy float32 array (for scripts reading the page, and the tests)."""
    return np.frombuffer(base64.b64decode(t["b64"]), dtype="<f4").reshape(t["shape"])


def summary(x):
    x = np.asarray(x, dtype=np.float64)
    return {"mean": float(x.mean()), "std": float(x.std()), "min": float(x.min()), "max": float(x.max())}


def check(name, mine, ref, tol, checks, what=None):
    """mine against ref: max|diff| <= tol (1 + max|ref|), as the text explain's checks.  `what`: the
    sentence the page shows (default: "= name of the model")."""
    mine, ref = np.asarray(mine, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    diff = float(np.max(np.abs(mine - ref))) if mine.shape == ref.shape else float("inf")
    ok = checks.add(name, diff <= tol * (1.0 + float(np.max(np.abs(ref)))))
    return {"against": name, "what": what or f"= {name} of the model", "max_abs_diff": diff, "tol": tol, "ok": ok}


def _href(path, page_dir):
    """A link from the page's folder to `path`: relative when it can be, else a file:// URI."""
    try:
        rel = os.path.relpath(path, page_dir)
    except ValueError:                                   # another drive (Windows)
        return "file://" + urllib.parse.quote(os.path.abspath(path).replace(os.sep, "/"))
    return urllib.parse.quote(rel.replace(os.sep, "/"))


def pair_tokens(args, model_dir, config, tokenize):
    """(tokens, ids (B, T), token_type_ids (B, T), tokenizer description) for --text [--text_pair];
    tokenize: the text explain's (npbert/cli/explain.py)."""
    P, V = config.max_position_embeddings, config.vocab_size
    if args.text_pair is None:
        tokens, ids, how = tokenize(args.text, model_dir, P, V)
        return tokens, ids, np.zeros_like(ids), how
    a, ids_a, how = tokenize(args.text, model_dir, 10 ** 9, V)           # [CLS] a [SEP]
    b, ids_b, _ = tokenize(args.text_pair, model_dir, 10 ** 9, V)        # [CLS] b [SEP]: drop its [CLS]
    tokens = a + b[1:]
    if len(tokens) > P:
        raise UsageError(f"--text and --text_pair make {len(tokens)} tokens, more than the model's "
                         f"max_position_embeddings={P}: shorten them")
    ids = np.concatenate([ids_a, ids_b[:, 1:]], axis=1)                   # (B, T)
    types = np.concatenate([np.zeros_like(ids_a), np.ones_like(ids_b[:, 1:])], axis=1)   # (B, T): 0 a, 1 b
    return tokens, ids, types, how


def _model64(model, model_dir, args):
    """The same weights in float64, for the backward and the gradient check (as the text explain)."""
    if model.dtype == np.float64:
        return model
    if model_dir is None:
        model64 = npbert.BertModel(model.config, seed=args.seed, dtype=np.float64).eval()
        model64.load_state_dict(model.state_dict())
        return model64
    return npbert.BertModel.from_pretrained(args.model or model_dir, dtype=np.float64)


def _stage_rows(section, table, values, grads, layer, page_dir, repo, checks_by_key):
    rows = []
    for key, module, label, formula, dims, doc, function, piece in table:
        line = source_line(function, piece)
        source = os.path.abspath(inspect.getsourcefile(function))
        rows.append({
            "section": section, "layer": layer, "key": key,
            "module": module.replace("{i}", str(layer)) if layer is not None else module,
            "label": label.replace("[i]", f"[{layer}]").replace("[i+1]", f"[{layer + 1}]") if layer is not None else label,
            "formula": formula, "dims": dims.split(","), "shape": list(values[key].shape),
            "value": tensor(values[key]), "summary": summary(values[key]),
            "grad": tensor(grads[key]), "grad_summary": summary(grads[key]),
            "check": checks_by_key.get(key, {"forward": None, "backward": None}),
            "source": {"file": os.path.relpath(source, repo).replace(os.sep, "/"), "line": line,
                       "function": function.__qualname__, "href": f"{_href(source, page_dir)}#L{line}"},
            "doc": {"page": f"docs/{doc}", "href": _href(os.path.join(repo, "docs", doc), page_dir)},
        })
    return rows


def build_data(args, out_path, load_model, tokenize):
    """Everything the page shows, as the dict embedded in it; and the Checks.  load_model, tokenize:
    the text explain's, passed in by npbert/cli/explain.py (which imports this module)."""
    dtype = np.float32 if args.dtype == "float32" else np.float64
    with _head_weights_expected(args):
        model, model_dir, description = load_model(args, dtype)
    c = model.config
    tokens, ids, types, how = pair_tokens(args, model_dir, c, tokenize)
    head = _head(args, model_dir)                                         # None without --label
    B, T = ids.shape
    attention_mask = np.ones_like(ids)                                   # (B, T): no padding
    checks = Checks()
    tol = 1e-5 if dtype == np.float32 else 1e-12                          # as the text explain's walk

    # Forward, in the model's dtype, checked against the model's own outputs.
    p = model.state_dict()
    acts, _ = run_forward(p, c, ids, types)
    out = model(input_ids=ids, attention_mask=attention_mask, token_type_ids=types,
                output_hidden_states=True, output_attentions=True)
    fchecks = {"embeddings": {"embeddings": check("hidden_states[0]", acts["embeddings"]["embeddings"],
                                                  out.hidden_states[0], tol, checks)},
               "layers": [{"probs": check(f"attentions[{i}]", a["probs"], out.attentions[i], tol, checks),
                           "layer_output": check(f"hidden_states[{i + 1}]", a["layer_output"],
                                                 out.hidden_states[i + 1], tol, checks)}
                          for i, a in enumerate(acts["layers"])],
               "pooler": {"pooled": check("pooler_output", acts["pooler"]["pooled"], out.pooler_output, tol, checks)}}

    # The head (--label): logits = pooler_output W_c^T + b_c, checked against the head model's own.
    if head is not None:
        labels = np.array([args.label])                                                  # (B,)
        hout = head(input_ids=ids, attention_mask=attention_mask, token_type_ids=types, labels=labels)
        Wc, bc = head.state_dict()["classifier.weight"], head.state_dict()["classifier.bias"]   # (K, H), (K,)
        acts["head"] = {"logits": acts["pooler"]["pooled"] @ Wc.T.astype(dtype) + bc.astype(dtype)}   # (B, K)
        fchecks["head"] = {"logits": check("logits", acts["head"]["logits"], hout.logits, tol, checks,
                                           "= logits of BertForSequenceClassification")}

    # Backward, in float64, stage by stage: the loss of the text explain's gradient check, or the head's.
    with _head_weights_expected(args), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some weights of")   # said once, by the first load
        model64 = _model64(model, model_dir, args)
    p64 = model64.state_dict()
    _, caches64 = run_forward(p64, c, ids, types)
    if head is None:
        u, w = upstream_gradients(np.random.default_rng(args.seed), B, T, c.hidden_size)   # (B, H), (B, T, H)
    else:
        # loss = -log softmax(logits)[label]: d loss / d logits = softmax(logits) - onehot(label)
        dlogits, _ = softmax_forward(hout.logits)                                       # (B, K)
        dlogits[np.arange(B), labels] -= 1.0
        u, w = dlogits @ Wc, np.zeros((B, T, c.hidden_size))                            # (B, H), (B, T, H)
    grads, layer_io = run_backward(p64, c, caches64, u, w)
    out64 = model64(input_ids=ids, attention_mask=attention_mask, token_type_ids=types)
    loss = float(np.sum(out64.pooler_output * u) + np.sum(out64.last_hidden_state * w))
    g64 = model64.backward(pooler_output=u, last_hidden_state=w)
    if head is not None:
        loss = float(hout.loss)
        grads["head"] = {"logits": dlogits}
        hgrads = head.backward()                                                        # d loss, the head's own
        names = list(g64)
        fchecks_b = check("BertForSequenceClassification.backward()", np.concatenate([g64[n].ravel() for n in names]),
                          np.concatenate([hgrads["bert." + n].ravel() for n in names]), BACKWARD_TOL, checks,
                          "(softmax - onehot) W_c as d pooler_output: every BERT parameter's gradient "
                          "= BertForSequenceClassification.backward() of its loss")
    bchecks = {"embeddings": {"sum": check("model.inputs_embeds_grad", grads["embeddings"]["sum"],
                                           model64.inputs_embeds_grad, BACKWARD_TOL, checks,
                                           "= model.inputs_embeds_grad after model.backward")},
               "layers": [], "pooler": {}, "head": {} if head is None else {"logits": fchecks_b}}
    for i, (dy, dx) in enumerate(layer_io):
        ref = reference.layer_backward(p64, c, i, dy, caches64[1][i], {})   # the reference's own layer backward
        attn, g = caches64[1][i]["attn"], grads["layers"][i]
        dq = (g["scores"] * attn["scale"]) @ attn["k"]            # in the forward: scores = Q K^T / sqrt(D) + mask
        bchecks["layers"].append({
            "layer_output": check(f"reference.layer_backward({i})", dx, ref, BACKWARD_TOL, checks,
                                  f"d layer input, from the gradients of this layer's stages, = reference.layer_backward({i})"),
            "scores": check(f"attention_backward({i}) d query", dq, g["query"], BACKWARD_TOL, checks,
                            "d scores K / sqrt(D) = d query of npbert.ops attention_backward")})

    # The text explain's gradient check (finite differences), its table kept as text.
    text = io.StringIO()
    gchecks = Checks()
    n_checked = gradient_check(model64, ids, attention_mask, args.seed, text, gchecks, token_type_ids=types,
                               upstream=(u, w))
    for name in gchecks.failed:
        checks.failed.append(f"gradient check: {name}")
    checks.count += gchecks.count

    page_dir = os.path.dirname(os.path.abspath(out_path))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(reference.__file__)))      # npbert/.. (docs/ beside it)
    stages = []
    for section, table in SECTIONS:
        if section == "layer":
            for i in range(c.num_hidden_layers):
                stages += _stage_rows("layer", table, acts["layers"][i], grads["layers"][i], i, page_dir,
                                      repo, _split_checks(fchecks["layers"][i], bchecks["layers"][i]))
        elif section != "head" or head is not None:
            stages += _stage_rows(section, table, acts[section], grads[section], None, page_dir, repo,
                                  _split_checks(fchecks[section], bchecks[section]))
    H, N = c.hidden_size, c.num_attention_heads
    data = {
        "schema": SCHEMA,
        "npbert_version": getattr(npbert, "__version__", None),
        "model": {"description": description, "num_parameters": int(model.num_parameters()),
                  "dtype": args.dtype, "config": {"L": c.num_hidden_layers, "H": H, "N": N, "D": H // N,
                                                  "I": c.intermediate_size, "V": c.vocab_size,
                                                  "P": c.max_position_embeddings, "Y": c.type_vocab_size,
                                                  "hidden_act": c.hidden_act,
                                                  "K": None if head is None else head.config.num_labels}},
        "text": args.text, "text_pair": args.text_pair, "tokenizer": how,
        "tokens": tokens, "input_ids": ids[0].tolist(), "token_type_ids": types[0].tolist(),
        "attention_mask": attention_mask[0].tolist(),
        "dims": DIMS if head is None else {**DIMS, "K": "classes (num_labels)"},
        "loss": {"formula": ("loss = sum(pooler_output * u) + sum(last_hidden_state * w)" if head is None else
                             f"loss = cross_entropy(logits, label={args.label}) = -log softmax(logits)[{args.label}]"),
                 "seed": args.seed, "label": args.label, "value": loss, "u": tensor(u), "w": tensor(w),
                 "dtype": "float64"},
        "stages": stages,
        "gradient_check": {"tensors": n_checked, "count": gchecks.count, "failed": gchecks.failed,
                           "ok": not gchecks.failed, "text": text.getvalue()},
        "checks": {"count": checks.count, "failed": checks.failed, "ok": not checks.failed},
    }
    return data, checks


@contextlib.contextmanager
def _head_weights_expected(args):
    """With --label, BertModel leaving the classifier's weights unused is the plan (the head reads them)."""
    with warnings.catch_warnings():
        if args.label is not None:
            warnings.filterwarnings("ignore", message=r"Some weights of .* were not used when initializing BertModel")
        yield


def _head(args, model_dir):
    """--label: the checkpoint's BertForSequenceClassification in float64, or None without --label."""
    if args.label is None:
        return None
    config_file = None if model_dir is None else os.path.join(model_dir, "config.json")
    architectures = []
    if config_file is not None and os.path.isfile(config_file):
        with open(config_file, encoding="utf-8") as f:
            architectures = json.load(f).get("architectures") or []
    if "BertForSequenceClassification" not in architectures:
        raise UsageError(f"--label needs a checkpoint with a sequence-classification head (config.json "
                         f"\"architectures\": [\"BertForSequenceClassification\"]); "
                         f"{'the random model has none' if model_dir is None else model_dir + ' has ' + str(architectures)}: "
                         "give such a --model DIR, or leave --label out")
    head = npbert.BertForSequenceClassification.from_pretrained(model_dir, dtype=np.float64).eval()
    if args.label >= head.config.num_labels:
        raise UsageError(f"--label {args.label}: the head has num_labels={head.config.num_labels} classes, "
                         f"0 to {head.config.num_labels - 1}")
    return head


def _split_checks(forward, backward):
    """{stage key: {"forward": check or None, "backward": check or None}} (None: nothing to check)."""
    keys = set(forward) | set(backward)
    return {k: {"forward": forward.get(k), "backward": backward.get(k)} for k in keys}


def write_html(args, load_model, tokenize, out=None):
    """`npbert explain --html OUT`: build the data, write the page atomically, print one summary."""
    out = sys.stdout if out is None else out
    start = time.perf_counter()
    path = args.html
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"--html {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"--html {path}: is a folder; give a file name such as explain.html")
    data, checks = build_data(args, path, load_model, tokenize)
    page = render_page(data)
    try:
        with atomic_write(path, "w") as f:
            f.write(page)
    except OSError as e:
        raise CliError(f"--html {path}: could not write the page: {e.strerror or e}") from None
    elapsed = time.perf_counter() - start
    verdict = (f"PASS: {checks.count} checks" if not checks.failed else
               f"FAIL: {len(checks.failed)} of {checks.count} checks failed: {', '.join(checks.failed)}")
    print(f"npbert explain: wrote {path} ({len(page.encode('utf-8')) / 1e6:.1f} MB, {len(data['stages'])} stages, "
          f"{len(data['tokens'])} tokens); {verdict}  ({elapsed:.1f} s)", file=out)
    return 1 if checks.failed else 0
