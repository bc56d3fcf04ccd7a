"""Multiple choice (SWAG / RACE / C3 style): reading, encoding, the collator, and `bertkit predict` / `evaluate`.

    read_examples("dev.jsonl")                  -> [ChoiceExample(context, question, options, label, where)]
    encode(tokenizer, examples, 128)            -> one feature per example: N (context, question + option) pairs
    MultipleChoiceCollator(tokenizer)(features) -> input_ids / attention_mask / token_type_ids (B, N, T), labels (B,)

Rows are `{"context", "question", "options": [...], "label": index}` (JSONL, a JSON array, or any table bertkit
reads with an `options` list column). `label` may also be the text of the right option. Every example of a file
must have the same number of options: a row with another count is an error naming its line, not silently padded.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertkit.tasks import reporting, serving
from ..checkpoints import load_finetuned, load_tokenizer
from ..console import ExamplesProgress
from ..datafiles import read_table, row_location
from ..errors import BertkitError
from ..inference import run_batch, softmax, token_budget_batches
from ..modeling_bert import BertkitForMultipleChoice
from ..report_html import PREDICTED_EXAMPLES, SHOWN_EXAMPLES, esc, missing, section
from ..rundir import atomic_output, check_output_path, write_json
from . import SETTINGS_KEY, no_confidence_cut, read_settings
CONTEXT_KEYS = ("context", "article", "passage", "sent1", "premise", "文章", "上下文")
QUESTION_KEYS = ("question", "sent2", "stem", "问题")
OPTIONS_KEYS = ("options", "choices", "endings", "选项")
LABEL_KEYS = ("label", "answer", "labels", "答案")


@dataclass
class ChoiceExample:
    context: str
    question: str
    options: list[str]
    label: int | None  # None when the file has no labels (predict)
    where: str  # "dev.jsonl line 7"


def _pick(names: list[str], candidates: tuple[str, ...]) -> str | None:
    lowered = {name.lower(): name for name in names}
    return next((lowered[c] for c in candidates if c in lowered), None)


def _label_index(value, options: list[str], where: str) -> int:
    """An option index (0-based int or a digit string), a letter A-D..., or the text of one of the options."""
    if isinstance(value, bool) or value is None:
        raise BertkitError(f"{where}: label {value!r} is not an option index — give 0..{len(options) - 1}")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, str):
        text = value.strip()
        if text in options:
            return options.index(text)
        if len(text) == 1 and "A" <= text.upper() < chr(ord("A") + len(options)):
            return ord(text.upper()) - ord("A")
        raise BertkitError(f"{where}: label {value!r} is neither an option index nor one of the options — give "
                           f"0..{len(options) - 1} or the exact option text")
    if not isinstance(value, (int, np.integer)) or not 0 <= value < len(options):
        raise BertkitError(f"{where}: label {value!r} is out of range for {len(options)} options — give "
                           f"0..{len(options) - 1}")
    return int(value)


def read_examples(path: str, labelled: bool = True) -> list[ChoiceExample]:
    """Examples of a file, every row checked: text fields, an options list of the same length as the first row's,
    and (labelled) a label that names one of the options."""
    table = read_table(path)
    names = list(table.column_names)
    context_key, question_key = _pick(names, CONTEXT_KEYS), _pick(names, QUESTION_KEYS)
    options_key, label_key = _pick(names, OPTIONS_KEYS), _pick(names, LABEL_KEYS)
    if options_key is None or (context_key is None and question_key is None):
        raise BertkitError(f"{path} needs a context and/or question column and an options list (columns: "
                           f"{', '.join(names)}) — write {{\"context\", \"question\", \"options\": [...], "
                           f"\"label\"}}")
    if labelled and label_key is None:
        raise BertkitError(f"{path} has no label column (columns: {', '.join(names)}) — add \"label\": <option "
                           f"index>")
    examples, first = [], None
    for index, row in enumerate(table):
        where = f"{path} {row_location(table, index)}"
        options = row[options_key]
        if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) for o in options):
            raise BertkitError(f"{where}: \"{options_key}\" must be a list of at least two strings")
        first = first or (len(options), where)
        if len(options) != first[0]:
            raise BertkitError(f"{where} has {len(options)} options but {first[1]} has {first[0]} — every example "
                               f"needs the same number of options: add or drop options on that line")
        context = row.get(context_key) if context_key else ""
        question = row.get(question_key) if question_key else ""
        if not isinstance(context or "", str) or not isinstance(question or "", str):
            raise BertkitError(f"{where}: context and question must be strings")
        label = _label_index(row[label_key], options, where) if labelled else None
        examples.append(ChoiceExample(context or "", question or "", list(options), label, where))
    return examples


def encode(tokenizer, examples: list[ChoiceExample], max_length: int) -> list[dict]:
    """One feature per example holding N encodings of (context, question + option) as segments A / B. A pair longer
    than max_length loses tokens from its longer segment first (usually the context), so options stay whole."""
    firsts = [example.context for example in examples for _ in example.options]
    seconds = [" ".join(part for part in (example.question, option) if part)
               for example in examples for option in example.options]
    encoded = tokenizer(firsts, seconds, truncation=True, max_length=max_length)
    features, position = [], 0
    for example in examples:
        count = len(example.options)
        feature = {key: encoded[key][position:position + count] for key in encoded.keys()}
        if example.label is not None:
            feature["labels"] = example.label
        features.append(feature)
        position += count
    return features


class MultipleChoiceCollator:
    """Pads all options of all examples to the batch's longest encoding: (B, N, T) tensors, labels (B,)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features: list[dict]) -> dict:
        counts = {len(feature["input_ids"]) for feature in features}
        if len(counts) != 1:
            raise BertkitError(f"a batch mixes examples with {sorted(counts)} options — every example needs the same "
                               f"number of options")
        num_choices = counts.pop()
        keys = [key for key in features[0] if key != "labels"]
        flat = [{key: feature[key][i] for key in keys} for feature in features for i in range(num_choices)]
        batch = self.tokenizer.pad(flat, return_tensors="pt")
        batch = {key: value.view(len(features), num_choices, -1) for key, value in batch.items()}  # (B*N,T)->(B,N,T)
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([feature["labels"] for feature in features], dtype=torch.long)
        return batch


