"""A fine-tuned NER model at work: the tagger loaded with its saved settings, entity spans for a file of texts
(`bertkit predict`), and entity-level metrics on a labelled file (`bertkit evaluate`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertkit.checkpoints import load_finetuned, load_tokenizer
from bertkit.console import ExamplesProgress, say
from bertkit.errors import BertkitError
from bertkit.inference import run_batch, token_budget_batches
from bertkit.modeling_bert import BertkitForTokenClassification
from bertkit.rundir import atomic_output, check_output_path, write_json
from bertkit.tasks import read_settings

from .encode import encode
from .read import read_examples, read_texts
from .scoring import decode, entities_from_tags, score_tags
from .settings import Settings, legacy_settings
from .words import Sentence


@dataclass
class Tagger:
    """A fine-tuned token classifier with its tokenizer, labels and saved settings: what predict and evaluate run."""

    model: BertkitForTokenClassification
    tokenizer: object
    id2label: dict[int, str]
    settings: Settings  # max_length resolved: never None here


def load_predictor(model_dir: str) -> Tagger:
    """The model, its tokenizer and labels, and the settings its run saved (or, for an older run, kept in its
    recipe config and config.json)."""
    model = load_finetuned(BertkitForTokenClassification, model_dir, "ner")
    settings = read_settings(Settings, model.config, str(Path(model_dir) / "config.json"),
                             legacy=legacy_settings(model_dir, model.config))
    max_length = settings.max_length or min(512, model.config.max_position_embeddings)
    return Tagger(model, load_tokenizer(model_dir), {int(k): v for k, v in model.config.id2label.items()},
                  dataclasses.replace(settings, max_length=max_length))


@torch.inference_mode()
def predict_word_probabilities(tagger: Tagger, sentences: list[Sentence], batch_size: int = 64) -> list[np.ndarray]:
    """(words, C) probabilities per sentence: windows run in length-sorted batches under a token budget."""
    max_length = tagger.settings.max_length
    windows = encode(tagger.tokenizer, sentences, max_length, tagger.settings.stride)
    lengths = [len(f["input_ids"]) for f in windows.features]
    rows: list[np.ndarray | None] = [None] * len(lengths)
    with ExamplesProgress("tagging", len(sentences)) as progress:  # windows count as their share of sentences
        for batch in token_budget_batches(lengths, batch_size * max_length, batch_size):
            padded = tagger.tokenizer.pad([windows.features[i] for i in batch], return_tensors="pt")
            probs = run_batch(tagger.model, padded).logits.float().softmax(-1).cpu().numpy()  # (B, T, C)
            for row, index in enumerate(batch):
                rows[index] = probs[row, 1:lengths[index] - 1]
            progress.advance(len(batch) * len(sentences) / max(len(lengths), 1))
    o_id = {v: k for k, v in tagger.id2label.items()}["O"]
    return windows.word_probabilities(rows, o_id, len(tagger.id2label))


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64) -> int:
    """Entity spans for every text of a file, in input order, as JSONL: {"text", "entities": [{"text", "type",
    "start", "end", "score"}]} with character offsets into "text"."""
    if Path(output_path).suffix.lower() not in (".jsonl", ".json"):
        raise BertkitError(f"output file {output_path}: NER predictions are nested (entities per text) — use a "
                           f".jsonl name")
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir])
    tagger = load_predictor(model_dir)
    sentences = read_texts(input_path, tagger.settings.split)
    probs = predict_word_probabilities(tagger, sentences, batch_size)
    with atomic_output(output_path, "predictions") as handle:
        for sentence, word_probs in zip(sentences, probs):
            tags, scores = decode(word_probs, tagger.id2label)
            record = {"text": sentence.text, "entities": entities_from_tags(sentence, tags, scores)}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(sentences)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Entity-level metrics on a labelled CoNLL / JSONL file, read with the options of the training run."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    tagger = load_predictor(model_dir)
    data = read_examples(input_path, tagger.settings.read_options())
    for note in data.notes:
        say(note)
    probs = predict_word_probabilities(tagger, data.sentences, batch_size)
    predicted = [decode(p, tagger.id2label)[0] for p in probs]
    metrics = score_tags(predicted, [s.tags for s in data.sentences], tagger.settings.strict, tagger.settings.scheme)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "sentences": len(data.sentences), **metrics})
    return metrics


__all__ = ["Tagger", "load_predictor", "predict_word_probabilities", "predict_file", "evaluate_file"]
