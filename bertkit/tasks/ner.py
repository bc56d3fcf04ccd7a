"""Named-entity recognition: the ner task, shared by recipes/ner.py, `bertkit predict` and `bertkit evaluate`.

    read_examples("train.conll", ReadOptions())  -> NerData(sentences=[Sentence(words, tags, ...)], scheme="IOB2")
    encode(tokenizer, sentences, 128, 32, label2id)  -> SentenceWindows: overlapping token windows + labels
    windows.word_probabilities(window_probs, o_id, C)  -> one (words, C) array per sentence
    entities_from_tags(sentence, tags, scores)       -> [{"text", "type", "start", "end", "score"}]

Inputs: CoNLL-style column files and JSONL rows of tokens + tags or text + character-offset entities, raw text split
into words the way BERT's basic tokenizer splits it, or one word per character (bertkit/tasks/ner_files.py). Tags may
be IOB2, IOB1 (converted to IOB2) or BIOES (bertkit/tasks/ner_tag_schemes.py).

Here: labels go on each word's first sub-token; the others get -100, or with `label_all_tokens` the I- tag of the
word's entity. Long sentences are cut into overlapping windows (the sliding-window rule of
bertkit/tasks/long_documents.py), and each word takes the prediction of the window where its first sub-token is most
central. Predictions are decoded into entity spans with character offsets and scored per entity (seqeval), for the
Trainer's evaluation and for `bertkit evaluate`, by the tagger, which reads the inference settings its run saved with
the model (config.json, under tasks.SETTINGS_KEY).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from bertkit.tasks import reporting, serving
from bertkit.checkpoints import load_finetuned, load_tokenizer
from bertkit.console import ExamplesProgress, say
from bertkit.errors import BertkitError, ConfigValueError
from bertkit.inference import run_batch, softmax, token_budget_batches
from bertkit.metrics import SEQEVAL_SCHEMES, SeqevalMetric
from bertkit.modeling_bert import BertkitForTokenClassification
from bertkit.report_html import (PREDICTED_EXAMPLES, SHOWN_EXAMPLES, bar_chart, highlight, missing, per_class_rows,
                                 section)
from bertkit.rundir import atomic_output, check_output_path, write_json
from bertkit.tasks import SETTINGS_KEY, no_confidence_cut, read_settings
from bertkit.datafiles import json_lines, read_table, read_text, row_location
from bertkit.tasks.label_issues import (Issue, by_name, check_fold_count, is_json_array, kfold, location_number,
                                        token_issues, write_json_records)
from bertkit.tasks.long_documents import sliding_windows
from bertkit.tasks.ner_files import NerData, ReadOptions, Sentence, read_examples, read_texts, split_words
from bertkit.tasks.ner_tag_schemes import (SCHEMES, continuation_ids, label_names, repair_tags, scheme_violations,
                                           spans_to_tags, split_tag, tags_to_spans)


# ------------------------------------------------------------------------------------------------ encoding


IGNORE_INDEX = -100


def align_labels(word_ids: list[int | None], word_labels: list[int], continuation: dict[int, int] | None = None,
                 label_all_tokens: bool = False) -> list[int]:
    """One label per sub-token: the word's label on its first sub-token; on the others -100, or with
    label_all_tokens the continuation label (I-<type> of the entity, O for O). Special tokens (None) get -100."""
    labels, previous = [], None
    for word in word_ids:
        if word is None:
            labels.append(IGNORE_INDEX)
        elif word != previous:
            labels.append(word_labels[word])
        else:
            labels.append(continuation[word_labels[word]] if label_all_tokens else IGNORE_INDEX)
        previous = word
    return labels


def first_tokens(word_ids: list[int | None], num_words: int) -> list[int | None]:
    """Index of each word's first sub-token; None for a word that became no token at all (e.g. U+200B alone)."""
    first: list[int | None] = [None] * num_words
    for position, word in enumerate(word_ids):
        if word is not None and first[word] is None:
            first[word] = position
    return first


