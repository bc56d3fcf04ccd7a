"""The model files in a run directory: config.json read with errors that name it, whether a .safetensors file is
whole, which checkpoint-* is the newest complete one (a kill while saving leaves one partial)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ..errors import BertkitError
from .files import _read_json

WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


def read_config_json(path: Path) -> dict:
    """config.json as a dict; BertkitError naming the file when it is not valid JSON or has no model_type."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        config = None
    except json.JSONDecodeError as error:
        raise BertkitError(f"{path} is not valid JSON (line {error.lineno} column {error.colno}: {error.msg}) — "
                           "restore it, or re-save the model with save_pretrained") from None
    if not isinstance(config, dict):
        raise BertkitError(f"{path} is not a JSON object of model settings — restore it, or re-save the model "
                           "with save_pretrained")
    if not config.get("model_type"):
        raise BertkitError(f'{path} has no model_type — add "model_type": "bert" (or the right type), or re-save '
                           "the model with save_pretrained")
    return config


def model_task(model_dir: str) -> str | None:
    """The architecture a saved checkpoint was fine-tuned for, e.g. 'BertForSequenceClassification'."""
    config_file = Path(model_dir) / "config.json"
    if not config_file.exists():
        return None
    architectures = read_config_json(config_file).get("architectures") or [None]
    return architectures[0]


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with a .safetensors file without loading it (None if its header and size agree): empty,
    truncated (shorter than its header promises) or not a safetensors file."""
    size = path.stat().st_size
    if size == 0:
        return "is empty (0 bytes)"
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return f"is truncated ({size} bytes, shorter than a safetensors header)"
        (header_size,) = struct.unpack("<Q", head)
        if 8 + header_size > size:
            return f"is truncated ({size:,} bytes, its header alone says {8 + header_size:,})"
        try:
            header = json.loads(handle.read(header_size))
            end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError):
            return "is not a safetensors file (its header is unreadable)"
    if 8 + header_size + end > size:
        return f"is truncated ({size:,} of the {8 + header_size + end:,} bytes its header promises)"
    return None


def check_weights(model_dir: Path) -> None:
    """Every *.safetensors file whole, and some weights there at all."""
    weights = sorted(model_dir.glob("*.safetensors"))
    for path in weights:
        problem = safetensors_problem(path)
        if problem:
            raise BertkitError(f"{path} {problem} — the save was interrupted or the copy is incomplete: rerun the "
                               "run (or resume=true), or copy / download the model again")
    if not weights and not list(model_dir.glob("*.bin")):
        raise BertkitError(f"{model_dir} has no model weights (model.safetensors) — point at the directory the run "
                           "saved its final model to, or save the model with save_pretrained")


def checkpoint_problem(checkpoint: Path, needs_optimizer: bool = True) -> str | None:
    """What a checkpoint lacks to be resumed from (None if complete): a kill while saving leaves it partial."""
    if _read_json(checkpoint / "trainer_state.json") is None:
        return "trainer_state.json is missing or unreadable"
    weights = [name for name in WEIGHT_FILES if (checkpoint / name).is_file()]
    if not weights:
        return "it has no model weights"
    for name in weights:
        if name.endswith(".safetensors"):
            problem = safetensors_problem(checkpoint / name)
            if problem:
                return f"{name} {problem}"
    if needs_optimizer and not (checkpoint / "optimizer.pt").is_file():
        return "optimizer.pt is missing"
    return None


def checkpoints_newest_first(run_dir: Path) -> list[Path]:
    found = [p for p in Path(run_dir).glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]), reverse=True)


def last_complete_checkpoint(run_dir: Path) -> Path | None:
    for checkpoint in checkpoints_newest_first(run_dir):
        if checkpoint_problem(checkpoint) is None:
            return checkpoint
    return None


__all__ = ["read_config_json", "model_task", "WEIGHT_FILES", "safetensors_problem", "check_weights",
           "checkpoint_problem", "checkpoints_newest_first", "last_complete_checkpoint"]
