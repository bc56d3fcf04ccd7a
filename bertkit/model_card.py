"""Model card (README.md) for a model directory written by a bertkit run.

What a run leaves in its output dir is all we read: `config.json` (required: architecture, labels), and, when
present, `bertkit_config.yaml` (the resolved recipe config), `metrics.json` (eval metrics) and
`training_curve.png`. An optional file that is missing drops its section; it never fails the card.

The card is plain text with no timestamps, so rendering the same directory twice gives the same bytes: that is
what lets a re-push of an unchanged model make no new commit.

Per-class parts are bounded whatever the number of classes (5,000 classes once made a 1.6 MB card): at most
CARD_CLASSES label rows, and per-class scores of at most CARD_CLASSES classes, the most frequent on dev
(classification_report.txt's support), with a line for the rest. After a hyperparameter search (metrics.json
`search`) the card shows the trials table and the best trial's settings in place of the config's; after a seed
band (`seeds`) each seed's dev score, the mean ± sd of every dev metric, and the kept seed
(bertkit/search.py writes the entries). The "How to use" snippet needs only transformers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from . import tasks
from .configuration_bert import bertkit_only_reason
from .families import FAMILIES, Family
from .rundir import CONFUSION_FIGURE, ENTITY_FIGURE
from .tasks import reporting
from .tasks.reporting import markdown_cell, markdown_table
from .errors import BertkitError

_PLAIN_TASK = ("feature-extraction", "AutoModel")  # a bare encoder, or an adapter on none of the heads

# Trainer's eval output mixes metrics with timing; timing says nothing about the model.
_NOT_METRICS = {"runtime", "samples_per_second", "steps_per_second", "epoch", "step", "total_flos"}

# A Hub repo id: "name" or "namespace/name" (local paths such as "./out" or "/data/x" are not).
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")

_PLACEHOLDER_REPO = "<namespace>/<model-name>"


# ---------------------------------------------------------------- reading the model dir


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BertkitError(f"cannot read {path}: {err}; fix or delete the file and retry") from err


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise BertkitError(f"cannot read {path}: {first_line}; fix or delete the file and retry") from err
    return data if isinstance(data, dict) else {}


def _read_model_config(model_dir: Path) -> dict:
    """config.json, or the PEFT adapter_config.json of an adapter-only dir; {} when neither is there."""
    for name in ("config.json", "adapter_config.json"):
        if (model_dir / name).is_file():
            data = _read_json(model_dir / name)
            return data if isinstance(data, dict) else {}
    return {}


def read_metrics(path: Path) -> dict[str, float]:
    """Flat `name -> value` eval metrics from metrics.json ("eval_" prefixes dropped, timing keys skipped).

    Accepts a flat dict or one nested under "eval" (the file may also hold a "train" section).
    """
    if not path.is_file():
        return {}
    data = _read_json(path)
    if isinstance(data, dict) and isinstance(data.get("eval"), dict):
        data = data["eval"]
    if not isinstance(data, dict):
        return {}
    metrics = {}
    for key, value in data.items():
        name = key.removeprefix("eval_")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and name not in _NOT_METRICS:
            metrics[name] = float(value)
    return metrics


def _lookup(cfg: dict, *paths: str) -> Any:
    """First non-None value among dotted paths ("train.learning_rate"), or None."""
    for path in paths:
        node: Any = cfg
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


# ---------------------------------------------------------------- what the model is


def task_of(model_config: dict) -> tuple[str, str]:
    """(pipeline tag, transformers Auto class) for a config.json (or PEFT adapter_config.json: adapter folders carry
    no architecture, their task_type says what head the adapter sits on), from the one table tasks.TASKS."""
    if "peft_type" in model_config:
        task = tasks.task_of_peft(str(model_config.get("task_type")))
    else:
        found = [tasks.task_of_architecture(str(arch)) for arch in model_config.get("architectures") or []]
        task = next((task for task in found if task), None)
    return (task.pipeline_tag, task.auto_class) if task else _PLAIN_TASK


def _model_name(cfg: dict) -> str | None:
    model = _lookup(cfg, "model.name_or_path", "model.name", "model.pretrained", "model")
    return model if isinstance(model, str) else None


def _hub_id(name: Any) -> str | None:
    """`name` if it reads as a Hub model id, not a local path (the Hub rejects a path as base_model)."""
    if not isinstance(name, str) or name.startswith((".", "/", "~")) or not _REPO_ID.match(name):
        return None
    return None if Path(name).exists() else name


def _labels(model_config: dict, tag: str) -> list[tuple[str, str]]:
    """(id, label) rows for classification heads; [] when there is nothing worth a table."""
    if tag not in ("text-classification", "token-classification"):
        return []
    if model_config.get("problem_type") == "regression":
        return []
    id2label = model_config.get("id2label") or {}
    rows = [(str(i), str(label)) for i, label in id2label.items()]
    # JSON keys are strings: sort "10" after "9".
    return sorted(rows, key=lambda r: (len(r[0]), r[0]))


def _precision(cfg: dict) -> str | None:
    explicit = _lookup(cfg, "precision", "train.precision")
    if explicit is not None:
        return str(explicit)
    if _lookup(cfg, "train.bf16"):
        return "bf16"
    if _lookup(cfg, "train.fp16"):
        return "fp16"
    return "fp32" if isinstance(cfg.get("train"), dict) else None


def _lora(cfg: dict) -> str | None:
    lora = _lookup(cfg, "lora", "train.lora")
    if isinstance(lora, dict):
        if lora.get("enabled") is False:
            return None
        keys = ("r", "alpha", "lora_alpha", "dropout", "lora_dropout", "target_modules")
        parts = [f"{k}={_fmt(lora[k])}" for k in keys if lora.get(k) is not None]
        return ", ".join(parts) or "yes"
    return "yes" if lora is True else None


def _long_doc(cfg: dict) -> str | None:
    long_doc = _lookup(cfg, "long_doc", "data.long_doc")
    if isinstance(long_doc, dict):
        strategy = long_doc.get("strategy")
        extras = [f"{k}={_fmt(v)}" for k, v in long_doc.items() if k != "strategy" and v is not None]
        return f"{strategy} ({', '.join(extras)})" if strategy and extras else (strategy or ", ".join(extras) or None)
    return str(long_doc) if long_doc else None


def hyperparameters(cfg: dict) -> list[tuple[str, str]]:
    """(name, value) rows of the settings a reader needs to reproduce the run; absent ones are skipped."""
    rows = [
        ("recipe", _lookup(cfg, "recipe", "recipe.name")),
        ("learning_rate", _lookup(cfg, "train.learning_rate", "learning_rate")),
        ("num_train_epochs", _lookup(cfg, "train.num_train_epochs", "num_train_epochs")),
        ("max_steps", _lookup(cfg, "train.max_steps")),
        ("per_device_train_batch_size", _lookup(cfg, "train.per_device_train_batch_size")),
        ("gradient_accumulation_steps", _lookup(cfg, "train.gradient_accumulation_steps")),
        ("warmup_steps", _lookup(cfg, "train.warmup_steps")),
        ("weight_decay", _lookup(cfg, "train.weight_decay")),
        ("lr_scheduler_type", _lookup(cfg, "train.lr_scheduler_type")),
        ("max_length", _lookup(cfg, "max_length", "data.max_length", "model.max_length")),
        ("precision", _precision(cfg)),
        ("llrd (layer-wise LR decay)", _lookup(cfg, "llrd", "optim.llrd", "train.llrd")),
        ("long documents", _long_doc(cfg)),
        ("LoRA", _lora(cfg)),
        ("seed", _lookup(cfg, "train.seed", "seed")),
    ]
    # max_steps <= 0 is Trainer's "use epochs": not worth a row.
    return [(k, _fmt(v)) for k, v in rows if v is not None and not (k == "max_steps" and v in (-1, 0))]


def _data_files(cfg: dict) -> list[tuple[str, str]]:
    """(split, file) rows from the config's data section; absolute paths shortened to the file name so a card
    does not publish the author's home directory."""
    data = cfg.get("data")
    if not isinstance(data, dict):
        return []
    rows = []
    for split in ("train", "validation", "eval", "test"):
        value = data.get(split) or data.get(f"{split}_file")
        if isinstance(value, str) and value:
            rows.append((split, Path(value).name if Path(value).is_absolute() else value))
    return rows


