"""The card's per-class parts, bounded whatever the number of classes (5,000 classes once made a 1.6 MB card): at
most CARD_CLASSES label rows, and per-class scores of at most CARD_CLASSES classes, the most frequent on dev
(classification_report.txt's support), with a line for the rest."""

from __future__ import annotations

from pathlib import Path

CARD_CLASSES = 20
PER_CLASS_PREFIXES = ("f1_", "precision_", "recall_")
REPORT_FILE = "classification_report.txt"


def report_supports(path: Path) -> dict[str, int]:
    """class -> support from sklearn's classification_report.txt ({} when it is missing or not that table)."""
    supports: dict[str, int] = {}
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return {}
    for line in lines[2:]:
        if not line.strip():
            break  # the per-class rows end at the blank line before accuracy / macro avg
        parts = line.rsplit(None, 4)
        if len(parts) == 5 and parts[4].isdigit():
            supports[parts[0].strip()] = int(parts[4])
    return supports


def bounded_metrics(metrics: dict[str, float], names: list[str], supports: dict[str, int],
                    limit: int = CARD_CLASSES) -> tuple[dict[str, float], int, int]:
    """(metrics with per-class scores of at most `limit` classes, classes shown, classes left out): the classes
    with the most dev examples (classification_report.txt's support) first, else in metrics.json's order."""
    known = set(names)
    per_class = {}
    for key in metrics:
        prefix = next((p for p in PER_CLASS_PREFIXES if key.startswith(p)), None)
        if prefix and key[len(prefix):] in known:
            per_class.setdefault(key[len(prefix):], []).append(key)
    classes = list(per_class)
    if supports:
        classes.sort(key=lambda name: -supports.get(name, -1))  # stable: metrics order among equals
    kept = set(classes[:limit])
    dropped = {key for name in classes[limit:] for key in per_class[name]}
    left_out = max(len(names), len(classes)) - len(kept) if classes else 0
    return {k: v for k, v in metrics.items() if k not in dropped}, len(kept), left_out



def card_metrics(model_dir: Path, metrics: dict[str, float], names: list[str]) -> dict:
    """The card's `metrics` (per-class scores bounded), `classes_shown` and `classes_left_out`."""
    kept, shown, left_out = bounded_metrics(metrics, names, report_supports(Path(model_dir) / REPORT_FILE))
    return {"metrics": kept, "classes_shown": shown, "classes_left_out": left_out}


__all__ = ["CARD_CLASSES", "PER_CLASS_PREFIXES", "REPORT_FILE", "report_supports", "bounded_metrics", "card_metrics"]
