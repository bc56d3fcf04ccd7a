"""Every encoder family (issue 26) through ner, qa, choice, mlm and embed: each run finishes on a tiny random checkpoint
of the family with its real kind of tokenizer, predict and evaluate work on it, and stock transformers (in a subprocess
that never imports bertkit) loads each saved directory with the outputs bertkit's own loader gives. Family-specific
pieces are checked where they differ: add_prefix_space for byte-level BPE words (NER), answer offsets without the
space a BPE token carries (QA), whole-word masking from each tokenizer's own word marks (MLM); an embed run's folder
loads in stock sentence-transformers with bertkit predict's vectors."""

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from typer.testing import CliRunner

from bertkit import (BertkitForMaskedLM, BertkitForMultipleChoice, BertkitForQuestionAnswering,
                     BertkitForTokenClassification)
from bertkit.checkpoints import load_finetuned, load_tokenizer
from bertkit.cli import app
from families import FAMILIES, TOKENIZER_KIND, tiny_checkpoint

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"
pytestmark = pytest.mark.usefixtures("one_thread")
TINY = ["precision=fp32", "train.max_steps=2", "train.per_device_train_batch_size=8", "train.logging_steps=1",
        "train.learning_rate=1.0e-3", "data.max_length=64"]
RECIPES = ("ner", "qa", "choice", "mlm")
HEADS = {"ner": BertkitForTokenClassification, "qa": BertkitForQuestionAnswering, "choice": BertkitForMultipleChoice,
         "mlm": BertkitForMaskedLM}


def conll_head(source: Path, target: Path, sentences: int) -> str:
    target.write_text("\n\n".join(source.read_text(encoding="utf-8").split("\n\n")[: sentences + 1]) + "\n")
    return str(target)


def lines_head(source: Path, target: Path, count: int) -> str:
    target.write_text("\n".join(source.read_text(encoding="utf-8").splitlines()[:count]) + "\n")
    return str(target)


def squad_head(source: Path, target: Path, articles: int) -> str:
    data = json.loads(source.read_text(encoding="utf-8"))
    target.write_text(json.dumps({**data, "data": data["data"][:articles]}), encoding="utf-8")
    return str(target)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Small train / dev files of each recipe, cut from the shipped samples."""
    root = tmp_path_factory.mktemp("task-data")
    return {
        "ner": (conll_head(DATA / "ner/en/train.conll", root / "train.conll", 24),
                conll_head(DATA / "ner/en/dev.conll", root / "dev.conll", 8)),
        "qa": (squad_head(DATA / "qa/en/train.json", root / "train.json", 3),
               squad_head(DATA / "qa/en/dev.json", root / "dev.json", 2)),
        "choice": (lines_head(DATA / "choice/en/train.jsonl", root / "train.jsonl", 24),
                   lines_head(DATA / "choice/en/dev.jsonl", root / "dev.jsonl", 8)),
        "mlm": (lines_head(DATA / "corpus/en_medical.txt", root / "corpus.txt", 120), None),
        "embed": (lines_head(DATA / "embed/en_qa/train.jsonl", root / "pairs.jsonl", 16),
                  lines_head(DATA / "embed/en_qa/dev.jsonl", root / "pairs_dev.jsonl", 8)),
    }


EXTRA = {"qa": ["data.doc_stride=16", "data.max_question_length=24"], "mlm": ["head_warmup_steps=0"],
         "embed": ["pooling=mean"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, files):
    """(family, recipe) -> the run directory, made on first use (one checkpoint per family)."""
    root, made, checkpoints = tmp_path_factory.mktemp("task-runs"), {}, {}

    def get(family: str, recipe: str) -> Path:
        if (family, recipe) not in made:
            if family not in checkpoints:
                checkpoints[family] = tiny_checkpoint(family, root / "checkpoints" / family)
            train, dev = files[recipe]
            out = root / f"{recipe}-{family}"
            result = runner.invoke(app, ["run", recipe, f"model={checkpoints[family]}", f"data.train={train}",
                                         *([f"data.eval={dev}"] if dev else []), f"output_dir={out}", "llrd=0.9",
                                         *TINY, *EXTRA.get(recipe, [])])
            assert result.exit_code == 0, result.output
            made[family, recipe] = out
        return made[family, recipe]
    return get


def masked_lines(tmp_path: Path, family: str, run: Path) -> str:
    mask = transformers.AutoTokenizer.from_pretrained(run).mask_token
    path = tmp_path / "masked.txt"
    path.write_text(f"the patient was given {mask} for the pain .\nblood {mask} was normal\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_recipe_runs_predicts_and_evaluates(runs, files, family, recipe, tmp_path):
    run = runs(family, recipe)
    config = json.loads((run / "config.json").read_text())
    assert config["model_type"] == family and config["architectures"][0].endswith(
        HEADS[recipe].__name__.removeprefix("Bertkit"))
    train, dev = files[recipe]
    source = masked_lines(tmp_path, family, run) if recipe == "mlm" else dev
    result = runner.invoke(app, ["predict", str(run), source, "-o", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert rows
    if recipe == "mlm":
        assert all(len(row["masks"]) == 1 and len(row["masks"][0]) == 5 for row in rows)
    result = runner.invoke(app, ["evaluate", str(run), dev or train])
    assert result.exit_code == 0, result.output


STOCK_SCRIPT = r"""
import json, sys
import torch, transformers
AUTO = {"ner": transformers.AutoModelForTokenClassification, "qa": transformers.AutoModelForQuestionAnswering,
        "choice": transformers.AutoModelForMultipleChoice, "mlm": transformers.AutoModelForMaskedLM}