# ---------------------------------------------------------------- per-class parts, bounded


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


# ---------------------------------------------------------------- how the model was chosen


# The card's hyperparameter rows (model_card.hyperparameters) that a search's trial parameters replace.
_CARD_ROWS = {"learning_rate": "learning_rate", "per_device_train_batch_size": "per_device_train_batch_size",
              "num_train_epochs": "num_train_epochs", "warmup_steps": "warmup_steps",
              "llrd": "llrd (layer-wise LR decay)"}
_COLUMNS = {"learning_rate": "lr", "per_device_train_batch_size": "batch", "num_train_epochs": "epochs",
            "warmup_steps": "warmup", "llrd": "llrd"}


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else "" if value is None else str(value)


def chosen_hyperparameters(rows: list[tuple[str, str]], metrics: dict) -> list[tuple[str, str]]:
    """The card's hyperparameter rows as the kept model was trained: a search's best settings, a band's kept seed."""
    replaced = {}
    if isinstance(metrics.get("search"), dict):
        replaced = {_CARD_ROWS[name]: _number(value) for name, value in metrics["search"]["best"]["params"].items()
                    if name in _CARD_ROWS}
    elif isinstance(metrics.get("seeds"), dict):
        replaced = {"seed": str(metrics["seeds"]["best_seed"])}
    names = {name for name, _ in rows}
    return [(name, replaced.get(name, value)) for name, value in rows] + \
        [(name, value) for name, value in replaced.items() if name not in names]