def sentence_windows(num_tokens: int, max_length: int, stride: int) -> list[tuple[int, int]]:
    """[start, end) sub-token ranges of a sentence's windows: the one sliding-window rule with full windows (the last
    moved back to end at the sentence's end), max_length - 2 sub-tokens each beside [CLS] / [SEP]. A sentence of no
    tokens gets no window, so it has no rows to predict (its words fall back to O)."""
    spans = sliding_windows(num_tokens, max_length - 2, stride, full_last=True)
    return spans if num_tokens else []


def stitch_windows(spans: list[tuple[int, int]], window_values: list[np.ndarray], num_tokens: int) -> np.ndarray:
    """Per-token rows from overlapping windows: each token takes the row of the window where it is most central
    (largest distance to the window's nearer edge; the earlier window on a tie). (num_tokens, C)."""
    width = window_values[0].shape[-1] if window_values else 0
    stitched = np.zeros((num_tokens, width), dtype=np.float32)
    best = np.full(num_tokens, -1)
    for (start, end), values in zip(spans, window_values):
        positions = np.arange(start, end)
        centrality = np.minimum(positions - start, end - 1 - positions)
        better = centrality > best[start:end]
        stitched[start:end][better] = values[better]
        best[start:end][better] = centrality[better]
    return stitched


@dataclass
class SentenceWindows:
    """Sentences as model rows: overlapping windows of sub-tokens, and what stitches them back into words."""

    features: list[dict]  # one per window: input_ids, attention_mask, token_type_ids [, labels]
    owner: list[int]  # the sentence of each window
    spans: list[tuple[int, int]]  # the window's [start, end) in its sentence's sub-tokens
    first_tokens: list[list[int | None]]  # per sentence, each word's first sub-token
    num_tokens: list[int]  # per sentence

    def word_probabilities(self, window_values: list[np.ndarray], fallback: int, width: int) -> list[np.ndarray]:
        """(words, width) per sentence from each window's (window tokens, width) rows; a word without sub-tokens
        gets a one-hot row at `fallback` (the O label)."""
        by_sentence: list[list[int]] = [[] for _ in self.first_tokens]
        for index, sentence in enumerate(self.owner):
            by_sentence[sentence].append(index)
        results = []
        for sentence, indices in enumerate(by_sentence):
            tokens = stitch_windows([self.spans[i] for i in indices], [window_values[i] for i in indices],
                                    self.num_tokens[sentence])
            rows = np.zeros((len(self.first_tokens[sentence]), width), dtype=np.float32)
            for word, position in enumerate(self.first_tokens[sentence]):
                if position is None:
                    rows[word, fallback] = 1.0
                else:
                    rows[word] = tokens[position]
            results.append(rows)
        return results


def encode(tokenizer, sentences: list[Sentence], max_length: int, stride: int,
           label2id: dict[str, int] | None = None, label_all_tokens: bool = False) -> SentenceWindows:
    """Tokenize whole sentences (is_split_into_words), then cut each into windows of max_length - 2 sub-tokens
    plus [CLS] / [SEP]. With label2id, each window carries its aligned labels."""
    if not getattr(tokenizer, "is_fast", False):
        raise BertkitError("NER needs a fast tokenizer (word_ids) — save the model with its tokenizer.json")
    windows = SentenceWindows([], [], [], [], [])
    if not sentences:
        return windows
    encoded = tokenizer([s.words for s in sentences], is_split_into_words=True, add_special_tokens=False)
    continuation = continuation_ids(label2id) if label2id else None
    for index, sentence in enumerate(sentences):
        ids, word_ids = encoded["input_ids"][index], encoded.word_ids(index)
        windows.first_tokens.append(first_tokens(word_ids, len(sentence.words)))
        windows.num_tokens.append(len(ids))
        labels = None
        if label2id is not None:
            word_labels = [_label_id(label2id, tag, sentence, i) for i, tag in enumerate(sentence.tags)]
            labels = align_labels(word_ids, word_labels, continuation, label_all_tokens)
        for start, end in sentence_windows(len(ids), max_length, stride):
            windows.features.append(_window_row(tokenizer, ids, labels, start, end))
            windows.owner.append(index)
            windows.spans.append((start, end))
    return windows


