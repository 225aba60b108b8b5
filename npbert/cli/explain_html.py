"""`npbert explain --html OUT.html`: the walk of `npbert explain` as one self-contained page.

    npbert explain --html OUT.html [--model DIR | --random] [--text "..."] [--text_pair "..."] [--label LABEL]

The page shows, for one sentence (or pair) through one BERT, every tensor of the forward pass
(npbert/cli/explain_stages.py: computed from the parameters by npbert/reference.py, checked against
the model's own outputs), the task head's outputs when the checkpoint has one (explain_heads.py), the
gradient of a stated loss (sum(last_hidden_state * U), or the head's with --label) with respect to
each of them, and the text
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
import os
import re
import sys
import time
import urllib.parse
import warnings

import numpy as np

import npbert
from npbert import reference
from npbert.cli.common import CliError, UsageError, load_checkpoint
from npbert.cli.explain_heads import (head_class, head_inputs, head_loss_backward, head_outputs, output_dims,
                                      output_source, parse_labels, tied_names)
from npbert.cli.explain_page import render_page
from npbert.cli.explain_stages import SECTIONS, run_backward, run_forward, source_line
from npbert.cli.explain_walk import BACKWARD_TOL, Checks, check, concat, gradient_check
from npbert.io._atomic import atomic_write

SCHEMA = "npbert-explain/2"
DIMS = {"B": "batch", "T": "tokens (keys)", "F": "tokens (queries; F = T here)", "H": "hidden size",
        "N": "attention heads", "D": "head size H / N", "I": "intermediate size", "L": "layers",
        "V": "vocab size", "P": "max positions", "Y": "token types"}
HEAD_DIMS = {"K": "the head's classes (num_labels; 2 for next sentence prediction)", "C": "choices"}


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


def _model64(model, model_dir, args, has_pooler):
    """The same weights in float64, for the backward and the gradient check (as the text explain)."""
    if model.dtype == np.float64:
        return model
    if model_dir is None:
        model64 = npbert.BertModel(model.config, seed=args.seed, dtype=np.float64).eval()
        model64.load_state_dict(model.state_dict())
        return model64
    return npbert.BertModel.from_pretrained(args.model or model_dir, dtype=np.float64, add_pooling_layer=has_pooler)


def _row(section, layer, key, module, label, formula, dims, value, grad, check_pair, source, line, function, doc,
         page_dir, repo):
    return {
        "section": section, "layer": layer, "key": key, "module": module, "label": label,
        "formula": formula, "dims": list(dims), "shape": list(value.shape),
        "value": tensor(value), "summary": summary(value), "grad": tensor(grad), "grad_summary": summary(grad),
        "check": check_pair,
        "source": {"file": os.path.relpath(source, repo).replace(os.sep, "/"), "line": line,
                   "function": function, "href": f"{_href(source, page_dir)}#L{line}"},
        "doc": {"page": f"docs/{doc}", "href": _href(os.path.join(repo, "docs", doc), page_dir)},
    }


def _stage_rows(section, table, values, grads, layer, page_dir, repo, checks_by_key):
    rows = []
    for key, module, label, formula, dims, doc, function, piece in table:
        rows.append(_row(
            section, layer, key,
            module.replace("{i}", str(layer)) if layer is not None else module,
            label.replace("[i]", f"[{layer}]").replace("[i+1]", f"[{layer + 1}]") if layer is not None else label,
            formula, dims.split(","), values[key], grads[key], checks_by_key.get(key, {"forward": None, "backward": None}),
            os.path.abspath(inspect.getsourcefile(function)), source_line(function, piece), function.__qualname__,
            doc, page_dir, repo))
    return rows


def _head_rows(head, outputs, grads, check_pair, page_dir, repo):
    """The head's outputs as stages: each linked to the line of the head's forward that computes it."""
    cls = type(head)
    own = sorted({n.split(".")[0] for n in head.state_dict() if not n.startswith(head.base_model_prefix + ".")})
    rows = []
    for name, value in outputs:
        line, code = output_source(cls, name)
        m = re.search(r"self\.([\w.]+)\.forward", code)
        rows.append(_row("head", None, name, m.group(1) if m else ", ".join(own), f"{name}  ({cls.__name__})",
                         code, output_dims(head, name, value.shape), value, grads[name], check_pair,
                         os.path.abspath(inspect.getsourcefile(cls)), line, f"{cls.__qualname__}.forward",
                         "heads.md", page_dir, repo))
    return rows


def page_upstream(seed, B, T, H):
    """U (B, T, H) ~ N(0, 1) from the seed: the page's loss without a head's, sum(last_hidden_state * U)."""
    return np.random.default_rng(seed).standard_normal((B, T, H))


def _model_folder(args):
    if args.model is None or args.random:
        return None
    if not os.path.exists(args.model):
        raise CliError(f"--model {args.model}: no such file or directory", status=2)
    return args.model if os.path.isdir(args.model) else os.path.dirname(args.model) or "."


def _load_head(args, folder):
    """The checkpoint's task head in float64 (config.json "architectures"), or None."""
    cls = head_class(folder)
    if cls is None:
        if args.label is not None or args.next_sentence_label is not None:
            has = "the random model has none" if folder is None else f"{folder} has none (its config.json names no BertFor* class)"
            raise CliError(f"--label needs a checkpoint with a task head (config.json \"architectures\": "
                           f"[\"BertForSequenceClassification\"], [\"BertForQuestionAnswering\"], ...); {has}: give "
                           "such a --model DIR, or leave --label out", status=2)
        return None
    if args.label is None and args.next_sentence_label is not None:
        raise CliError("--next_sentence_label goes with --label (the masked tokens)", status=2)
    return load_checkpoint(cls, folder, "--model", dtype=np.float64).eval()


