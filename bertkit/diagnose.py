"""`bertkit diagnose RUN_DIR`: the practitioner's troubleshooting table as a command. It reads a finished run's log
history (log_history.json, or the newest checkpoint's trainer_state.json), metrics.json and resolved config, and
names each symptom it finds with its evidence (steps and numbers) and the command to try next:

    training loss not falling          learning rate too small, or labels wrong
    training loss falls, dev does not  overfitting: fewer epochs, more regularisation, more data
    dev metric jumping around          batch too small or learning rate too large
    everything low                     the pretrained model does not fit the domain: check the tokenization

and, for classify runs, suspects the data before the model: the dev examples the model gets confidently wrong,
grouped by (gold -> predicted), and a warning when dev accuracy is near chance or below it (far below chance on a
binary task: labels swapped). Every detector is a small pure function over plain lists, unit-tested on its own."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .calibration import CONFIDENT
from .errors import BertkitError
from .rundir import (FINGERPRINT_FILE, LOG_HISTORY_FILE, METRICS_FILE, RECORD_FILE, RUN_CONFIG_FILE,
                     checkpoints_newest_first, read_run_config)

NOT_FALLING = 0.05  # the last quarter's mean train loss must be at least 5 % under the first quarter's
FALLING = 0.2  # "training loss falls": at least 20 % under
WORSE_BY = 0.02  # a dev metric this far under its best, at the end, is getting worse
SWING = 0.05  # a dev-metric move this large, then one back, is a swing
LOW_METRIC = 0.6  # a final dev metric (0-1) under this is low
NEAR_CHANCE, BELOW_CHANCE = 0.05, 0.15  # within NEAR of chance: near it; further under: below; BELOW under: far below
SHOWN_TEXTS, SHOWN_GROUPS, SHOWN_POINTS = 3, 5, 10


@dataclass
class Symptom:
    name: str
    evidence: list[str]
    advice: str
    commands: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ reading the run

def read_json(path: Path, shape: type = dict):
    """A JSON file of the run directory; one line naming it when it is not JSON (cut short, edited, another
    file's bytes) or not the `shape` the run writes."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise BertkitError(f"{path} is not text (byte {err.start} is not UTF-8) — the run directory is damaged: "
                           "restore the file, or rerun the run") from None
    except json.JSONDecodeError as err:
        raise BertkitError(f"{path} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno}) — the run "
                           "directory is damaged: restore the file, or rerun the run") from None
    if not isinstance(data, shape):
        raise BertkitError(f"{path} holds a JSON {type(data).__name__}, not the {shape.__name__} a run writes — "
                           "restore the file, or rerun the run")
    return data


def read_log_history(run_dir: str | Path) -> list[dict]:
    """The Trainer's log history: log_history.json, else the newest checkpoint's trainer_state.json, else []."""
    run_dir = Path(run_dir)
    if (run_dir / LOG_HISTORY_FILE).is_file():
        return [entry for entry in read_json(run_dir / LOG_HISTORY_FILE, list) if isinstance(entry, dict)]
    for checkpoint in checkpoints_newest_first(run_dir):
        state = checkpoint / "trainer_state.json"
        if state.is_file():
            history = read_json(state).get("log_history", [])
            return [entry for entry in history if isinstance(entry, dict)] if isinstance(history, list) else []
    return []


def train_losses(history: list[dict]) -> list[tuple[int, float]]:
    """(step, training loss) of every logging step."""
    return [(entry["step"], float(entry["loss"])) for entry in history if "loss" in entry and "step" in entry]


def eval_series(history: list[dict], metric: str) -> list[tuple[int, float]]:
    """(step, dev value) of `metric` (without the eval_ prefix) at every evaluation."""
    key = f"eval_{metric}"
    return [(entry["step"], float(entry[key])) for entry in history if key in entry]


def rerun_command(run_dir: str | Path, recipe: str, *overrides: str) -> str:
    return " ".join([f"bertkit run {recipe} -c {Path(run_dir) / RUN_CONFIG_FILE} overwrite=true", *overrides])