def _search_section(search: dict) -> list[str]:
    best = search["best"]
    pruned = sum(trial["state"] == "pruned" for trial in search["trials"])
    pruning = ", median pruning" if search["pruning"] else ""
    text = (f"A hyperparameter search of {len(search['trials'])} trials (Optuna{pruning}; {pruned} pruned) ranked "
            f"by dev {search['metric']} ({search['direction']}); this model is trial #{best['number']}, at "
            f"{search['metric']} {_number(best['objective'])}.")
    rows = [[f"#{trial['number']}" + (" (this model)" if trial["number"] == best["number"] else ""), trial["state"],
             *(_number(trial["params"].get(name)) for name in _COLUMNS), _number(trial["objective"])]
            for trial in search["trials"]]
    return [text, markdown_table(["trial", "state", *_COLUMNS.values(), search["metric"]], rows)]


def _seeds_section(band: dict) -> list[str]:
    count = len(band["runs"])
    text = (f"Trained with {count} seeds ({', '.join(str(run['seed']) for run in band['runs'])}); this model is seed "
            f"{band['best_seed']}, the best dev {band['metric']}. Across the seeds (mean ± sample sd):")
    rows = [[name, f"{_number(mean)} ± {_number(band['sd'][name])}"] for name, mean in band["mean"].items()]
    return [text, markdown_table(["metric", f"mean ± sd ({count} seeds)"], rows)]


def selection_section(metrics: dict) -> list[str]:
    """The card's "How this model was chosen" section ([] after one training)."""
    if isinstance(metrics.get("search"), dict):
        return ["## How this model was chosen", *_search_section(metrics["search"])]
    if isinstance(metrics.get("seeds"), dict):
        return ["## How this model was chosen", *_seeds_section(metrics["seeds"])]
    return []


# ---------------------------------------------------------------- rendering


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _table(header: tuple[str, str], rows: list[tuple[str, str]]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "| --- | --- |"]
    lines += [f"| {markdown_cell(a)} | {markdown_cell(b)} |" for a, b in rows]
    return "\n".join(lines)