def accuracy(logits: np.ndarray, labels) -> dict:
    """Share of examples whose highest-scoring option is the labelled one."""
    return {"accuracy": float(np.mean(np.asarray(logits).argmax(-1) == np.asarray(labels)))}


def compute_metrics_fn():
    """The Trainer `compute_metrics`: accuracy of the eval set's option logits."""

    def compute_metrics(eval_prediction) -> dict:
        logits = eval_prediction.predictions
        return accuracy(logits[0] if isinstance(logits, tuple) else logits, eval_prediction.label_ids)

    return compute_metrics


@dataclass
class Settings:
    max_length: int = 128
    """Tokens per (context, question + option) pair, [CLS] and [SEP]s included; the longer segment is cut first."""

    def check(self) -> None:
        """Raise a one-line BertkitError naming the key when a saved value cannot work."""
        if self.max_length < 4:  # [CLS] context [SEP] option [SEP]
            raise BertkitError(f"{SETTINGS_KEY}.max_length={self.max_length} leaves no room for text after [CLS] "
                               f"and two [SEP] — it must be at least 4")


# ================================================================================================ predict / evaluate


@dataclass
class Chooser:
    """A saved multiple-choice model, its tokenizer, and the settings it was trained with."""

    model: BertkitForMultipleChoice
    tokenizer: object
    settings: Settings


def load_predictor(model_dir: str) -> Chooser:
    """A choice run's output directory: the model, its tokenizer and its saved Settings (a checkpoint that saved none,
    not trained by bertkit: pairs as long as its positions allow, up to 512 tokens)."""
    model = load_finetuned(BertkitForMultipleChoice, model_dir, "choice")
    source = str(Path(model_dir) / "config.json")
    settings = read_settings(Settings, model.config, source)
    if getattr(model.config, SETTINGS_KEY, None) is None:
        settings = dataclasses.replace(settings, max_length=min(512, model.config.max_position_embeddings))
    return Chooser(model, load_tokenizer(model_dir), settings)


@torch.inference_mode()
def predict_probabilities(chooser: Chooser, examples: list[ChoiceExample], batch_size: int = 64) -> np.ndarray:
    """(examples, N) option probabilities, in input order; length-sorted batches under a token budget."""
    features = encode(chooser.tokenizer, examples, chooser.settings.max_length)
    for feature in features:
        feature.pop("labels", None)
    lengths = [max(len(ids) for ids in f["input_ids"]) * len(f["input_ids"]) for f in features]
    collate, results = MultipleChoiceCollator(chooser.tokenizer), [None] * len(features)
    with ExamplesProgress("choosing", len(features)) as progress:
        for batch in token_budget_batches(lengths, batch_size * chooser.settings.max_length, batch_size):
            logits = run_batch(chooser.model, collate([features[i] for i in batch])).logits.float().cpu().numpy()
            probs = softmax(logits)  # (B, N choices), one call per batch
            for row, index in enumerate(batch):
                results[index] = probs[row]
            progress.advance(len(batch))
    return np.stack(results)


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """The chosen option of every example, in input order, as JSONL: {"question", "choice" (index), "option"
    (its text), "score", "probabilities" (one per option)}."""
    no_confidence_cut(min_confidence, "choice")
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir],
                                    suffixes=(".jsonl", ".json"))
    chooser = load_predictor(model_dir)
    examples = read_examples(input_path, labelled=False)
    probs = predict_probabilities(chooser, examples, batch_size)
    with atomic_output(output_path, "predictions") as handle:
        for example, row in zip(examples, probs):
            best = int(row.argmax())
            record = {"question": example.question, "choice": best, "option": example.options[best],
                      "score": round(float(row[best]), 6), "probabilities": [round(float(p), 6) for p in row]}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(examples)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Accuracy of the model on a labelled file."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    chooser = load_predictor(model_dir)
    examples = read_examples(input_path)
    probs = predict_probabilities(chooser, examples, batch_size)
    metrics = accuracy(probs, [example.label for example in examples])
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "examples": len(examples), **metrics})
    return metrics


