"""pytorch-pretrained-bert 0.6.2's optimization.py (BertAdam, the course's BERTAdam, and its
warmup schedules), loaded alone: the package's __init__ wants boto3.  Skips the calling test
when the package is not installed (CI installs it)."""
import importlib.util
import os

import pytest


def load_ppb_optimization():
    spec = importlib.util.find_spec("pytorch_pretrained_bert")
    if spec is None:
        pytest.skip("pytorch-pretrained-bert 0.6.2 not installed (CI installs it)")
    path = os.path.join(spec.submodule_search_locations[0], "optimization.py")
    module_spec = importlib.util.spec_from_file_location("ppb_optimization", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