def _rate(value: float) -> str:
    """A learning rate as YAML reads it back as a float: 3.0e-5, never 3e-05."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _quarter_means(values: list[float]) -> tuple[float, float]:
    size = max(1, len(values) // 4)
    return sum(values[:size]) / size, sum(values[-size:]) / size


def _series(points: list[tuple[int, float]], limit: int = SHOWN_POINTS) -> str:
    """The evaluations as `value (step N)`; over `limit`, that many evenly spaced (first and last kept)."""
    shown = points
    if len(points) > limit:
        keep = {round(i * (len(points) - 1) / (limit - 1)) for i in range(limit)}
        shown = [point for i, point in enumerate(points) if i in keep]
    text = ", ".join(f"{value:.3f} (step {step})" for step, value in shown)
    return text if shown is points else f"{text} ({limit} of {len(points)} evaluations shown)"


# -------------------------------------------------------------------------------------------------- the detectors

def loss_not_falling(losses: list[tuple[int, float]], learning_rate: float) -> Symptom | None:
    """The last quarter's mean training loss is not at least NOT_FALLING under the first quarter's."""
    if len(losses) < 4:
        return None
    first, last = _quarter_means([loss for _, loss in losses])
    if last < first * (1 - NOT_FALLING):
        return None
    change = (last - first) / first if first else 0.0
    evidence = [f"train loss {losses[0][1]:.4f} at step {losses[0][0]} -> {losses[-1][1]:.4f} at step "
                f"{losses[-1][0]}; mean of the first quarter {first:.4f}, of the last {last:.4f} ({change:+.1%})",
                f"learning rate {learning_rate:g}"]
    suggested = 3.0e-5 if not 1e-5 <= learning_rate <= 1e-4 else learning_rate * 3
    advice = ("the learning rate is too small (fine-tuning wants about 2e-5 to 5e-5)" if learning_rate < 1e-5 else
              "the learning rate is too large or the labels are wrong: check the label column")
    return Symptom("training loss not falling", evidence, advice, [f"train.learning_rate={_rate(suggested)}"])


def overfitting(losses: list[tuple[int, float]], dev_loss: list[tuple[int, float]],
                dev_metric: list[tuple[int, float]], metric: str) -> Symptom | None:
    """Training loss falls (FALLING) while dev does not: see `dev_not_improving`."""
    if len(losses) < 4 or len(dev_metric) + len(dev_loss) < 2:
        return None
    first, last = _quarter_means([loss for _, loss in losses])
    if last > first * (1 - FALLING) or not dev_not_improving(dev_loss, dev_metric):
        return None
    evidence = [f"train loss {first:.4f} -> {last:.4f} (first / last quarter of steps {losses[0][0]}-"
                f"{losses[-1][0]})"]
    if dev_metric:
        best_step, best = max(dev_metric, key=lambda point: point[1])
        evidence.append(f"dev {metric}: {_series(dev_metric)}; best {best:.4f} at step {best_step}")
    if dev_loss:
        low_step, low = min(dev_loss, key=lambda point: point[1])
        evidence.append(f"dev loss lowest {low:.4f} at step {low_step}, {dev_loss[-1][1]:.4f} at the end")
    return Symptom("training loss falls but dev does not (overfitting)", evidence,
                   "train fewer epochs, regularise more (weight decay, early stopping) or add data", [])


def dev_not_improving(dev_loss: list[tuple[int, float]], dev_metric: list[tuple[int, float]]) -> bool:
    """The dev metric ends WORSE_BY under its best; or it never moves while dev loss does not fall either; or dev
    loss ends 10 % over its minimum with the metric (if any) under its best."""
    dev_loss_up = len(dev_loss) >= 2 and dev_loss[-1][1] > min(v for _, v in dev_loss) * 1.1
    if not dev_metric:
        return dev_loss_up
    values = [value for _, value in dev_metric]
    best, final = max(values), values[-1]
    stuck = (best - min(values) < 0.005
             and (len(dev_loss) < 2 or dev_loss[-1][1] >= dev_loss[0][1]))  # at a ceiling, dev loss still falls
    return final < best - WORSE_BY or stuck or (dev_loss_up and final < best)


def overfitting_commands(best_epoch: float, weight_decay: float) -> list[str]:
    epochs = max(1, int(round(best_epoch)))
    return [f"train.num_train_epochs={epochs}",
            f"train.weight_decay={max(0.1, weight_decay * 10):g} early_stopping_patience=2"]


def jumping_metric(dev_metric: list[tuple[int, float]], metric: str) -> Symptom | None:
    """At least two swings: the dev metric moves SWING or more one way, then SWING or more back."""
    if len(dev_metric) < 4:
        return None
    moves = [b - a for (_, a), (_, b) in zip(dev_metric, dev_metric[1:])]
    swings = [i for i in range(1, len(moves)) if abs(moves[i - 1]) >= SWING and abs(moves[i]) >= SWING
              and (moves[i - 1] > 0) != (moves[i] > 0)]
    if len(swings) < 2:
        return None
    return Symptom("dev metric jumping around",
                   [f"dev {metric}: {_series(dev_metric)}",
                    f"{len(swings)} reversals of {SWING} or more; largest move {max(abs(m) for m in moves):.3f}"],
                   "the batch is too small or the learning rate too large", [])


def jumping_commands(batch_size: int, learning_rate: float) -> list[str]:
    return [f"train.per_device_train_batch_size={max(16, batch_size * 4)}",
            f"train.learning_rate={_rate(min(learning_rate / 3, 3.0e-5))}"]


def everything_low(value: float | None, metric: str) -> Symptom | None:
    """The final dev metric (a 0-1 score) under LOW_METRIC."""
    if value is None or not 0 <= value < LOW_METRIC or "loss" in metric:
        return None
    return Symptom("everything low", [f"final dev {metric} {value:.4f} (under {LOW_METRIC})"],
                   "if the loss does fall, the pretrained model may not fit the domain: check the tokenization "
                   "([UNK] rate, tokens kept by truncation), or try a model of the domain", [])


def inspect_command(config: dict, gone: dict[str, str] | None = None) -> str:
    """`bertkit inspect` on the run's data; a file in `gone` (key -> path, see `gone_data_files`) is a placeholder."""
    data, gone = config.get("data") or {}, gone or {}
    train = "TRAIN_FILE" if "data.train" in gone else data.get("train", "TRAIN_FILE")
    dev = f" --dev {'DEV_FILE' if 'data.eval' in gone else data['eval']}" if data.get("eval") else ""
    return (f"bertkit inspect {train}{dev} --model {config.get('model', 'MODEL')} "
            f"--max-length {data.get('max_length') or 128}")