outputs = {}
for key, run_dir in json.loads(sys.argv[1]).items():
    recipe = key.split("/")[1]
    tokenizer = transformers.AutoTokenizer.from_pretrained(run_dir)
    model = AUTO[recipe].from_pretrained(run_dir).eval()
    inputs = tokenizer(["the bridge was built in 1982", "John lives in Paris"],
                       ["who built it", "where"], padding=True, return_tensors="pt")
    if recipe == "choice":
        inputs = {key: value.unsqueeze(0) for key, value in inputs.items()}  # one question, two options
    with torch.no_grad():
        out = model(**inputs)
    outputs[key] = [getattr(out, name).tolist() for name in ("logits", "start_logits", "end_logits")
                       if getattr(out, name, None) is not None]
print(json.dumps({"outputs": outputs, "bertkit": "bertkit" in sys.modules}))
"""


@pytest.fixture(scope="module")
def stock(runs):
    """Every run of every family loaded by stock transformers in one subprocess (one interpreter start)."""
    dirs = {f"{family}/{recipe}": str(runs(family, recipe)) for family in FAMILIES for recipe in RECIPES}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-c", STOCK_SCRIPT, json.dumps(dirs)], capture_output=True, text=True,
                          env=env, cwd="/", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads(done.stdout.strip().splitlines()[-1])
    assert not outputs["bertkit"]
    return outputs["outputs"]


@pytest.mark.parametrize("family", FAMILIES)
def test_stock_transformers_loads_every_run_with_the_same_outputs(runs, stock, family):
    for recipe in RECIPES:
        run_dir = str(runs(family, recipe))
        tokenizer = load_tokenizer(run_dir)
        model = (load_finetuned(HEADS[recipe], run_dir, recipe) if recipe != "mlm" else
                 transformers.AutoModelForMaskedLM.from_pretrained(run_dir).eval())
        inputs = tokenizer(["the bridge was built in 1982", "John lives in Paris"], ["who built it", "where"],
                           padding=True, return_tensors="pt")
        if recipe == "choice":
            inputs = {key: value.unsqueeze(0) for key, value in inputs.items()}
        if "token_type_ids" in inputs and "token_type_ids" not in inspect.signature(model.forward).parameters:
            inputs.pop("token_type_ids")
        with torch.no_grad():
            out = model(**inputs)
        ours = [getattr(out, name) for name in ("logits", "start_logits", "end_logits")
                if getattr(out, name, None) is not None]
        real = inputs["attention_mask"].bool()
        for mine, theirs in zip(ours, map(torch.tensor, stock[f"{family}/{recipe}"])):
            if recipe != "choice":  # per-token outputs: bertkit's unpadded BERT leaves padding positions unscored
                mine, theirs = mine[real], theirs[real]
            torch.testing.assert_close(mine.float(), theirs, atol=1e-4, rtol=1e-4,
                                       msg=lambda text: f"{family} {recipe}: {text}")


# ------------------------------------------------------------------------------------------ what differs


@pytest.mark.parametrize("family", [f for f in FAMILIES if TOKENIZER_KIND[f] == "bpe"])
def test_ner_words_get_a_prefix_space_with_byte_level_bpe(runs, family):
    """Every pre-split word starts with Ġ (its own word), not glued to the one before it."""
    tokenizer = load_tokenizer(str(runs(family, "ner")), words=True)
    encoded = tokenizer([["John", "lives", "in", "Paris"]], is_split_into_words=True, add_special_tokens=False)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    word_ids = encoded.word_ids(0)
    starts = [token for token, word, before in zip(tokens, word_ids, [None, *word_ids]) if word != before]
    assert all(token.startswith("\u0120") for token in starts), tokens


def test_qa_answers_never_start_with_a_space(runs, files):
    """ModernBERT's byte-level offsets include the space before a word: answers are cut without it."""
    from bertkit.tasks.qa import encode, read_examples

    tokenizer = load_tokenizer(str(runs("modernbert", "qa")))
    examples = read_examples(files["qa"][1])[0][:4]
    windows = encode(tokenizer, examples, max_length=64, doc_stride=16, max_question_length=24)
    for w, offsets in enumerate(windows.offsets):
        context = examples[windows.example_index[w]].context
        words = [(start, end) for start, end in filter(None, offsets) if context[start:end].strip()]
        assert words and all(not context[start].isspace() for start, _ in words)