def _front_matter(card: dict) -> str:
    """YAML metadata in the Hub's format, built with huggingface_hub's own ModelCardData (model-index included)."""
    eval_results = [
        EvalResult(
            task_type=card["tag"],
            task_name=card["tag"].replace("-", " ").capitalize(),
            dataset_type=card["dataset_type"],
            dataset_name=card["dataset_name"],
            metric_type=name,
            metric_value=round(value, 6),
            metric_name=name.replace("_", " "),
        )
        for name, value in card["metrics"].items()
    ]
    data = ModelCardData(
        language=card["language"],
        license=card["license"],
        library_name=card.get("library", "transformers"),
        tags=card["tags"],
        datasets=card["datasets"],
        base_model=card["base_model"],
        pipeline_tag=card["tag"],
        model_name=card["name"] if eval_results else None,
        eval_results=eval_results or None,
    )
    order = ["language", "license", "library_name", "tags", "datasets", "base_model", "pipeline_tag"]
    return f"---\n{data.to_yaml(original_order=order)}\n---\n"


_INTENDED_USE = {
    "text-classification": "assigns one of the labels below to a piece of text",
    "token-classification": "tags each token of a text with one of the labels below (e.g. named entities)",
    "question-answering": "extracts the answer span to a question from a given context",
    "fill-mask": "predicts masked tokens; it is mostly a starting point for fine-tuning on a downstream task",
    "multiple-choice": "picks the best of several candidate continuations",
    "feature-extraction": "turns text into contextual embeddings",
}


def _body(card: dict) -> str:
    name, tag, part = card["name"], card["tag"], card["task_card"]
    base = card["base_model"]
    origin = f"a fine-tuned version of [{base}](https://huggingface.co/{base})" if base else \
        f"a {card['family'].name} model"
    recipe = f" (recipe `{card['recipe']}`)" if card["recipe"] else ""
    parts = [
        f"# {name}",
        f"This model is {origin}, trained with bertkit{recipe}. "
        + (part.note() if part else _loading_note(card["bertkit_only"], card["family"], card["architecture"]))
        + (_DOCUMENT_NOTE if card["document_model"] else ""),
        "## Intended use",
        f"The model {part.intended_use if part else _INTENDED_USE[tag]}. Check that the training data below "
        "matches your domain and language "
        "before relying on its outputs; evaluate it on your own data first.",
    ]
    parts += _data_section(card)
    if card["hparams"]:
        parts += ["## Training hyperparameters", _table(("setting", "value"), card["hparams"])]
    if card["metrics"] or card["curve"]:
        parts.append("## Results")
        if part and part.results():
            parts += part.results()
        elif card["metrics"] and card["base_metrics"]:
            parts.append("Dev metrics of the model before fine-tuning and after:\n\n" + markdown_table(
                ["metric", "base model", "fine-tuned"], [[name, _fmt(card["base_metrics"].get(name, "-")), _fmt(v)]
                                                         for name, v in card["metrics"].items()]))
        elif card["metrics"]:
            parts.append(_table(("metric", "value"), [(k, _fmt(v)) for k, v in card["metrics"].items()]))
        if card["classes_left_out"]:
            parts.append(f"Per-class scores are shown for {card['classes_shown']} classes (the most frequent on dev) "
                         f"and {card['classes_left_out']:,} more classes are left out: see {REPORT_FILE} for "
                         "every class.")
        if card["curve"]:
            parts.append("![Training curve](training_curve.png)")
        for name, alt in ((CONFUSION_FIGURE, "Confusion matrix on dev"), (ENTITY_FIGURE, "F1 per entity type on dev")):
            if name in card.get("figures", ()):
                parts.append(f"![{alt}]({name})")
    if card.get("temperature"):
        parts.append(_CALIBRATION_NOTE.format(", ".join(f"{t:g}" for t in card["temperature"])))
    if card.get("report"):
        parts.append("The whole run on one page — curves, the dev predictions, the diagnosis, the settings: "
                     "[report.html](report.html) (self-contained; download it and open it in a browser).")
    parts += card["selection"]
    if card["labels"]:
        shown = card["labels"][:CARD_CLASSES]
        more = len(card["labels"]) - len(shown)
        parts += ["## Labels", _table(("id", "label"), shown)]
        if more:
            parts.append(f"... and {more:,} more labels: config.json's `id2label` lists all {len(card['labels']):,}.")
    parts += ["## How to use", usage_snippet(card)]
    return "\n\n".join(parts) + "\n"