def build_data(args, out_path, load_model, tokenize, head=None, given_labels=None):
    """Everything the page shows, as the dict embedded in it; and the Checks.  load_model, tokenize:
    the text explain's, passed in by npbert/cli/explain.py (which imports this module).  head,
    given_labels: a float64 model object and its labels (explain.html_page), instead of the
    checkpoint's head and --label."""
    dtype = np.float32 if args.dtype == "float32" else np.float64
    folder = _model_folder(args)
    head = _load_head(args, folder) if head is None else head           # float64; None without a head
    has_pooler = head is None or any(n.startswith(head.base_model_prefix + ".pooler.") for n in head.state_dict())
    with _head_weights_expected(head is not None):
        model, model_dir, description = load_model(args, dtype, add_pooling_layer=has_pooler)
    c = model.config
    if getattr(c, "is_decoder", False):
        raise CliError(f"--model {model_dir}: is_decoder=True (causal attention); the page draws BERT's "
                       "bidirectional attention only", status=2)
    tokens, ids, types, how = pair_tokens(args, model_dir, c, tokenize)
    B, T = ids.shape
    H, N, L = c.hidden_size, c.num_attention_heads, c.num_hidden_layers
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
               "pooler": {} if not has_pooler else
               {"pooled": check("pooler_output", acts["pooler"]["pooled"], out.pooler_output, tol, checks)}}

    # The head (float64): its outputs, from the encoder output drawn above (checked).
    labels, hin, hout, head_check = None, None, None, {"forward": None, "backward": None}
    if head is not None:
        hname = type(head).__name__
        hin = head_inputs(head, ids, types)
        hout = head(**hin, output_hidden_states=True)
        if given_labels is not None or args.label is not None:
            labels = parse_labels(head, args, hout, tokens, model_dir) if given_labels is None else given_labels
            hout = head(**hin, output_hidden_states=True, **labels)
        head_check["forward"] = check(
            f"{hname}.hidden_states[{L}]", acts["layers"][-1]["layer_output"], hout.hidden_states[-1].reshape(B, T, H),
            tol, checks, f"the encoder output {hname} read (its hidden_states[{L}], float64) = the last layer's output above")

    # Backward, in float64, stage by stage: sum(last_hidden_state * U), or the head's loss.
    with _head_weights_expected(head is not None), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some weights of")   # said once, by the first load
        model64 = _model64(model, model_dir, args, has_pooler)
    p64 = model64.state_dict()
    _, caches64 = run_forward(p64, c, ids, types)
    out64 = model64(input_ids=ids, attention_mask=attention_mask, token_type_ids=types)
    loss_checks, terms, U = [], None, None
    hgrads_out = None
    if labels is None:
        U = page_upstream(args.seed, B, T, H)                             # (B, T, H)
        u, w = None, U
        loss = float(np.sum(out64.last_hidden_state * U))
        g64 = model64.backward(last_hidden_state=U)
    else:
        terms, means, dout, hgrads, hgrads_out, u, w, loss = head_loss_backward(
            head, {**hin, **labels}, hout, (B, T, H), args.label or "", head_check, loss_checks, checks)
        hname = type(head).__name__
        g64 = model64.backward(last_hidden_state=w, **({} if u is None else {"pooler_output": u}))
        prefix, tied = head.base_model_prefix + ".", tied_names(head)
        bert = [n for n in g64 if prefix + n not in tied]
        left_out = ", ".join(sorted(n[len(prefix):] for n in tied if n.startswith(prefix)))
        loss_checks.append(check(
            f"{hname}.backward()", concat(g64, bert), concat(hgrads, [prefix + n for n in bert]),
            BACKWARD_TOL, checks, f"what {hname}.backward() hands to BERT, as d last_hidden_state and d pooler_output: "
            f"every BERT parameter's gradient from BertModel.backward of it = {hname}.backward()'s"
            + (f" (but {left_out}: the head uses it too, so its gradient there holds both uses)" if left_out else "")))
    grads, layer_io = run_backward(p64, c, caches64, u, w)
    bchecks = {"embeddings": {"sum": check("model.inputs_embeds_grad", grads["embeddings"]["sum"],
                                           model64.inputs_embeds_grad, BACKWARD_TOL, checks,
                                           "= model.inputs_embeds_grad after model.backward")},
               "layers": [], "pooler": {}}
    for i, (dy, dx) in enumerate(layer_io):
        ref = reference.bert_layer_backward(p64, c, i, dy, caches64[1][i], {})   # the reference's own layer backward
        attn, g = caches64[1][i]["attn"], grads["layers"][i]
        dq = (g["scores"] * attn["scale"]) @ attn["k"]            # in the forward: scores = Q K^T / sqrt(D) + mask
        bchecks["layers"].append({
            "layer_output": check(f"reference.bert_layer_backward({i})", dx, ref, BACKWARD_TOL, checks,
                                  f"d layer input, from the gradients of this layer's stages, = reference.bert_layer_backward({i})"),
            "scores": check(f"attention_backward({i}) d query", dq, g["query"], BACKWARD_TOL, checks,
                            "d scores K / sqrt(D) = d query of npbert.ops attention_backward")})

    # The text explain's gradient check (finite differences) of the same loss, its table kept as text.
    text = io.StringIO()
    gchecks = Checks()
    if labels is None:
        n_checked = gradient_check(model64, ids, attention_mask, args.seed, text, gchecks, token_type_ids=types,
                                   upstream={"last_hidden_state": U}, symbols={"last_hidden_state": "U"})
    else:
        n_checked = gradient_check(head, ids, attention_mask, args.seed, text, gchecks, token_type_ids=types,
                                   labels=labels)
    for name in gchecks.failed:
        checks.failed.append(f"gradient check: {name}")
    checks.count += gchecks.count

    page_dir = os.path.dirname(os.path.abspath(out_path))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(reference.__file__)))      # npbert/.. (docs/ beside it)
    stages = []
    for section, table in SECTIONS:
        if section == "layer":
            for i in range(L):
                stages += _stage_rows("layer", table, acts["layers"][i], grads["layers"][i], i, page_dir,
                                      repo, _split_checks(fchecks["layers"][i], bchecks["layers"][i]))
        elif acts[section] is not None:
            stages += _stage_rows(section, table, acts[section], grads[section], None, page_dir, repo,
                                  _split_checks(fchecks[section], bchecks[section]))
    head_info, sizes = None, {}
    if head is not None:
        outputs = head_outputs(head, hout)
        dout = {n: np.zeros(v.shape) for n, v in outputs} if labels is None else dout
        rows = _head_rows(head, outputs, dout, head_check, page_dir, repo)
        stages += rows
        for r in rows:
            sizes.update({d: n for d, n in zip(r["dims"], r["shape"]) if d in ("K", "C")})
        head_info = {"class": type(head).__name__, "outputs": [n for n, _ in outputs], "pooler": has_pooler}
    dims = dict(DIMS)
    dims.update({d: HEAD_DIMS[d] for d in ("K", "C") if d in sizes})
    data = {
        "schema": SCHEMA,
        "npbert_version": getattr(npbert, "__version__", None),
        "model": {"description": description, "num_parameters": int(model.num_parameters()),
                  "dtype": args.dtype, "head": head_info,
                  "config": {"L": L, "H": H, "N": N, "D": H // N, "I": c.intermediate_size, "V": c.vocab_size,
                             "P": c.max_position_embeddings, "Y": c.type_vocab_size, "hidden_act": c.hidden_act,
                             "K": sizes.get("K"), "C": sizes.get("C")}},
        "text": args.text, "text_pair": args.text_pair, "tokenizer": how,
        "tokens": tokens, "input_ids": ids[0].tolist(), "token_type_ids": types[0].tolist(),
        "attention_mask": attention_mask[0].tolist(),
        "dims": dims,
        "loss": {"formula": ("loss = sum(last_hidden_state * U)" if labels is None else
                             "loss = " + " + ".join(f"{t.weight:g} * mean_{t.name}" for t in terms)),
                 "value": loss, "seed": args.seed, "dtype": "float64",
                 "labels": None if labels is None else {k: np.asarray(v).tolist() for k, v in labels.items()},
                 "terms": None if terms is None else [
                     {"name": t.name, "weight": t.weight, "count": t.count, "mean": means[t.name]} for t in terms],
                 "U": None if U is None else tensor(U),
                 "upstream": {"last_hidden_state": tensor(w), "pooler_output": None if u is None else tensor(u)},
                 "checks": loss_checks},
        "stages": stages,
        "gradient_check": {"tensors": n_checked, "count": gchecks.count, "failed": gchecks.failed,
                           "ok": not gchecks.failed, "text": text.getvalue(),
                           "of": "BertModel" if labels is None else type(head).__name__},
        "checks": {"count": checks.count, "failed": checks.failed, "ok": not checks.failed},
    }
    return data, checks


@contextlib.contextmanager
def _head_weights_expected(has_head):
    """With a task head, BertModel leaving the head's weights unused is the plan (the head reads them)."""
    with warnings.catch_warnings():
        if has_head:
            warnings.filterwarnings("ignore", message=r"Some weights of .* were not used when initializing BertModel")
        yield


def _split_checks(forward, backward):
    """{stage key: {"forward": check or None, "backward": check or None}} (None: nothing to check)."""
    keys = set(forward) | set(backward)
    return {k: {"forward": forward.get(k), "backward": backward.get(k)} for k in keys}


def write_html(args, load_model, tokenize, out=None, head=None, labels=None):
    """`npbert explain --html OUT`: build the data, write the page atomically, print one summary."""
    out = sys.stdout if out is None else out
    start = time.perf_counter()
    path = args.html
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"--html {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"--html {path}: is a folder; give a file name such as explain.html")
    data, checks = build_data(args, path, load_model, tokenize, head, labels)
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