def _window_row(tokenizer, ids: list[int], labels: list[int] | None, start: int, end: int) -> dict:
    """[CLS] ids[start:end] [SEP] as one model row, with its labels (-100 on [CLS] / [SEP]) when there are labels."""
    row = {"input_ids": [tokenizer.cls_token_id, *ids[start:end], tokenizer.sep_token_id],
           "attention_mask": [1] * (end - start + 2), "token_type_ids": [0] * (end - start + 2)}
    if labels is not None:
        row["labels"] = [IGNORE_INDEX, *labels[start:end], IGNORE_INDEX]
    return row


def _label_id(label2id: dict[str, int], tag: str, sentence: Sentence, index: int) -> int:
    if tag not in label2id:
        raise BertkitError(f"{sentence.location(index)}: tag {tag} is not among the model's labels "
                           f"({', '.join(label2id)}) — the training data has no entity of that type")
    return label2id[tag]


def window_rows(logits: np.ndarray, windows: SentenceWindows) -> list[np.ndarray]:
    """Trainer's padded (windows, T, C) logits -> each window's probabilities at its real tokens ([CLS] and
    [SEP] dropped)."""
    return [softmax(logits[i, 1:1 + end - start]) for i, (start, end) in enumerate(windows.spans)]


# ------------------------------------------------------------------------------------------------ decoding and scoring


def entities_from_tags(sentence: Sentence, tags: list[str], scores: np.ndarray) -> list[dict]:
    """Entity spans of one sentence: text, type, character offsets into sentence.text (end exclusive) and score,
    the mean over the entity's words of the predicted tag's probability."""
    entities = []
    for first, end, kind in tags_to_spans(tags):
        start_char, end_char = sentence.offsets[first][0], sentence.offsets[end - 1][1]
        entities.append({"text": sentence.text[start_char:end_char], "type": kind, "start": start_char,
                         "end": end_char, "score": round(float(np.mean(scores[first:end])), 4)})
    return entities


def decode(probs: np.ndarray, id2label: dict[int, str]) -> tuple[list[str], np.ndarray]:
    """(words, C) probabilities -> the predicted tags and each one's probability."""
    best = probs.argmax(-1)
    return [id2label[int(i)] for i in best], probs[np.arange(len(best)), best]


def score_tags(predicted: list[list[str]], gold: list[list[str]], strict: bool, scheme: str) -> dict:
    """Entity-level precision / recall / F1 (micro) and per type, with seqeval; strict mode under `scheme`."""
    options = {"mode": "strict", "scheme": scheme} if strict else {}
    return SeqevalMetric().compute(predictions=predicted, references=gold, **options)


def entity_report(predicted: list[list[str]], gold: list[list[str]], strict: bool, scheme: str) -> str:
    """seqeval's per-type table as text (for entity_report.txt)."""
    import warnings

    from seqeval.metrics import classification_report

    options = {"mode": "strict", "scheme": SEQEVAL_SCHEMES[scheme]} if strict else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return classification_report(gold, predicted, digits=4, zero_division=0, **options)


def predicted_tags(logits: np.ndarray, windows: SentenceWindows, id2label: dict[int, str]) -> list[list[str]]:
    """Trainer's padded (windows, T, C) logits -> each sentence's predicted tags, one per word."""
    o_id = {v: k for k, v in id2label.items()}["O"]
    word_probs = windows.word_probabilities(window_rows(logits, windows), o_id, len(id2label))
    return [decode(p, id2label)[0] for p in word_probs]


def compute_metrics_fn(windows: SentenceWindows, sentences: list[Sentence], id2label: dict[int, str],
                       strict: bool, scheme: str):
    """A Trainer `compute_metrics` that stitches the eval windows back into sentences and scores words."""

    def compute_metrics(eval_prediction):
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        return score_tags(predicted_tags(logits, windows, id2label), [s.tags for s in sentences], strict, scheme)

    return compute_metrics


# ------------------------------------------------------------------------------------------------ settings


MIN_MAX_LENGTH = 8  # [CLS], [SEP] and a few tokens of text, as the recipe requires


