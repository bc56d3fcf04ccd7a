"""Calibrated confidence and abstention for classifiers: temperature scaling fitted on dev, the expected calibration
error (ECE) before and after, the coverage table (what share of rows a confidence cut keeps, and how good the kept
rows are), and the confidence of a prediction that `predict --min-confidence` / a saved `abstain_below` compares.

A model fine-tuned for a few epochs is over-confident: its softmax says 0.99 where it is right 90 % of the time.
Dividing the logits by one temperature T > 1, fitted to minimise the negative log-likelihood of the dev labels, fixes
most of it without changing a single-label decision (Guo et al. 2017, "On Calibration of Modern Neural Networks");
multi-label gets one temperature per label (each label is its own binary problem). The temperature is bertkit's
post-processing, saved in the model's task settings: stock transformers still loads the model, with the raw softmax.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.optimize import minimize_scalar

CONFIDENT = 0.7  # a wrong prediction at this probability or more is confident (diagnose, the report)

ECE_BINS = 15  # equal-width confidence bins, as Guo et al. report ECE
COVERAGE_CUTS = (0.5, 0.7, 0.9)
_LOG_T_RANGE = (np.log(0.05), np.log(20.0))  # temperatures outside this are a broken dev split, not calibration
_EPS = 1e-12


def fit_temperatures(logits: np.ndarray, references: np.ndarray, kind: str,
                     to_probabilities: Callable[[np.ndarray], np.ndarray]) -> list[float]:
    """The temperature(s) minimising dev NLL: one for single-label, one per label for multi-label. `to_probabilities`
    turns (scaled) logits into the probabilities that are scored, one row per reference (long documents: the
    windows' probabilities aggregated per document), so the fit sees exactly what predict will return."""
    if kind == "single":
        return [_fit(lambda t: _nll(to_probabilities(logits / t), references, kind))]
    temperatures = []
    for label in range(logits.shape[-1]):  # each label's temperature scales its own column only
        def nll(t, label=label):
            scaled = logits.copy()
            scaled[..., label] /= t
            return _binary_nll(to_probabilities(scaled)[:, label], references[:, label])
        temperatures.append(_fit(nll))
    return temperatures


def at_range_edge(temperatures: list[float]) -> list[bool]:
    """Which fitted temperatures hit the edge of the search range. Single-label: the dev labels disagree with the
    model so much (a swapped or mislabelled dev split) that the best temperature flattens every probability, a
    data problem to show, not a calibration to apply. Multi-label: also a label that dev never (or always) has."""
    low, high = np.exp(_LOG_T_RANGE)
    return [bool(t <= low * 1.01 or t >= high * 0.99) for t in temperatures]


def _fit(nll: Callable[[float], float]) -> float:
    result = minimize_scalar(lambda log_t: nll(float(np.exp(log_t))), bounds=_LOG_T_RANGE, method="bounded",
                             options={"xatol": 1e-3})
    return round(float(np.exp(result.x)), 4)


def _nll(probs: np.ndarray, references: np.ndarray, kind: str) -> float:
    if kind == "multi":
        return _binary_nll(probs, references)
    return float(-np.log(np.clip(probs[np.arange(len(references)), references.astype(int)], _EPS, 1)).mean())


def _binary_nll(probs: np.ndarray, references: np.ndarray) -> float:
    probs = np.clip(probs.astype(np.float64), _EPS, 1 - _EPS)  # in float32, 1 - 1e-12 is 1: log(0)
    return float(-(references * np.log(probs) + (1 - references) * np.log(1 - probs)).mean())


def scale(logits: np.ndarray, temperatures: list[float] | None) -> np.ndarray:
    """Logits divided by the temperature (single-label: one; multi-label: one per label, on the last axis)."""
    if not temperatures:
        return logits
    return np.asarray(logits, dtype=np.float32) / np.asarray(temperatures, dtype=np.float32)


def confidence(probs: np.ndarray, kind: str) -> np.ndarray:
    """How sure each prediction is, in [0, 1]: the top probability (single-label); for multi-label the least sure
    of its yes/no decisions (a row is only as trustworthy as its weakest label). (N, C) -> (N,)"""
    if kind == "single":
        return probs.max(-1)
    return np.maximum(probs, 1 - probs).min(-1)


def expected_calibration_error(probs: np.ndarray, references: np.ndarray, kind: str, bins: int = ECE_BINS) -> float:
    """Single-label: the gap between confidence and accuracy, averaged over confidence bins weighted by their rows.
    Multi-label: the same over every (row, label) probability against how often the label is there."""
    if kind == "single":
        scores, hits = probs.max(-1), (probs.argmax(-1) == references).astype(float)
    else:
        scores, hits = probs.reshape(-1), np.asarray(references, dtype=float).reshape(-1)
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(scores, edges[1:-1], right=True), 0, bins - 1)
    gap = sum(abs(scores[which == b].mean() - hits[which == b].mean()) * (which == b).sum()
              for b in range(bins) if (which == b).any())
    return round(float(gap / max(len(scores), 1)), 4)


def coverage_table(probs: np.ndarray, references: np.ndarray, kind: str, cuts=COVERAGE_CUTS) -> dict:
    """For each confidence cut: the share of rows kept (confidence >= cut) and their accuracy (multi-label: the
    share of kept rows whose every label is right). None where a cut keeps no row."""
    sure = confidence(probs, kind)
    if kind == "single":
        right = probs.argmax(-1) == references
    else:
        right = ((probs >= 0.5).astype(int) == np.asarray(references).astype(int)).all(-1)
    table = {}
    for cut in cuts:
        kept = sure >= cut
        table[f"{cut:g}"] = {"kept": round(float(kept.mean()), 4),
                             "accuracy": round(float(right[kept].mean()), 4) if kept.any() else None}
    return table


def coverage_line(table: dict) -> str:
    """The coverage table in one summary cell: `0.5: 100% kept, acc 0.91 | 0.7: ...`."""
    return " | ".join(f"{cut}: {row['kept']:.0%} kept" + (f", acc {row['accuracy']:.3f}" if row["accuracy"] is not None
                                                            else "") for cut, row in table.items())


__all__ = ["CONFIDENT", "fit_temperatures", "at_range_edge", "scale", "confidence", "expected_calibration_error",
           "coverage_table", "coverage_line", "ECE_BINS", "COVERAGE_CUTS"]
