"""A directory's manifest: every file's size and SHA-256, written last, checked on load.

    manifest.json   {"format": "npbert-manifest-1",
                     "files": {"model.safetensors": {"size": 1234, "sha256": "9f86d0..."}, ...}}

A checkpoint directory is complete when its manifest is there (the writer puts it in last)
and intact when every file it lists has the listed size and hash.  A flipped bit, a truncated
file, a file swapped in from another checkpoint or a missing one is found before anything is
loaded, and the error names the file and what differs.  Files not listed (a README a user
added) are ignored.

save_pretrained writes one too, listing its weights file only (config.json is left out: users
edit it by hand, and its shapes are checked against the weights anyway); from_pretrained checks
it when it is there, after the checks that need no manifest, and a folder without one loads as
before.  transformers ignores the file.
"""
import hashlib
import json
import os

from npbert.io._atomic import atomic_write
from npbert.io.errors import CheckpointError

MANIFEST = "manifest.json"
FORMAT = "npbert-manifest-1"
_CHUNK = 1 << 20


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def write_manifest(directory, names=None, keep_from=None):
    """Write `directory/manifest.json` listing every regular file in `directory` (not hidden
    ones, not the manifest itself), or only `names`, atomically.  `keep_from`: a directory whose
    manifest's other entries are kept (a save_pretrained into a folder that has one: its files
    that this save does not replace stay listed).  Returns the files dict."""
    files = {}
    if keep_from is not None and os.path.isfile(os.path.join(keep_from, MANIFEST)):
        try:
            files = dict(read_manifest(keep_from) or {})
        except CheckpointError:
            files = {}                       # an unreadable manifest is replaced, not kept
    for name in sorted(os.listdir(directory) if names is None else names):
        path = os.path.join(directory, name)
        if name == MANIFEST or name.startswith(".") or not os.path.isfile(path):
            continue
        files[name] = {"size": os.path.getsize(path), "sha256": sha256_file(path)}
    with atomic_write(os.path.join(directory, MANIFEST), "w") as f:
        json.dump({"format": FORMAT, "files": files}, f, indent=2, sort_keys=True)
        f.write("\n")
    return files


def read_manifest(directory):
    """The files dict of `directory/manifest.json`, or None when there is no manifest."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable manifest ({e})") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(files, dict):
        raise CheckpointError(f"{path}: not an npbert manifest (expected an object with format {FORMAT!r} and files)")
    for name, entry in files.items():
        if (not isinstance(entry, dict) or type(entry.get("size")) is not int or not isinstance(entry.get("sha256"), str)
                or os.path.basename(name) != name):
            raise CheckpointError(f"{path}: entry {name!r} is malformed (expected a plain file name with an integer "
                                  "size and a sha256 string)")
    return files


def verify_manifest(directory, required=True, names=None):
    """Check every file `directory/manifest.json` lists: present, same size, same SHA-256.

    Raises CheckpointError naming the first file that differs (sizes are compared for all
    files before any hash is computed, so a truncated file is found without reading the
    rest).  With `required=False` a directory without a manifest passes (returns None)."""
    files = read_manifest(directory)
    if files is None:
        if required:
            raise CheckpointError(f"{os.path.join(directory, MANIFEST)}: missing; {directory} is not a complete "
                                  "checkpoint (its manifest is written last)")
        return None
    if names is not None:                    # only these files (a loader checks the ones it reads)
        files = {n: e for n, e in files.items() if n in names}
    for name, entry in files.items():
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise CheckpointError(f"{path}: missing (listed in {MANIFEST})")
        size = os.path.getsize(path)
        if size != entry["size"]:
            raise CheckpointError(f"{path}: {size} bytes, {MANIFEST} says {entry['size']} (truncated or replaced)")
    for name, entry in files.items():
        path = os.path.join(directory, name)
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            raise CheckpointError(f"{path}: SHA-256 {digest[:16]}... differs from the {entry['sha256'][:16]}... "
                                  f"in {MANIFEST} (the file changed after it was saved: corrupt or replaced)")
    return files
