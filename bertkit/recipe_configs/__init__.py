"""Each shipped recipe's config, one module per recipe: `bertkit.recipe_configs.<recipe>_config` holds its `Config`
dataclass (and the dataclasses of its sections), with every key's type, default and help.

They live apart from the recipes (recipes/<name>.py, which import them) so that what needs only a config - `bertkit
validate`, `bertkit ls`, and every refusal of a bad key, value or path before a run - imports no torch,
transformers or datasets: those take seconds, a config a few milliseconds. A recipe of the user's own (a .py file,
`bertkit cp classify my_recipe.py`) keeps its Config wherever it likes: it is imported whole.
"""

from __future__ import annotations

import ast
import importlib
from functools import lru_cache

from bertkit.shipped import recipe_names, recipe_path


def config_class(recipe: str) -> type:
    """The Config dataclass of a shipped recipe by name, without importing the recipe."""
    return importlib.import_module(f"{__name__}.{recipe}_config").Config


def is_shipped_recipe(recipe: str) -> bool:
    return recipe in recipe_names()


@lru_cache(maxsize=None)
def summary(recipe: str) -> str:
    """The first line of a recipe's docstring, read from its source (importing it would load its model stack)."""
    docstring = ast.get_docstring(ast.parse(recipe_path(recipe).read_text(encoding="utf-8"))) or ""
    return (docstring.strip().splitlines() or [""])[0]


__all__ = ["config_class", "is_shipped_recipe", "summary"]
