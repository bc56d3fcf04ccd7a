"""The names of the files a run leaves in its output_dir, and how they are written and read: JSON (atomically where
a reader must never see half a file), the resolved config, the content digest the completion record lists."""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import os
from pathlib import Path

import yaml

from ..config import save_config

RECORD_FILE = "bertkit_run.json"
FINGERPRINT_FILE = "bertkit_fingerprint.json"
LOCK_FILE = ".bertkit.lock"
RUN_CONFIG_FILE = "bertkit_config.yaml"
LOG_FILE = "train.log"  # bertkit/console.py
RECORD_FORMAT = 1
METRICS_FILE = "metrics.json"
CURVE_FILE = "training_curve.png"
LOG_HISTORY_FILE = "log_history.json"  # every logged train loss and dev evaluation, by step (bertkit diagnose)

EDITABLE = {"README.md"}  # recorded, but a user may improve the model card before pushing
# The log is not part of what the run made: lines go on after the record (the summary, a push), and resume=true
# appends to it. It never changes how the directory loads, so leaving it out checks nothing less.
NOT_RECORDED = {RECORD_FILE, LOCK_FILE, LOG_FILE}
# Files that change what a directory loads as: one of these that the record does not list makes the directory mixed.
LOADING_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.bin", "config.json", "tokenizer.json",
                    "tokenizer_config.json", "vocab.txt", "vocab.json", "merges.txt", "special_tokens_map.json",
                    "added_tokens.json", "adapter_config.json", "*.model")
# Config keys that say how far, how often or where a continued run goes: resume may change them.
CONTINUATION_KEYS = {"resume", "overwrite", "push", "output_dir", "train.num_train_epochs", "train.max_steps",
                     "train.save_steps", "train.save_strategy", "train.save_total_limit", "train.logging_steps",
                     "train.logging_strategy", "train.dataloader_num_workers"}
# Names a bertkit run (or Trainer) writes at the top of its output_dir: what overwrite=true removes.
RUN_OUTPUTS = ("*.safetensors", "*.safetensors.index.json", "config.json", "generation_config.json", "tokenizer.json",
               "tokenizer_config.json", "vocab.txt", "special_tokens_map.json", "added_tokens.json",
               "training_args.bin", "pytorch_model.bin", "adapter_config.json", "metrics.json", CURVE_FILE, "README.md",
               RUN_CONFIG_FILE, "classification_report.txt", "confusion_matrix.json", "*_results.json",
               "trainer_state.json", LOG_HISTORY_FILE, FINGERPRINT_FILE, RECORD_FILE, LOG_FILE, "*.tmp")

# Names of run outputs that a person may well have written themselves (notes, a picture): overwrite=true removes one
# only when the completion record lists it, or (no record: an unfinished run) when it is newer than the run's
# fingerprint, which a run writes when training begins (rundir/lifecycle.py old_run_files).
USER_NAMED = ("README.md", "*.png")

# Folders a run trains in beside its checkpoint-* ones: a search's trials and a seed band's seeds
# (bertkit/search.py), each removed when it ends; one left by a kill goes with overwrite=true.
RUN_FOLDERS = ("trial-*", "seed-*")


def file_digest(path: Path) -> dict:
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return {"size": path.stat().st_size, "sha256": digest}


def write_json_atomic(path: Path, data) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def write_json(path: Path, data, what: str = "the metrics") -> None:
    """JSON for people to read (metrics.json, an -o result): indented, non-ASCII kept, arrays as lists; written
    through a temporary file renamed when complete (rundir/outputs.py), so a full disk leaves no half file."""
    from .outputs import write_text_atomic

    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=_jsonable) + "\n", what)


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def read_run_config(output_dir: str) -> dict:
    """The resolved config a run saved beside its model ({} if there is none)."""
    path = Path(output_dir) / RUN_CONFIG_FILE
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}


def save_run_config(cfg, output_dir: str, recipe: str) -> Path:
    """The resolved config beside the model, its header the command that reruns it (never with overwrite=true)."""
    if cfg.run.overwrite:  # rerunning the saved config must not replace this run without a word
        cfg = copy.copy(cfg)  # copies (no dataclasses.replace: it would run every __post_init__ check again)
        cfg.run = copy.copy(cfg.run)
        cfg.run.overwrite = False
    return save_config(cfg, Path(output_dir) / RUN_CONFIG_FILE,
                       command=f"bertkit run {recipe} -c {Path(output_dir) / RUN_CONFIG_FILE}")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


__all__ = ["RECORD_FILE", "FINGERPRINT_FILE", "LOCK_FILE", "RUN_CONFIG_FILE", "LOG_FILE", "METRICS_FILE", "CURVE_FILE",
           "RECORD_FORMAT", "EDITABLE", "NOT_RECORDED", "LOADING_PATTERNS", "CONTINUATION_KEYS", "RUN_OUTPUTS",
           "USER_NAMED", "RUN_FOLDERS",
           "LOG_HISTORY_FILE", "file_digest", "write_json_atomic", "write_json", "read_run_config", "save_run_config"]