_CALIBRATION_NOTE = ("Calibration: `bertkit predict` divides the logits by a temperature fitted on the dev split "
                     "({}; config.json's `bertkit_task_settings.temperature`) so that its probabilities match how "
                     "often the model is right. This is bertkit's post-processing: plain `transformers` loads the "
                     "same model with the uncalibrated softmax (for a single-label model, the same labels).")


_DOCUMENT_NOTE = (" It classifies whole documents: a learned attention pools the vectors of a document's "
                  "overlapping windows (`long_doc.aggregate=attention`). Plain `transformers` loads it as a per-window "
                  "classifier (the `window_attention` weights are dropped, with a warning): the same predictions for "
                  "texts that fit in one window; for longer documents, `bertkit predict` pools the windows.")


def _loading_note(bertkit_only: str | None, family: Family, architecture: str | None) -> str:
    if family.implementation != "bertkit":
        return (f"It is a standard {family.name} checkpoint (`{architecture}`, trained through transformers' own "
                "class): it loads with plain `transformers`, no custom code.")
    if not bertkit_only:
        return ("It is a standard BERT checkpoint (trained on bertkit's own BERT implementation, which keeps "
                "transformers' parameter names): it loads with plain `transformers`, no custom code.")
    return (f"It needs bertkit to load: {bertkit_only}. Its config.json says model_type `bertkit`, so plain "
            "`transformers` refuses to load it rather than predict something else.")


def _data_section(card: dict) -> list[str]:
    if not card["datasets"] and not card["data_files"]:
        return []
    lines = [f"- Hub dataset: [{d}](https://huggingface.co/datasets/{d})" for d in card["datasets"] or []]
    lines += [f"- {split}: `{path}`" for split, path in card["data_files"]]
    return ["## Training data", "\n".join(lines)]


# ---------------------------------------------------------------- how to use


_SAMPLE_TEXT = {"zh": "这部电影真好看！", "en": "This movie was great!"}
_MASK_TEXT = {
    "zh": 'f"巴黎是法国的首{tokenizer.mask_token}。"',
    "en": 'f"Paris is the capital of {tokenizer.mask_token}."',
}


def usage_snippet(card: dict) -> str:
    """A snippet that needs only transformers: the model must be usable by someone who never heard of bertkit
    (unless stock BERT cannot express it: then bertkit is imported to register its classes)."""
    repo, auto_class, tag = card["repo_id"], card["auto_class"], card["tag"]
    lang = "zh" if "zh" in (card["language"] or []) else "en"
    if card["task_card"]:  # a model another library loads (sentence-transformers): its own snippet
        return card["task_card"].usage(repo, lang)
    text = _MASK_TEXT[lang] if tag == "fill-mask" else _SAMPLE_TEXT[lang]
    head = [
        "import torch",
        f"from transformers import AutoTokenizer, {auto_class}",
        *(["", "import bertkit  # registers model_type \"bertkit\" with transformers' Auto classes"]
          if card["bertkit_only"] else []),
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{repo}")',
        f'model = {auto_class}.from_pretrained("{repo}").eval()',
        "",
    ]
    body = _USAGE_BODIES.get(tag, _USAGE_BODIES["feature-extraction"])(text, card["problem_type"])
    return "```python\n" + "\n".join(head + body) + "\n```"


def _usage_classify(text: str, problem_type: str | None) -> list[str]:
    lines = [f'inputs = tokenizer("{text}", return_tensors="pt")', "with torch.no_grad():",
             "    logits = model(**inputs).logits[0]"]
    if problem_type == "multi_label_classification":
        return lines + ["print([model.config.id2label[i] for i, p in enumerate(logits.sigmoid()) if p > 0.5])"]
    if problem_type == "regression":
        return lines + ["print(logits.item())"]
    return lines + ["print(model.config.id2label[int(logits.argmax())])"]