@dataclass
class Settings:
    scheme: Literal["IOB2", "BIOES"] = "IOB2"
    """Tag scheme the model predicts (IOB1 training files became IOB2); evaluate scores under it."""
    file_scheme: Literal["auto", "IOB2", "IOB1", "BIOES"] = "auto"
    """Scheme of the training files (the recipe's data.scheme); evaluate reads labelled files in it (auto: scheme)."""
    repair_tags: bool = False
    """Evaluate repairs tags that break the scheme instead of stopping, as the training run did."""
    skip_bad_examples: bool = False
    """Evaluate skips (and counts) bad examples instead of stopping, as the training run did."""
    split: Literal["bert", "chars"] = "bert"
    """How raw text becomes words: bert (whitespace, punctuation, each CJK character) or chars (every character)."""
    max_length: int | None = None
    """Tokens per window, [CLS] and [SEP] included (None: the model's positions, at most 512)."""
    stride: int = 32
    """Tokens that consecutive windows share."""
    strict: bool = False
    """Score entities in seqeval's strict mode under the scheme (default: conlleval's lenient reading)."""

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Refuse a window that cannot work, naming the key (one line)."""
        if self.max_length is not None and self.max_length < MIN_MAX_LENGTH:
            raise ConfigValueError(f"{SETTINGS_KEY}.max_length", f"{SETTINGS_KEY}.max_length must be at least "
                                   f"{MIN_MAX_LENGTH} ([CLS], [SEP] and some text), got {self.max_length}")
        room = self.max_length - 2 if self.max_length is not None else None
        if self.stride < 0 or (room is not None and self.stride >= room):
            raise ConfigValueError(f"{SETTINGS_KEY}.stride", f"{SETTINGS_KEY}.stride must be 0 or more and below the "
                                   f"{room} tokens of a window (max_length - 2), got {self.stride}")

    def read_options(self) -> ReadOptions:
        """How evaluate reads a labelled file: with the training run's scheme, repair, skip and split options."""
        file_scheme = self.file_scheme if self.file_scheme in SCHEMES else self.scheme  # IOB1 files convert
        return ReadOptions(scheme=file_scheme, repair=self.repair_tags, skip_bad=self.skip_bad_examples,
                           split=self.split)


# ------------------------------------------------------------------------------------------------ predict / evaluate


@dataclass
class Tagger:
    """A fine-tuned token classifier with its tokenizer, labels and saved settings: what predict and evaluate run."""

    model: BertkitForTokenClassification
    tokenizer: object
    id2label: dict[int, str]
    settings: Settings  # max_length resolved: never None here


def load_predictor(model_dir: str) -> Tagger:
    """The model, its tokenizer and labels, and the settings its run saved (the defaults where it saved none)."""
    model = load_finetuned(BertkitForTokenClassification, model_dir, "ner")
    settings = read_settings(Settings, model.config, str(Path(model_dir) / "config.json"))
    max_length = settings.max_length or min(512, model.config.max_position_embeddings)
    return Tagger(model, load_tokenizer(model_dir, words=True), {int(k): v for k, v in model.config.id2label.items()},
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
            probs = softmax(run_batch(tagger.model, padded).logits.float().cpu().numpy())  # (B, T, C)
            for row, index in enumerate(batch):
                rows[index] = probs[row, 1:lengths[index] - 1]
            progress.advance(len(batch) * len(sentences) / max(len(lengths), 1))
    o_id = {v: k for k, v in tagger.id2label.items()}["O"]
    return windows.word_probabilities(rows, o_id, len(tagger.id2label))


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """Entity spans for every text of a file, in input order, as JSONL: {"text", "entities": [{"text", "type",
    "start", "end", "score"}]} with character offsets into "text"."""
    no_confidence_cut(min_confidence, "ner")
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir],
                                    suffixes=(".jsonl", ".json"),
                                    wrong_suffix="NER predictions are nested (entities per text) — use a .jsonl name")
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


# ================================================================================================ serving


