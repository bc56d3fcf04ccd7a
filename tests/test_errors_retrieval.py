"""Bad input on the retrieval surfaces (issue 42) by issue 44's rules, through the installed `bertkit` command: one
`error:` line naming the option or file and the fix, exit 2, no traceback, and nothing loaded or written first when
the mistake can be seen before. (/embed and /rerank's empty texts: test_serve_retrieval.py.)"""

import shutil
from pathlib import Path

import pytest

from test_errors_round3 import DATA, SCRIPT, bertkit, error_line, free_port

TRAIN = DATA / "embed/en_qa/train.jsonl"
DEV = DATA / "embed/en_qa/dev.jsonl"

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")]


@pytest.fixture(scope="module")
def unloadable_embedder(tmp_path_factory, minilm_dir):
    """MiniLM's sentence-transformers folder with its weights cut short: a command that loads the model fails on
    it, so an error about anything else proves it was said before the model loaded."""
    path = tmp_path_factory.mktemp("retrieval-errors") / "embedder"
    shutil.copytree(minilm_dir, path, ignore=shutil.ignore_patterns("model.safetensors"))
    (path / "model.safetensors").write_bytes(Path(minilm_dir, "model.safetensors").read_bytes()[:4096])
    return str(path)


@pytest.mark.parametrize("options, fragments", [
    (["--range-min", "-1"], ["--range-min -1", "at least 0"]),  # BM25 wrote a file; the model said mine.range_min
    (["--range-max", "0"], ["--range-max 0", "at least 1"]),  # an empty window: 0 negatives, exit 0
    (["--range-min", "5", "--range-max", "3"], ["--range-max 3", "at least 6"]),
    (["--margin", "-0.1"], ["--margin -0.1", "0 <= margin < 1"]),  # accepted: a margin that keeps near-positives
    (["--margin", "1"], ["--margin 1.0", "0 <= margin < 1"]),  # every candidate skipped: 0 negatives, exit 0
    (["--batch-size", "0"], ["--batch-size 0", "at least 1"]),  # BM25 ignored it; the model loaded, then refused
])
def test_mine_refuses_a_number_that_cannot_work_before_reading_anything(tmp_path, unloadable_embedder, options,
                                                                         fragments):
    output = tmp_path / "mined.jsonl"
    error_line(bertkit("mine", TRAIN, "-o", output, "--bm25", *options), *fragments)
    error_line(bertkit("mine", TRAIN, "-o", output, "--model", unloadable_embedder, *options), *fragments)
    assert not output.exists()


def test_predict_reads_the_query_file_and_corpus_before_loading_the_model(tmp_path, unloadable_embedder):
    """A missing or empty --corpus and a file with no query column were named only after the model had loaded (on
    a large model, a long wait for a typo)."""
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("\n  \n")
    (tmp_path / "corpus.txt").write_text("A glacier flows downhill.\nThe cat sat on the mat.\n")
    (tmp_path / "no_query.csv").write_text("foo,bar\nx,y\n")
    out = tmp_path / "ranked.jsonl"
    for corpus, fragments in (("missing.txt", ["missing.txt", "check the path"]),
                              ("empty.txt", ["empty.txt is empty"]), ("blank.txt", ["blank.txt is empty"])):
        error_line(bertkit("predict", unloadable_embedder, DEV, "-o", out, "--corpus", tmp_path / corpus),
                   *fragments)
    no_query = ["no_query.csv", "(columns: foo, bar)", "name it 'query'"]
    error_line(bertkit("predict", unloadable_embedder, tmp_path / "no_query.csv", "-o", tmp_path / "v.jsonl"),
               *no_query)
    error_line(bertkit("predict", unloadable_embedder, tmp_path / "no_query.csv", "-o", out, "--corpus",
                       tmp_path / "corpus.txt"), *no_query)
    assert not out.exists() and not (tmp_path / "v.jsonl").exists()


@pytest.mark.parametrize("command", [["predict", "{model}", DEV, "-o", "{tmp}/v.jsonl"], ["serve", "{model}"]])
def test_an_embed_model_with_damaged_weights_is_named(tmp_path, unloadable_embedder, command):
    """(further) An embedding folder whose model.safetensors is cut short (an interrupted copy) got "unexpected
    SafetensorError ... report it", exit 1, naming no file; the other tasks' loads already said it in one line."""
    args = [str(a).format(model=unloadable_embedder, tmp=tmp_path) for a in command]
    error_line(bertkit(*args, "--port", free_port()) if command[0] == "serve" else bertkit(*args),
               f"the weights in {unloadable_embedder} could not be read", "copy / download the model again")
