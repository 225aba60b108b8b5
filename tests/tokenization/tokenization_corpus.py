"""A few MB of English, multilingual and Chinese text, built from this machine.

Sources, each optional except the last (so a fresh machine still gets a corpus):
  1. Python's standard-library sources (code, comments, docstrings), in
     sorted path order;
  2. the text files Debian packages install under /usr/share/doc (copyright,
     README, changelogs, gzip'd or not);
  3. gettext catalogs (/usr/share/locale/*/LC_MESSAGES/*.mo and vim's): the
     translated messages, Chinese first, then every other language (accents,
     Cyrillic, Arabic, Indic scripts, ...);
  4. generated Chinese: sentences of GB2312 level-1 hanzi with Chinese and
     ASCII punctuation, digits and Latin words, from a seeded generator.

The corpus is cached as one UTF-8 file (one text per line) in the system temp
directory, keyed by the builder's version and sizes.
"""

import glob
import gettext
import gzip
import os
import random
import sysconfig
import tempfile

CORPUS_VERSION = 1


def _limit(texts, budget):
    out, size = [], 0
    for t in texts:
        if size >= budget:
            break
        out.append(t)
        size += len(t.encode("utf-8"))
    return out


def _lines(text, max_chars=2000):
    for line in text.splitlines():
        line = line.strip()
        if line:
            yield line[:max_chars]


def python_sources(budget):
    stdlib = sysconfig.get_paths()["stdlib"]
    paths = sorted(glob.glob(os.path.join(stdlib, "*.py")) + glob.glob(os.path.join(stdlib, "*", "*.py")))
    paths = [p for p in paths if "site-packages" not in p and "/test" not in p]

    def gen():
        for path in paths:
            try:
                with open(path, encoding="utf-8") as f:
                    yield from _lines(f.read())
            except (OSError, UnicodeDecodeError):
                continue

    return _limit(gen(), budget)


def debian_docs(budget):
    paths = sorted(glob.glob("/usr/share/doc/*/*"))

    def gen():
        for path in paths:
            if not os.path.isfile(path):
                continue
            try:
                if path.endswith(".gz"):
                    with gzip.open(path, "rb") as f:
                        raw = f.read(200_000)
                elif os.path.splitext(path)[1] in ("", ".txt", ".md", ".rst") or "copyright" in path:
                    with open(path, "rb") as f:
                        raw = f.read(200_000)
                else:
                    continue
                yield from _lines(raw.decode("utf-8"))
            except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
                continue

    return _limit(gen(), budget)


def gettext_catalogs(budget):
    paths = sorted(
        glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo") + glob.glob("/usr/share/vim/*/lang/*/LC_MESSAGES/*.mo")
    )

    def gen(paths):
        for path in paths:
            try:
                with open(path, "rb") as f:
                    catalog = gettext.GNUTranslations(f)._catalog
            except Exception:  # a catalog in a legacy encoding or malformed: skip it
                continue
            for value in catalog.values():
                if isinstance(value, str):
                    yield from _lines(value)

    chinese = [p for p in paths if "/zh" in p]
    others = [p for p in paths if "/zh" not in p]
    # Every other language gets a few lines each, round-robin, so the corpus
    # holds many scripts rather than the first few catalogs.
    return _limit(gen(chinese), budget // 2) + _limit(gen(others[::7]), budget // 2)


def generated_chinese(budget, seed=0):
    """Deterministic Chinese-looking text: GB2312 level-1 hanzi (0xB0A1-0xD7F9)."""
    hanzi = []
    for hi in range(0xB0, 0xD8):
        for lo in range(0xA1, 0xFF):
            try:
                hanzi.append(bytes([hi, lo]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    rng = random.Random(seed)
    punct = ["，", "。", "、", "；", "：", "！", "？", "（", "）", "《", "》", "“", "”", ",", ".", " "]
    latin = ["Python", "BERT", "Linux", "GPU", "2024年", "3.14", "UTF-8", "WordPiece", "e.g.", "Müller"]

    def gen():
        while True:
            parts = []
            for _ in range(rng.randint(3, 12)):
                parts.append("".join(rng.choice(hanzi) for _ in range(rng.randint(1, 8))))
                r = rng.random()
                parts.append(rng.choice(latin) if r < 0.1 else rng.choice(punct))
            yield "".join(parts)

    return _limit(gen(), budget)


def build_corpus(total_mb=4.0):
    """List of lines, about `total_mb` MB of UTF-8, cached in the temp dir."""
    budget = int(total_mb * 1_000_000)
    path = os.path.join(tempfile.gettempdir(), f"npbert_tokenizer_corpus_v{CORPUS_VERSION}_{budget}.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read().split("\n")
    lines = []
    lines += python_sources(budget * 40 // 100)
    lines += debian_docs(budget * 25 // 100)
    lines += gettext_catalogs(budget * 20 // 100)
    size = sum(len(line.encode("utf-8")) for line in lines)
    lines += generated_chinese(max(budget - size, budget * 10 // 100))
    tmp = path + f".{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    os.replace(tmp, path)
    return lines