class Endpoint(serving.Endpoint):
    """Texts in (split into words as the run split them); entity spans with character offsets out."""

    name = "ner"
    spans_in = "text"  # the entities' character offsets

    def __init__(self, run_dir: str):
        self.predictor = tagger = load_predictor(run_dir)
        self.count = serving.token_counter(tagger.tokenizer, tagger.settings.max_length)
        self.info = {"entity_types": sorted({label.split("-", 1)[-1] for label in tagger.id2label.values()
                                             if label != "O"}), "max_length": tagger.settings.max_length}

    def parse(self, inputs) -> list:
        sentences = []
        for i, value in enumerate(serving.items(inputs)):
            if isinstance(value, dict) and set(value) == {"text"}:
                value = value["text"]
            text = serving.filled(value, f"inputs[{i}]")
            offsets = split_words(text, self.predictor.settings.split)
            sentences.append(Sentence([text[a:b] for a, b in offsets], None, f"inputs[{i}]", text, offsets))
        return sentences

    def chars(self, sentence) -> int:
        return len(sentence.text)

    def tokens(self, sentences: list) -> list[int]:
        return self.count([sentence.text for sentence in sentences])

    def predict(self, sentences: list) -> list[dict]:
        records = []
        for sentence, word_probs in zip(sentences, predict_word_probabilities(self.predictor, sentences)):
            tags, scores = decode(word_probs, self.predictor.id2label)
            records.append({"text": sentence.text, "entities": entities_from_tags(sentence, tags, scores)})
        return records


# ------------------------------------------------------------------------------------------------ its audit


class Audit:
    """`bertkit audit ner`: a NER training file as the audit sees it: sentences read as the recipe reads them, and
    the file's own lines (CoNLL) or objects (JSONL), which the output files copy with only the tags of flagged
    sentences changed."""

    unit = "sentences"
    columns_out = ["line", "text", "words", "given", "suggested", "score"]

    def __init__(self, cfg):
        if not cfg.data.train:
            raise BertkitError("no training data — set data.train=<file> (CoNLL columns or JSONL)")
        self.path = str(cfg.data.train)
        options = ReadOptions(scheme=cfg.data.scheme, repair=cfg.data.repair_tags,
                                   skip_bad=cfg.data.skip_bad_examples, split=cfg.data.split, format=cfg.data.format)
        data = read_examples(self.path, options)
        if not data.entity_types:
            raise BertkitError(f"data.train {self.path} has no entity tags (every word is O) — the audit compares "
                               f"tags, so it needs entities")
        self.sentences, self.scheme = data.sentences, data.scheme
        self.names = label_names(data.entity_types, data.scheme)
        self.ids = {name: i for i, name in enumerate(self.names)}
        # tags written back in the scheme the file declares (an IOB1 file stays IOB1); auto read them as data.scheme
        self.file_scheme = cfg.data.scheme if cfg.data.scheme in SCHEMES else data.scheme
        self.suffix = Path(self.path).suffix
        self.conll = cfg.data.format == "conll" or (cfg.data.format == "auto"
                                                      and self.suffix.lower() not in (".json", ".jsonl"))
        self.json_array = not self.conll and is_json_array(self.path)
        if self.conll:
            self.lines = [line.rstrip("\r") for line in read_text(self.path).split("\n")]  # as ner_files reads
        else:
            self.objects = dict(self.json_objects())

    @property
    def size(self) -> int:
        return len(self.sentences)

    def json_objects(self):
        """(line number, object) of the file, numbered as the NER reader numbers its sentences."""
        if self.json_array:
            table = read_table(self.path)
            yield from ((location_number(row_location(table, i)), row) for i, row in enumerate(table))
        else:
            yield from json_lines(self.path, read_text(self.path))

    def folds(self, folds: int, seed: int):
        check_fold_count(folds, self.size, self.unit, self.path)
        return kfold(self.size, folds, seed)

    def write(self, rows, target: Path, relabel: dict | None = None) -> Path:
        """The sentences `rows` (in file order) at `target`, in the input's format; `relabel`: sentence -> its new
        tags (written in the file's scheme)."""
        relabel = relabel or {}
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.conll:
            out = []
            for row in rows:
                sentence, tags = self.sentences[row], relabel.get(int(row))
                for i, number in enumerate(sentence.word_lines):
                    out.append(self.lines[number - 1] if tags is None else with_last_column(self.lines[number - 1],
                                                                                            tags[i]))
                out.append("")
            target.write_text("\n".join(out) + "\n", encoding="utf-8")
            return target
        records = []
        for row in rows:
            record = copy.deepcopy(self.objects[location_number(self.sentences[row].where)])
            if int(row) in relabel:
                set_tags(record, self.sentences[row], relabel[int(row)])
            records.append(record)
        write_json_records(records, target, self.json_array)
        return target

    def predict(self, model_dir: Path, rows, batch_size: int) -> list[np.ndarray]:
        """Each held-out sentence's (words, tags) probabilities from the fold's model, in the training labels' order."""
        tagger = load_predictor(str(model_dir))
        probs = predict_word_probabilities(tagger, [self.sentences[i] for i in rows], batch_size)
        fold_names = [tagger.id2label[i] for i in range(len(tagger.id2label))]
        return [by_name(p, fold_names, self.names, normalise=True) for p in probs]

    def agreement(self, predictions: list[np.ndarray]) -> tuple[float, float]:
        """(how often the fold models' out-of-fold tag is the given one, the share of the commonest tag), per word."""
        given = np.concatenate([[self.ids[tag] for tag in s.tags] for s in self.sentences]).astype(int)
        predicted = np.concatenate([p.argmax(-1) for p in predictions])
        return float((predicted == given).mean()), float(np.bincount(given).max() / len(given))

    def issues(self, predictions: list[np.ndarray]) -> tuple[list[Issue], dict]:
        """The sentences with likely tag errors, worst first, and sentence -> its relabelled tags."""
        given = [np.array([self.ids[tag] for tag in s.tags]) for s in self.sentences]
        issues, relabel = [], {}
        for row, suggestions, score in token_issues(given, predictions):
            sentence = self.sentences[row]
            tags = list(sentence.tags)
            for word, suggested in suggestions:
                tags[word] = self.names[suggested]
            # a lone I- becomes B-, so that the relabelled file reads without data.repair_tags; the pairs show the
            # tags as read (IOB1 files as IOB2), the file gets them in its own scheme
            relabel[row] = repair_tags(tags, self.file_scheme)
            shown = repair_tags(tags, self.scheme)
            pairs = [(sentence.tags[w], shown[w]) for w, _ in suggestions]
            where = " ".join(sentence.where.rsplit(" ", 2)[-2:])  # "line 12" of "train.conll line 12"
            issues.append(Issue(row, where, " ".join(sentence.words), " | ".join(g for g, _ in pairs),
                                " | ".join(s for _, s in pairs), score,
                                words=" | ".join(sentence.words[w] for w, _ in suggestions), pairs=pairs))
        return issues, relabel

    def issue_row(self, issue: Issue) -> list:
        return [location_number(issue.where), issue.text, issue.words, issue.given, issue.suggested,
                round(issue.score, 6)]