PLACEHOLDERS = {"data.train": "TRAIN_FILE", "data.eval": "DEV_FILE"}


def gone_data_files(config: dict) -> dict[str, str]:
    """The run's training / dev files that are not there any more (key -> path as the config names it): a command
    that names one would fail, so the commands name a placeholder and a note says which file it stands for."""
    from .datafiles import looks_like_hub_name

    data = config.get("data") or {}
    return {f"data.{key}": str(data[key]) for key in ("train", "eval")
            if data.get(key) and not Path(str(data[key])).is_file() and not looks_like_hub_name(str(data[key]))}


# ------------------------------------------------------------------------------------------- data suspicions

def chance_warning(accuracy: float, gold: list[int], classes: int, learned: bool = True) -> Symptom | None:
    """Dev accuracy near chance (the majority label's share), below it, or far below it (on a binary task: the
    labels swapped?). A model that `learned` nothing (its training loss did not fall) lands a few points under
    chance by the luck of its random head: that is near chance, not a sign of bad data."""
    if not gold:
        return None
    chance = max(Counter(gold).values()) / len(gold)
    evidence = [f"dev accuracy {accuracy:.4f}; chance (majority label) {chance:.4f}"]
    compare = "compare the label mapping of the training and dev files, and the groups of confident errors"
    if accuracy < chance - BELOW_CHANCE:
        swapped = " — on a binary task this says the labels are swapped (0 <-> 1)" if classes == 2 else ""
        return Symptom("dev accuracy far below chance", evidence, f"suspect the data first{swapped}: {compare}", [])
    if accuracy < chance - NEAR_CHANCE and learned:  # worse than always answering the majority label
        return Symptom("dev accuracy below chance", evidence, f"suspect the data first: {compare}", [])
    if accuracy <= chance + NEAR_CHANCE:  # within NEAR of chance, or under it from a model that learned nothing
        return Symptom("dev accuracy near chance", evidence, "the model learned next to nothing: check the labels and "
                       "the learning rate before anything else", [])
    return None


def confident_errors(texts: list[str], gold: list[int], probs, names: list[str],
                     confident: float = CONFIDENT) -> list[tuple[str, str, int, list[str]]]:
    """(gold name, predicted name, count, a few texts) of the wrong predictions at `confident` probability or more,
    the largest groups first."""
    groups: dict[tuple[int, int], list[str]] = {}
    for text, label, row in zip(texts, gold, probs):
        predicted = int(row.argmax())
        if predicted != label and float(row[predicted]) >= confident:
            groups.setdefault((label, predicted), []).append(text)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    return [(names[g], names[p], len(found), found[:SHOWN_TEXTS]) for (g, p), found in ordered]


# ---------------------------------------------------------------------------------------------------- the report