@pytest.mark.parametrize("family", FAMILIES)
def test_whole_word_masking_follows_each_tokenizer_s_word_marks(runs, family):
    from bertkit.tasks.mlm.whole_word_masking import piece_marker, wordpiece_word_ids

    tokenizer = load_tokenizer(str(runs(family, "mlm")))
    text = "unbelievably hypertension treatments"
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])
    word_ids = wordpiece_word_ids(tokens, marker=piece_marker(tokenizer))
    # three words, however many pieces each became
    assert len(set(word_ids)) == 3 and word_ids == sorted(word_ids), (tokens, word_ids)


def test_vocabulary_extension_needs_a_wordpiece_vocabulary(runs, files, tmp_path):
    """vocab.extend adds WordPiece words: refused in one line for byte-level BPE and SentencePiece tokenizers, and
    run on a WordPiece family that transformers runs (ELECTRA)."""
    from helpers import one_line_error

    corpus = files["mlm"][0]
    roberta = runs("roberta", "mlm")  # a finished mlm run is a checkpoint with an MLM head
    result = runner.invoke(app, ["run", "mlm", f"model={roberta}", f"data.train={corpus}", "vocab.extend=true",
                                 f"output_dir={tmp_path / 'bpe'}", *TINY])
    one_line_error(result, 2, "vocab.extend", "WordPiece", "vocab.extend=false")
    result = runner.invoke(app, ["run", "mlm", f"model={runs('electra', 'mlm')}", f"data.train={corpus}",
                                 "vocab.extend=true", "vocab.min_frequency=2", f"output_dir={tmp_path / 'wp'}", *TINY,
                                 "head_warmup_steps=0"])
    assert result.exit_code == 0 and "vocabulary extended by" in result.output, result.output


# ------------------------------------------------------------------------------------------ embed


EMBED_STOCK_SCRIPT = r"""
import json, sys
import transformers
from sentence_transformers import SentenceTransformer
texts, outputs = json.loads(sys.argv[2]), {}
for family, run_dir in json.loads(sys.argv[1]).items():
    model = SentenceTransformer(run_dir)  # no trust_remote_code
    outputs[family] = {"vectors": model.encode(texts, prompt_name="query").tolist(),
                       "backbone": type(model[0].auto_model).__name__,
                       "auto": type(transformers.AutoModel.from_pretrained(run_dir)).__name__}
print(json.dumps({"outputs": outputs, "bertkit": "bertkit" in sys.modules}))
"""
EMBED_TEXTS = ["Who designed the Millrace Bridge?", "How many people live in Upperfold today?", "bridge"]


@pytest.fixture(scope="module")
def embed_stock(runs):
    """Every family's embed run loaded by stock sentence-transformers and transformers in one subprocess."""
    dirs = {family: str(runs(family, "embed")) for family in FAMILIES}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-c", EMBED_STOCK_SCRIPT, json.dumps(dirs), json.dumps(EMBED_TEXTS)],
                          capture_output=True, text=True, env=env, cwd="/", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads(done.stdout.strip().splitlines()[-1])
    assert not outputs["bertkit"]
    return outputs["outputs"]


@pytest.mark.parametrize("family", FAMILIES)
def test_embed_runs_on_every_family_and_loads_in_stock_sentence_transformers(runs, files, embed_stock, family,
                                                                            tmp_path):
    run = runs(family, "embed")
    config = json.loads((run / "config.json").read_text())
    assert config["model_type"] == family and not config["architectures"][0].startswith("Bertkit")
    assert all(m["type"].startswith("sentence_transformers.") for m in json.loads((run / "modules.json").read_text()))
    stock = embed_stock[family]
    assert stock["backbone"] == stock["auto"] == config["architectures"][0]  # the family's own transformers class
    trained_on = json.loads((run / "metrics.json").read_text())["implementation"]
    assert trained_on.startswith("bertkit") == (family == "bert"), trained_on  # BERT on bertkit's own, unpadded
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"query": text}) + "\n" for text in EMBED_TEXTS), encoding="utf-8")
    result = runner.invoke(app, ["predict", str(run), str(queries), "-o", str(tmp_path / "v.jsonl")])
    assert result.exit_code == 0, result.output
    ours = [json.loads(line)["embedding"] for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(stock["vectors"]), atol=1e-4, rtol=1e-4)
    result = runner.invoke(app, ["evaluate", str(run), files["embed"][1]])
    assert result.exit_code == 0 and "ndcg@10" in result.output, result.output
