"""What `from_pretrained` does with a model hub's name and keywords: npbert reads local directories
only (it never downloads), so a hub name that is not a directory is an error saying how to make
one, and the keywords that only concern downloading are accepted and do nothing.

    HUB_ONLY_KEYWORDS        cache_dir, force_download, local_files_only, revision, proxies, token, ...
    hub_name_message(path, what, auto_class)   the error's text for a path that is not there
"""
import os
import re

# from_pretrained keywords that only concern downloading from a model hub: accepted, no effect
# offline (npbert reads local directories only).  `use_fast`: npbert has one tokenizer, whose
# fast path is chosen by npbert.set_path; `trust_remote_code`: npbert never runs code from a
# checkpoint; `mirror`, `subfolder` of 4.x hub calls, `_from_pipeline`, `_commit_hash`: bookkeeping.
HUB_ONLY_KEYWORDS = ("cache_dir", "force_download", "local_files_only", "revision", "proxies", "token",
                     "use_auth_token", "resume_download", "trust_remote_code", "use_fast", "mirror",
                     "_from_pipeline", "_commit_hash")

_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def looks_like_hub_name(path):
    """True for "bert-base-uncased" or "dbmdz/bert-large-cased-finetuned-conll03-english"."""
    return bool(_HUB_NAME.fullmatch(os.fspath(path)))


def hub_name_message(path, what, auto_class):
    """The sentence that follows "'<path>' is not a directory." when `path` looks like a hub name:
    how to make a local directory of that model with transformers, on a machine with internet."""
    if not looks_like_hub_name(path):
        return ""
    return (f" npbert loads {what} from local directories only (it never downloads). To make one from the hub "
            f"model '{path}', on a machine with transformers and internet: "
            f"transformers.{auto_class}.from_pretrained('{path}').save_pretrained('DIR') "
            f"(or `huggingface-cli download {path} --local-dir DIR`); then pass DIR.")


def pop_hub_keywords(kwargs):
    """Remove the hub-only keywords from `kwargs` (in place)."""
    for name in HUB_ONLY_KEYWORDS:
        kwargs.pop(name, None)