def _usage_tokens(text: str, _: str | None) -> list[str]:
    return [
        f'inputs = tokenizer("{text}", return_tensors="pt")',
        "with torch.no_grad():",
        "    predicted = model(**inputs).logits[0].argmax(-1)",
        "tokens = tokenizer.convert_ids_to_tokens(inputs.input_ids[0])",
        "print([(t, model.config.id2label[int(p)]) for t, p in zip(tokens, predicted)])",
    ]


def _usage_qa(text: str, _: str | None) -> list[str]:
    return [
        'question, context = "What was great?", "' + text + '"',
        'inputs = tokenizer(question, context, return_tensors="pt")',
        "with torch.no_grad():",
        "    out = model(**inputs)",
        "start, end = int(out.start_logits.argmax()), int(out.end_logits.argmax())",
        "print(tokenizer.decode(inputs.input_ids[0, start : end + 1]))",
    ]


def _usage_fill_mask(text: str, _: str | None) -> list[str]:
    return [
        f"text = {text}",
        'inputs = tokenizer(text, return_tensors="pt")',
        "with torch.no_grad():",
        "    logits = model(**inputs).logits  # ForPreTraining models: .prediction_logits",
        "position = int((inputs.input_ids[0] == tokenizer.mask_token_id).nonzero()[0])",
        "print(tokenizer.decode(logits[0, position].argmax()))",
    ]


def _usage_choice(text: str, _: str | None) -> list[str]:
    return [
        f'prompt, choices = "{text}", ["I liked it.", "I did not like it."]',
        'inputs = tokenizer([prompt] * len(choices), choices, return_tensors="pt", padding=True)',
        "with torch.no_grad():",
        "    logits = model(**{k: v.unsqueeze(0) for k, v in inputs.items()}).logits",
        "print(choices[int(logits.argmax())])",
    ]


def _usage_features(text: str, _: str | None) -> list[str]:
    return [
        f'inputs = tokenizer(["{text}"], return_tensors="pt", padding=True)',
        "with torch.no_grad():",
        "    hidden = model(**inputs).last_hidden_state",
        "mask = inputs.attention_mask.unsqueeze(-1)",
        "embedding = (hidden * mask).sum(1) / mask.sum(1)  # mean pooling",
    ]


_USAGE_BODIES = {
    "text-classification": _usage_classify,
    "token-classification": _usage_tokens,
    "question-answering": _usage_qa,
    "fill-mask": _usage_fill_mask,
    "multiple-choice": _usage_choice,
    "feature-extraction": _usage_features,
}


# ---------------------------------------------------------------- the card


def task_card(model_dir: Path, run_metrics: dict) -> reporting.Card | None:
    """The task's part of the card for a model another library loads (bertkit/tasks/reporting.py Card); None for a
    transformers model, whose card is written here from the table of tasks."""
    part = tasks.task_part(tasks.sentence_transformers_kind(str(model_dir)) or "", "Card")
    return part(model_dir, run_metrics) if part else None