# ================================================================================================ serving


class Endpoint(serving.Endpoint):
    """{context, question, options} in; the chosen option, its score and every option's probability out."""

    name = "choice"
    form, many = ("context", "question", "options"), ("options",)

    def body_of(self, values: dict) -> dict:
        return {"inputs": [{key: values[key] for key in self.form}]}

    def __init__(self, run_dir: str):
        self.predictor = chooser = load_predictor(run_dir)
        self.count = serving.token_counter(chooser.tokenizer, chooser.settings.max_length)
        self.info = {"max_length": chooser.settings.max_length}

    def parse(self, inputs) -> list:
        examples = []
        for i, value in enumerate(serving.items(inputs)):
            where = f"inputs[{i}]"
            options = value.get("options", value.get("choices")) if isinstance(value, dict) else None
            if not isinstance(options, list) or len(options) < 2 or \
                    set(value) - {"context", "question", "options", "choices"}:
                raise serving.InputError(f"{where} must be {{\"context\", \"question\", \"options\": [at least two]}}")
            examples.append(ChoiceExample(serving.text(value.get("context", ""), f"{where}.context"),
                                          serving.text(value.get("question", ""), f"{where}.question"),
                                          [serving.text(o, f"{where}.options[{j}]") for j, o in enumerate(options)],
                                          None, where))
        return examples

    def chars(self, example) -> int:
        return len(example.context) + len(example.question) + sum(len(o) for o in example.options)

    def tokens(self, examples: list) -> list[int]:
        return [sum(self.count([e.context] * len(e.options), [f"{e.question} {o}" for o in e.options]))
                for e in examples]

    def predict(self, examples: list) -> list[dict]:
        records = []
        for example, row in zip(examples, predict_probabilities(self.predictor, examples)):
            best = int(row.argmax())
            records.append({"question": example.question, "choice": best, "option": example.options[best],
                            "score": round(float(row[best]), 6), "probabilities": [round(float(p), 6) for p in row]})
        return records


# ------------------------------------------------------------------------------------------------ its report


class Report(reporting.Report):
    """The choice part of report.html: dev questions with their options, gold and chosen marked."""

    def chance(self, view, examples: dict) -> tuple[float, str] | None:
        if not examples.get("choice"):
            return None
        options = [len(e["options"]) for e in examples["choice"]]
        return sum(1 / n for n in options) / len(options), "picking an option at random"

    def examples(self, view) -> dict:
        why = reporting.cannot_run_on_dev(view)
        if why:
            return {"why": why}
        chooser = load_predictor(str(view.path))
        examples = read_examples(view.dev_file)[:PREDICTED_EXAMPLES]
        probs = predict_probabilities(chooser, examples)
        rows = [{"context": e.context, "question": e.question, "options": e.options, "label": e.label,
                 "chosen": int(p.argmax()), "probs": [float(v) for v in p]} for e, p in zip(examples, probs)]
        return {"choice": rows, "keys": [r["context"][:80] + " | " + r["question"] for r in rows],
                "predicted": [r["options"][r["chosen"]] for r in rows]}

    def sections(self, view, examples: dict, diagnosis) -> str:
        items = examples.get("choice")
        if not items:
            return section("Dev questions and options", missing(examples.get("why") or "no dev predictions"), 3)
        wrong = [e for e in items if e["chosen"] != e["label"]]
        out = []
        for e in (wrong + [e for e in items if e["chosen"] == e["label"]])[:SHOWN_EXAMPLES]:
            options = "".join(
                f"<li>{'✅ ' if i == e['label'] else ''}{'👉 ' if i == e['chosen'] else ''}{esc(option)} "
                f'<span class="note">({e["probs"][i]:.2f})</span></li>' for i, option in enumerate(e["options"]))
            out.append(f'<div class="ex">{esc(e["context"])}<br><strong>{esc(e["question"])}</strong>'
                       f'<ul class="opts">{options}</ul></div>')
        intro = (f"<p>{len(wrong)} of {len(items)} dev questions answered wrongly; ✅ gold, 👉 chosen (probability)"
                 "</p>")
        return section("Dev questions and options", intro + "".join(out), 3)



__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "ChoiceExample", "Chooser", "MultipleChoiceCollator", "accuracy",
           "predict_probabilities", "Endpoint", "Report"]