def with_last_column(line: str, tag: str) -> str:
    """A CoNLL token line with its last column (the tag) replaced, the other columns and separators kept."""
    stripped = line.rstrip()
    return stripped[: len(stripped) - len(stripped.split()[-1])] + tag


def set_tags(record: dict, sentence, tags: list[str]) -> None:
    """New tags into a JSONL object: its tag list (tokens + tags), or its entity spans rebuilt from the tags in
    character offsets (text + entities), under the key the reader took them from."""
    if any(record.get(key) is not None for key in ("tokens", "words")):
        key = next((k for k in ("tags", "ner_tags", "labels") if record.get(k) is not None), "tags")
        record[key] = tags
        return
    key = next((k for k in ("entities", "spans", "label") if record.get(k) is not None), "entities")
    record[key] = [{"start": sentence.offsets[start][0], "end": sentence.offsets[end - 1][1], "type": kind}
                   for start, end, kind in tags_to_spans(tags)]

# ------------------------------------------------------------------------------------------------ its report


class Report(reporting.Report):
    """The ner part of report.html: F1 per entity type, dev sentences with gold and predicted spans marked, and the
    entities per type and sentence lengths of the data as the run read it."""

    shows_data = True

    def examples(self, view) -> dict:
        why = reporting.cannot_run_on_dev(view)
        if why:
            return {"why": why}
        tagger = load_predictor(str(view.path))
        every = read_examples(view.dev_file, tagger.settings.read_options()).sentences
        sentences = every[:PREDICTED_EXAMPLES]
        probs = predict_word_probabilities(tagger, sentences)

        def chars(sentence, tags):  # word spans (end inclusive or not: tags_to_spans says) -> character spans
            spans = []
            for start, end, kind in tags_to_spans(tags):
                last = min(end, len(sentence.offsets)) - 1
                spans.append((sentence.offsets[start][0], sentence.offsets[last][1], kind))
            return spans

        rows = []
        for sentence, word_probs in zip(sentences, probs):
            predicted = decode(word_probs, tagger.id2label)[0]
            rows.append({"text": sentence.text, "gold": chars(sentence, sentence.tags),
                         "predicted": chars(sentence, predicted)})
        return {"ner": rows, "keys": [r["text"] for r in rows], "predicted": [r["predicted"] for r in rows],
                **self.data(tagger, reporting.train_file(view), every)}

    @staticmethod
    def data(tagger, train_path: str | None, dev_sentences) -> dict:
        """The data view: entities per type in train and dev, sub-tokens per training sentence."""
        from collections import Counter

        from bertkit.tokenization import word_token_lengths

        if not train_path or not Path(train_path).is_file():
            return {"data_why": f"its training file {train_path} is not there any more" if train_path else
                    "the training data was not a local file"}
        sentences = read_examples(train_path, tagger.settings.read_options()).sentences

        def entities(split) -> dict:
            return dict(Counter(kind for s in split for _, _, kind in tags_to_spans(s.tags)))

        lengths = word_token_lengths(tagger.tokenizer, [s.words for s in sentences])
        return {"data": {"labels": {"train": entities(sentences), "dev": entities(dev_sentences)},
                         "label_unit": "entities", "length_unit": "sentences",
                         "over": "of training sentences take 2+ windows", "lengths": [int(n) for n in lengths],
                         "max_length": tagger.settings.max_length}}

    def sections(self, view, examples: dict, diagnosis) -> str:
        types = per_class_rows(view.eval)
        parts = [section("F1 per entity type", bar_chart(types, ["precision", "recall", "F1"], "per-type scores")
                         if types else missing("no per-type scores in metrics.json"), 3)]
        sentences = examples.get("ner")
        if not sentences:
            parts.append(section("Dev sentences", missing(examples.get("why") or "no dev predictions"), 3))
            return "".join(parts)
        wrong = [s for s in sentences if s["gold"] != s["predicted"]]
        shown = (wrong + [s for s in sentences if s["gold"] == s["predicted"]])[:SHOWN_EXAMPLES]
        items = []
        for s in shown:
            gold = highlight(s["text"], [(a, b, "gold", t) for a, b, t in s["gold"]])
            pred = highlight(s["text"], [(a, b, "pred", t) for a, b, t in s["predicted"]])
            verdict = "differs" if s["gold"] != s["predicted"] else "same"
            items.append(f'<div class="ex"><div>gold: {gold}</div><div>predicted ({verdict}): {pred}</div></div>')
        intro = (f"<p>{len(wrong)} of {len(sentences)} dev sentences predicted differently from gold; the first "
                 f'{len(shown)} shown, those that differ first. <mark class="gold">gold</mark> '
                 '<mark class="pred">predicted</mark></p>')
        parts.append(section("Dev sentences", intro + "".join(items), 3))
        return "".join(parts)



__all__ = [
    "read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file", "evaluate_file",
    "Sentence", "ReadOptions", "NerData", "SentenceWindows", "Tagger", "read_texts", "split_words", "SCHEMES",
    "split_tag", "tags_to_spans", "spans_to_tags", "scheme_violations", "repair_tags", "label_names",
    "continuation_ids", "align_labels", "first_tokens", "sentence_windows", "stitch_windows", "window_rows",
    "predicted_tags", "entities_from_tags", "decode", "score_tags", "entity_report", "predict_word_probabilities",
    "IGNORE_INDEX", "Endpoint", "Report", "Audit", "with_last_column", "set_tags",
]