def _collect(model_dir: Path, base_model, language, license, datasets, repo_id) -> dict:
    """Everything the card says, gathered from the model dir and the caller's arguments."""
    model_config = _read_model_config(model_dir)
    cfg = _read_yaml(model_dir / "bertkit_config.yaml") if (model_dir / "bertkit_config.yaml").is_file() else {}
    tag, auto_class = task_of(model_config)
    base = base_model or _hub_id(_model_name(cfg)) or _hub_id(model_config.get("base_model_name_or_path"))
    language = language or _as_list(_lookup(cfg, "language", "data.language"))
    datasets = datasets or _as_list(_hub_id(_lookup(cfg, "data.dataset", "dataset")))
    lora = _lora(cfg) is not None or "peft_type" in model_config
    data_files = _data_files(cfg)
    eval_file = next((p for s, p in data_files if s in ("validation", "eval", "test")), None)
    run_metrics = _read_json(model_dir / "metrics.json") if (model_dir / "metrics.json").is_file() else {}
    run_metrics = run_metrics if isinstance(run_metrics, dict) else {}
    part = task_card(model_dir, run_metrics)
    tag = part.tag if part else tag  # a CrossEncoder's architecture is a sequence classifier's: its task is ranking
    labels = _labels(model_config, tag)
    family = FAMILIES.get(model_config.get("model_type"), FAMILIES["bert"])
    return {
        "name": (repo_id or model_dir.resolve().name).split("/")[-1],
        "repo_id": repo_id or _PLACEHOLDER_REPO,
        "tag": tag,
        "auto_class": auto_class,
        "problem_type": model_config.get("problem_type"),
        "base_model": base,
        "language": list(language) if language else None,
        "license": license,
        "datasets": list(datasets) if datasets else None,
        "tags": ["bertkit", family.model_type if family.model_type != "bertkit" else "bert", tag]
        + (part.tags if part else []) + (["lora"] if lora else []),
        "library": part.library if part else "transformers",
        "task_card": part,
        "base_metrics": run_metrics.get("base_eval") if isinstance(run_metrics.get("base_eval"), dict) else {},
        "family": family,
        "architecture": next(iter(model_config.get("architectures") or []), None),
        "recipe": _lookup(cfg, "recipe", "recipe.name"),
        "hparams": chosen_hyperparameters(hyperparameters(cfg), run_metrics),
        "data_files": data_files,
        **card_metrics(model_dir, read_metrics(model_dir / "metrics.json"), [name for _, name in labels]),
        **({"metrics": part.metrics()} if part and part.metrics() is not None else {}),
        "selection": selection_section(run_metrics),
        "dataset_type": datasets[0] if datasets else "custom",
        "dataset_name": datasets[0] if datasets else (eval_file or "custom"),
        "curve": (model_dir / "training_curve.png").is_file(),
        "figures": [name for name in (CONFUSION_FIGURE, ENTITY_FIGURE) if (model_dir / name).is_file()],
        "report": (model_dir / "report.html").is_file(),
        "labels": labels,
        "bertkit_only": bertkit_only_reason(model_config) if family.implementation == "bertkit" else None,
        "document_model": any("ForDocumentClassification" in str(arch)
                              for arch in model_config.get("architectures") or []),
        "temperature": (model_config.get("bertkit_task_settings") or {}).get("temperature"),
    }


def _as_list(value: Any) -> list[str] | None:
    if isinstance(value, str) and value:
        return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) and value else None


def _check(text: str) -> None:
    """Parse the card back with huggingface_hub, offline: a front matter it cannot read would be rejected by the
    Hub after the weights were uploaded."""
    try:
        card = ModelCard(text)
    except ValueError as err:
        raise BertkitError(f"generated model card has invalid metadata ({err}); please report this bug") from err
    if card.data.get("pipeline_tag") is None:
        raise BertkitError("generated model card lost its pipeline_tag; please report this bug")


def render_model_card(
    model_dir: Path | str,
    base_model: str | None = None,
    language: list[str] | None = None,
    license: str = "apache-2.0",
    datasets: list[str] | None = None,
    repo_id: str | None = None,
) -> str:
    """README.md text for `model_dir`: Hub front matter (incl. `model-index`) + a body a reader can act on.

    `repo_id` goes into the "How to use" snippet and names the model-index entry; without it a placeholder is
    written. Defaults come from bertkit_config.yaml: `base_model` from its `model` when that is a Hub id,
    `language` from `language` / `data.language`, `datasets` from `data.dataset` when that is a Hub id.
    """
    model_dir = Path(model_dir)
    card = _collect(model_dir, base_model, language, license, datasets, repo_id)
    text = _front_matter(card) + "\n" + _body(card)
    _check(text)
    return text


__all__ = ["render_model_card", "read_metrics", "task_of", "hyperparameters", "CARD_CLASSES", "PER_CLASS_PREFIXES",
           "REPORT_FILE", "report_supports", "bounded_metrics", "card_metrics", "selection_section",
           "chosen_hyperparameters", "usage_snippet"]