@dataclass
class Diagnosis:
    run_dir: str
    symptoms: list[Symptom]
    errors: list[tuple[str, str, int, list[str]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    """What was looked at ("the training curve (12 logged losses)"): a clean bill covers these and nothing else."""
    not_checked: list[str] = field(default_factory=list)
    """What was not, and why ("the dev predictions: an mlm run has none")."""


def read_run(run_dir: str) -> tuple[dict, dict, str]:
    """(metrics.json, the resolved config, the recipe) of a run directory; an error that says what is missing."""
    path = Path(run_dir)
    if not (path / METRICS_FILE).is_file() or not (path / RUN_CONFIG_FILE).is_file():
        raise BertkitError(f"{run_dir} holds no finished bertkit run (no {METRICS_FILE} or {RUN_CONFIG_FILE}) — give "
                           "the output_dir of a finished `bertkit run`")
    record = read_json(path / RECORD_FILE) if (path / RECORD_FILE).is_file() else {}
    if not record.get("recipe") and (path / FINGERPRINT_FILE).is_file():  # the end of a run, before its record
        record = {"recipe": read_json(path / FINGERPRINT_FILE).get("recipe")}
    metrics = read_json(path / METRICS_FILE)
    try:
        config = read_run_config(run_dir)
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise BertkitError(f"{path / RUN_CONFIG_FILE} is not valid YAML ({first}) — restore the file, or rerun the "
                           "run") from None
    return metrics, config if isinstance(config, dict) else {}, record.get("recipe") or "classify"


def curve_symptoms(history: list[dict], metric: str, train: dict) -> list[Symptom]:
    """The training-curve rows of the table, each with its next overrides (rerun_command adds the prefix)."""
    losses, dev = train_losses(history), eval_series(history, metric) if metric != "loss" else []
    learning_rate = float(train.get("learning_rate", 5e-5))
    found = []
    if symptom := loss_not_falling(losses, learning_rate):
        found.append(symptom)
    elif symptom := overfitting(losses, eval_series(history, "loss"), dev, metric):
        best_step = max(dev, key=lambda point: point[1])[0] if dev else min(
            eval_series(history, "loss"), key=lambda point: point[1])[0]
        best_epoch = next((e.get("epoch", 1) for e in history if e.get("step") == best_step and f"eval_{metric}" in e),
                          1)
        symptom.commands = overfitting_commands(best_epoch, float(train.get("weight_decay", 0.01)))
        found.append(symptom)
    if symptom := jumping_metric(dev, metric):
        symptom.commands = jumping_commands(int(train.get("per_device_train_batch_size", 8)), learning_rate)
        found.append(symptom)
    return found


def diagnose(run_dir: str, predict: bool = True) -> Diagnosis:
    """Every symptom of the run in `run_dir`; with `predict`, the dev split is run through the model (classify)."""
    metrics, config, recipe = read_run(run_dir)
    metric = metrics.get("selection_metric") or "loss"
    history = read_log_history(run_dir)
    notes = [] if history else ["no log history found (log_history.json or checkpoint-*/trainer_state.json): the "
                                "training-curve checks were skipped"]
    symptoms = curve_symptoms(history, metric, config.get("train") or {})
    final = metrics["eval"].get(metric) if isinstance(metrics.get("eval"), dict) else None
    gone = gone_data_files(config)
    if symptom := everything_low(final if isinstance(final, (int, float)) else None, metric):
        symptom.commands = [inspect_command(config, gone)]
        symptoms.append(symptom)
    notes += [f"the run's {'dev' if key == 'data.eval' else 'training'} file {path} is not there any more: "
              f"{PLACEHOLDERS[key]} in the commands stands for it — give the file you have"
              for key, path in gone.items()]
    diagnosis = Diagnosis(str(run_dir), symptoms, notes=notes)
    losses, evaluations = train_losses(history), [entry for entry in history if "eval_runtime" in entry]
    if history:
        diagnosis.checked.append(f"the training curve ({len(losses)} logged losses, {len(evaluations)} "
                                 f"evaluation{'s' if len(evaluations) != 1 else ''})")
    if isinstance(final, (int, float)):
        diagnosis.checked.append(f"the final dev {metric}")
    dev_file = (config.get("data") or {}).get("eval")
    skipped = dev_check_skipped(recipe, dev_file, predict)
    if skipped:
        diagnosis.not_checked.append(f"the dev predictions: {skipped}")
    else:
        suspect_data(diagnosis, label_predictions_of(recipe)(str(run_dir), dev_file))
    replaced = [f"{key}={PLACEHOLDERS[key]}" for key in gone]  # the saved config names the files that are gone
    for symptom in diagnosis.symptoms:
        symptom.commands = [c if c.startswith("bertkit ") else rerun_command(run_dir, recipe, c, *replaced)
                            for c in symptom.commands]
    return diagnosis


def label_predictions_of(recipe: str):
    """The task's `dev_label_predictions(run_dir, dev_file)` -> (texts, gold label ids, (N, C) probabilities, label
    names) of a single-label model, or None (a task with no labels to suspect, or no task: distill)."""
    from .tasks import task_part

    return task_part(recipe, "dev_label_predictions")


def dev_check_skipped(recipe: str, dev_file, predict: bool) -> str | None:
    """Why the model is not run on a dev split (None when it is): only a classify run with its dev file has dev
    predictions to look at."""
    if label_predictions_of(recipe) is None:  # the task's own: tasks/classify.py dev_label_predictions
        return f"this is a '{recipe}' run, and diagnose runs the model on dev for classify runs only"
    if not dev_file:
        return "the run had no dev split (data.eval was not set) — rerun with data.eval=DEV_FILE"
    if not Path(dev_file).is_file():
        return f"its dev file {dev_file} is not there any more"
    if not predict:
        return "--no-predict"
    return None


def suspect_data(diagnosis: Diagnosis, predictions) -> None:
    """Add the chance warning and the groups of confident errors, from the model's own dev predictions."""
    if predictions is None:
        diagnosis.not_checked.append("the dev predictions: not a single-label model")
        return
    texts, gold, probs, names = predictions
    diagnosis.checked.append(f"the dev predictions ({len(gold)} examples)")
    accuracy = float((probs.argmax(axis=1) == gold).mean()) if len(gold) else 0.0
    learned = not any(symptom.name == "training loss not falling" for symptom in diagnosis.symptoms)
    if symptom := chance_warning(accuracy, gold, len(names), learned):
        if symptom.name == "dev accuracy far below chance":
            blame_the_data(diagnosis.symptoms)
        diagnosis.symptoms.insert(0, symptom)  # suspect the data before the model
    diagnosis.errors = confident_errors(texts, gold, probs, names)


def blame_the_data(symptoms: list[Symptom]) -> None:
    """Far below chance, the curve symptoms the data explains lose their model-side advice: "everything low" goes,
    and a dev score that falls while the training loss does says the dev labels disagree with the training ones,
    which fewer epochs would only hide."""
    symptoms[:] = [symptom for symptom in symptoms if symptom.name != "everything low"]
    for symptom in symptoms:
        if "overfitting" in symptom.name:
            symptom.advice = ("the model gets worse on dev as it learns the training labels, and ends below chance: "
                              "the dev labels likely disagree with the training labels — fix the data before "
                              "changing epochs or regularisation")
            symptom.commands = []


def report_lines(diagnosis: Diagnosis) -> list[str]:
    """The diagnosis as text: each symptom with its evidence and next commands, then the confident errors."""
    lines = [f"diagnosis of {diagnosis.run_dir}"]
    if not diagnosis.symptoms:
        looked_at = " and ".join(diagnosis.checked) if diagnosis.checked else "nothing that could be checked"
        lines.append(f"no symptom found in {looked_at}")
    for number, symptom in enumerate(diagnosis.symptoms, 1):
        lines.append(f"{number}. {symptom.name}")
        lines.extend(f"   evidence: {line}" for line in symptom.evidence)
        lines.append(f"   likely: {symptom.advice}")
        lines.extend(f"   try: {command}" for command in symptom.commands)
    if diagnosis.errors:
        total = sum(count for _, _, count, _ in diagnosis.errors)
        examples = "example" if total == 1 else "examples"
        lines.append(f"confidently wrong on dev (probability >= {CONFIDENT}): {total} {examples}, by gold -> "
                     "predicted")
        for gold, predicted, count, texts in diagnosis.errors[:SHOWN_GROUPS]:
            lines.append(f"   {gold} -> {predicted}: {count}")
            lines.extend(f"      {text[:100]!r}" for text in texts)
    lines.extend(f"not checked: {what}" for what in diagnosis.not_checked)
    lines.extend(f"note: {note}" for note in diagnosis.notes)
    return lines


__all__ = ["Symptom", "Diagnosis", "read_log_history", "train_losses", "eval_series",
           "loss_not_falling", "overfitting", "dev_not_improving", "jumping_metric", "everything_low", "chance_warning",
           "confident_errors", "label_predictions_of", "read_run", "curve_symptoms", "diagnose", "suspect_data",
           "blame_the_data", "report_lines", "rerun_command", "inspect_command",
           "gone_data_files", "overfitting_commands",
           "jumping_commands"]
