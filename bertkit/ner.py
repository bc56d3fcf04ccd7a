"""Named-entity recognition pieces shared by recipes/ner.py, `bertkit predict` and `bertkit evaluate`.

    read_ner_file("train.conll", ReadOptions())  -> NerData(sentences=[Sentence(words, tags, ...)], scheme="IOB2")
    build_windows(tokenizer, sentences, 128, 32, label2id)  -> Windows: overlapping token windows + labels
    windows.word_probabilities(window_probs, o_id)          -> one (words, labels) array per sentence
    entities_from_tags(sentence, tags, scores)             -> [{"text", "type", "start", "end", "score"}]

Inputs: CoNLL-style column files (token first, tag last, a blank line between sentences, `-DOCSTART-` skipped) and
JSONL rows of `{"tokens": [...], "tags": [...]}` or `{"text": ..., "entities": [{"start", "end", "type"}]}`
(character offsets, end exclusive). Raw text becomes words the way BERT's basic tokenizer splits it (whitespace,
each punctuation mark and each CJK character alone), or one word per character (`split="chars"`, Chinese NER).

Labels go on each word's first sub-token; the others get -100, or with `label_all_tokens` the I- tag of the word's
entity. Sentences longer than the model's window are cut into overlapping windows of sub-tokens, and each word takes
the prediction of the window where its first sub-token is most central. Tags that break the scheme (I-PER after O
under IOB2) are counted and reported with the first place they occur: an error, or repaired on request.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .checkpoints import load_finetuned, load_tokenizer
from .console import ExamplesProgress, say
from .data import json_lines, read_table, read_text, row_location
from .errors import BertkitError
from .metrics import SeqevalMetric
from .modeling_bert import BertkitForTokenClassification
from .predict import run_batch, token_budget_batches
from .training import read_run_config, write_json

IGNORE_INDEX = -100
SCHEMES = ("IOB2", "IOB1", "BIOES")
PREFIXES = {"IOB2": ("B", "I"), "IOB1": ("B", "I"), "BIOES": ("B", "I", "E", "S")}
CONLL_SUFFIXES = (".conll", ".conllu", ".bio", ".iob", ".iob2", ".bioes", ".txt", ".tsv")
_TAG = re.compile(r"^([BIES])-(.+)$")

# ================================================================================================ tags and schemes


def split_tag(tag: str) -> tuple[str, str | None]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', None). Anything else is not a tag (the reader reports it)."""
    if tag == "O":
        return "O", None
    match = _TAG.match(tag)
    if not match:
        raise ValueError(tag)
    return match.group(1), match.group(2)


def tags_to_spans(tags: list[str]) -> list[tuple[int, int, str]]:
    """Entities as (first word, end word exclusive, type), read leniently like conlleval: B-/S- or a change of type
    starts an entity, I-/E- of the same type continues it, E-/S- closes it. Works for IOB2, IOB1 and BIOES."""
    spans, start, kind = [], None, None
    for i, tag in enumerate(tags):
        prefix, tag_type = split_tag(tag)
        if prefix == "O" or prefix in ("B", "S") or tag_type != kind:
            if start is not None:
                spans.append((start, i, kind))
            start, kind = (None, None) if prefix == "O" else (i, tag_type)
        if prefix in ("E", "S"):
            spans.append((start, i + 1, kind))
            start, kind = None, None
    if start is not None:
        spans.append((start, len(tags), kind))
    return spans


def spans_to_tags(spans: list[tuple[int, int, str]], length: int, scheme: str) -> list[str]:
    """The tags of `length` words holding these (non-overlapping) entities, written in `scheme`."""
    tags = ["O"] * length
    previous_end, previous_type = None, None
    for start, end, kind in sorted(spans):
        if scheme == "BIOES" and end - start == 1:
            tags[start] = f"S-{kind}"
            continue
        tags[start:end] = [f"I-{kind}"] * (end - start)
        if scheme != "IOB1" or (previous_end == start and previous_type == kind):
            tags[start] = f"B-{kind}"
        if scheme == "BIOES":
            tags[end - 1] = f"E-{kind}"
        previous_end, previous_type = end, kind
    return tags


def scheme_violations(tags: list[str], scheme: str) -> list[tuple[int, str]]:
    """(word index, what is wrong) for every tag that the strict `scheme` does not allow where it stands."""
    problems, previous = [], ("O", None)
    for i, tag in enumerate(tags + ["O"]):  # the sentinel checks that BIOES entities are closed
        prefix, kind = split_tag(tag)
        inside = previous[0] in ("B", "I")  # BIOES: an entity is open and must go on
        continues = previous[0] in ("B", "I") and previous[1] == kind
        shown = "sentence start" if i == 0 else tags[i - 1]
        if scheme == "IOB2" and prefix == "I" and not continues:
            problems.append((i, f"{tag} after {shown}"))
        elif scheme == "IOB1" and prefix == "B" and not (previous[0] in ("B", "I") and previous[1] == kind):
            problems.append((i, f"{tag} not right after another {kind}"))
        elif scheme == "BIOES" and prefix in ("I", "E") and not continues:
            problems.append((i, f"{tag} after {shown}"))
        elif scheme == "BIOES" and inside and not (prefix in ("I", "E") and continues):
            problems.append((i - 1, f"{tags[i - 1]} not closed by E-{previous[1]}"))
        previous = (prefix, kind)
    return problems


def repair_tags(tags: list[str], scheme: str) -> list[str]:
    """The lenient reading written back in `scheme`: I-PER after O becomes B-PER, an unclosed BIOES entity ends."""
    return spans_to_tags(tags_to_spans(tags), len(tags), scheme)


def label_names(entity_types, scheme: str) -> list[str]:
    """'O' and every prefix of the scheme for each type, types sorted: ['O', 'B-LOC', 'I-LOC', 'B-PER', ...]."""
    prefixes = PREFIXES["IOB2" if scheme == "IOB1" else scheme]
    return ["O"] + [f"{p}-{t}" for t in sorted(entity_types) for p in prefixes]


def continuation_ids(label2id: dict[str, int]) -> dict[int, int]:
    """label id -> the id that a word's later sub-tokens get with label_all_tokens: I-<type>, or O for O."""
    result = {}
    for name, index in label2id.items():
        prefix, kind = split_tag(name)
        result[index] = index if prefix == "O" else label2id[f"I-{kind}"]
    return result


# ================================================================================================ words from text


def _is_cjk(char: str) -> bool:
    cp = ord(char)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2FA1F or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def _is_punctuation(char: str) -> bool:
    """BERT's rule: every ASCII non-alphanumeric symbol counts, plus Unicode category P*."""
    cp = ord(char)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(char).startswith("P")


def _is_separator(char: str) -> bool:
    """Whitespace, and what BERT's tokenizer deletes (control/format characters, U+FFFD)."""
    return char.isspace() or char == "\ufffd" or unicodedata.category(char) in ("Cc", "Cf")


def split_words(text: str, split: str = "bert", cuts=()) -> list[tuple[int, int]]:
    """(start, end) of each word of `text`. split="bert": runs of letters/digits, each punctuation mark and each
    CJK character alone (BERT's basic tokenizer); split="chars": every non-space character is a word. Words are
    also cut at every offset in `cuts` (entity boundaries), so an entity never starts or ends inside a word."""
    cuts, words, start = set(cuts), [], None
    for i, char in enumerate(text):
        if start is not None and i in cuts:
            words.append((start, i))
            start = None
        if _is_separator(char):
            if start is not None:
                words.append((start, i))
            start = None
        elif split == "chars" or _is_cjk(char) or _is_punctuation(char):
            if start is not None:
                words.append((start, i))
            words.append((i, i + 1))
            start = None
        elif start is None:
            start = i
    if start is not None:
        words.append((start, len(text)))
    return words


def joined_text(words: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """Pre-split words (CoNLL, JSONL tokens) as one space-joined string with each word's offsets."""
    offsets, position = [], 0
    for word in words:
        offsets.append((position, position + len(word)))
        position += len(word) + 1
    return " ".join(words), offsets


# ================================================================================================ reading files


@dataclass
class Sentence:
    words: list[str]
    tags: list[str] | None  # None when the input has no labels (predict)
    where: str  # "train.conll line 12": where the sentence starts
    text: str = ""  # the original string; offsets index into it
    offsets: list[tuple[int, int]] = field(default_factory=list)
    word_lines: list[int] | None = None  # CoNLL: the line of each word

    def __post_init__(self):
        if not self.offsets and self.words:
            self.text, self.offsets = joined_text(self.words)

    def location(self, index: int) -> str:
        index = min(index, len(self.words) - 1)
        if self.word_lines:
            return f"{self.where.rsplit(' line ', 1)[0]} line {self.word_lines[index]}"
        return f"{self.where}, word {index + 1} ({self.words[index]!r})"


@dataclass
class ReadOptions:
    scheme: str = "auto"  # auto | IOB2 | IOB1 | BIOES
    repair: bool = False  # repair tags that break the scheme instead of stopping
    skip_bad: bool = False  # skip (and count) examples with bad spans / mismatched tags instead of stopping
    split: str = "bert"  # how raw text becomes words: bert | chars
    format: str = "auto"  # auto | conll | jsonl


@dataclass
class NerData:
    sentences: list[Sentence]
    scheme: str  # the scheme of the tags as returned (IOB1 input is converted to IOB2)
    notes: list[str]  # what was skipped, repaired or converted: printed, never silent

    @property
    def entity_types(self) -> set[str]:
        return {split_tag(t)[1] for s in self.sentences for t in s.tags or [] if t != "O"}


class _Skips:
    """Counts examples skipped for each reason and remembers the first, for one line of report each."""

    def __init__(self, skip_bad: bool):
        self.skip_bad, self.counts, self.first = skip_bad, Counter(), {}

    def bad(self, reason: str, where: str, detail: str, fix: str) -> None:
        if not self.skip_bad:
            raise BertkitError(f"{where}: {detail} — {fix}, or set data.skip_bad_examples=true to skip such examples")
        self.skipped(reason, f"{where}: {detail}")

    def skipped(self, reason: str, first: str) -> None:
        self.counts[reason] += 1
        self.first.setdefault(reason, first)

    def notes(self, path: str) -> list[str]:
        return [f"{path}: skipped {n} example{'s' * (n > 1)} with {reason} (first: {self.first[reason]})"
                for reason, n in self.counts.items()]


def _read_lines(path: str) -> list[str]:
    return [line.rstrip("\r") for line in read_text(path).split("\n")]  # "\n" only: U+2028 can sit inside a token


def _read_conll(path: str, labelled: bool = True) -> list[Sentence]:
    """Token in the first column, tag in the last; every token line has the same number of columns."""
    sentences, words, tags, lines, columns = [], [], [], [], None

    def flush():
        if words:
            sentences.append(Sentence(list(words), list(tags) if labelled else None, f"{path} line {lines[0]}",
                                      word_lines=list(lines)))
        words.clear(), tags.clear(), lines.clear()

    for number, line in enumerate(_read_lines(path), start=1):
        cells = line.split()
        if not cells or cells[0] == "-DOCSTART-":
            flush()
            continue
        if labelled and len(cells) < 2:
            raise BertkitError(f"{path} line {number} has one column ({line.strip()[:40]!r}) — write the token and "
                               f"its tag on each line, separated by a space or tab")
        columns = columns or (len(cells), number)
        if len(cells) != columns[0]:
            raise BertkitError(f"{path} line {number} has {len(cells)} columns but line {columns[1]} has "
                               f"{columns[0]} — every token line needs the same columns (token first, tag last)")
        words.append(cells[0])
        tags.append(cells[-1])
        lines.append(number)
    flush()
    return sentences


def _jsonl_rows(path: str):
    """(line number, object) per non-blank line; a .json file holding one array is read too."""
    text = read_text(path)
    if path.endswith(".json") and text.lstrip().startswith("["):
        table = read_table(path)
        for i, row in enumerate(table):
            yield int(row_location(table, i).split()[-1]), row
        return
    for number, row in json_lines(path, text):
        if not isinstance(row, dict):
            raise BertkitError(f"{path} line {number} is not a JSON object — write "
                               f'{{"tokens": [...], "tags": [...]}} or {{"text": ..., "entities": [...]}}')
        yield number, row


def _first_key(row: dict, keys: tuple[str, ...]):
    return next((key for key in keys if row.get(key) is not None), None)


def _entity_fields(entity) -> tuple:
    """(start, end, type, text or None) from {"start", "end", "type"} (or label / start_offset...) or [s, e, type]."""
    if isinstance(entity, (list, tuple)) and len(entity) == 3:
        return entity[0], entity[1], entity[2], None
    if isinstance(entity, dict):
        start = entity.get("start", entity.get("start_offset"))
        end = entity.get("end", entity.get("end_offset"))
        return start, end, entity.get("type", entity.get("label")), entity.get("text")
    return None, None, None, None


def _span_problem(entity, text: str, previous_end: int) -> str | None:
    start, end, kind, quoted = _entity_fields(entity)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)) or not isinstance(kind, str):
        return f"entity {json.dumps(entity, ensure_ascii=False)[:60]} is not {{\"start\": int, \"end\": int, " \
               f"\"type\": str}}"
    if not 0 <= start < end <= len(text):
        return f"entity {start}-{end} {kind} is out of range for a text of {len(text)} characters (end is exclusive)"
    if start < previous_end:
        return f"entity {start}-{end} {kind} overlaps the entity before it"
    if quoted is not None and text[start:end] != quoted:
        return f"entity {start}-{end} {kind} covers {text[start:end]!r} but says {quoted!r}"
    if not text[start:end].strip():
        return f"entity {start}-{end} {kind} covers only spaces"
    return None


def _sentence_from_spans(text: str, entities: list, where: str, split: str, skips: _Skips) -> Sentence | None:
    entities = sorted(entities, key=lambda e: _entity_fields(e)[0] if isinstance(_entity_fields(e)[0], int) else -1)
    previous_end = 0
    for entity in entities:
        problem = _span_problem(entity, text, previous_end)
        if problem:
            skips.bad("bad entity spans", where, problem, "fix the offsets (characters, end exclusive)")
            return None
        previous_end = _entity_fields(entity)[1]
    fields = [_entity_fields(e)[:3] for e in entities]
    offsets = split_words(text, split, [x for s, e, _ in fields for x in (s, e)])
    words = [text[a:b] for a, b in offsets]
    tags = ["O"] * len(words)
    for start, end, kind in fields:
        inside = [i for i, (a, b) in enumerate(offsets) if a >= start and b <= end]
        if not inside:
            skips.bad("bad entity spans", where, f"entity {start}-{end} {kind} covers no word",
                      "fix the offsets (characters, end exclusive)")
            return None
        tags[inside[0]] = f"B-{kind}"
        for i in inside[1:]:
            tags[i] = f"I-{kind}"
    return Sentence(words, tags, where, text, offsets)


def _sentence_from_row(row: dict, where: str, split: str, labelled: bool, skips: _Skips) -> Sentence | None:
    tokens_key = _first_key(row, ("tokens", "words"))
    if tokens_key:
        words = row[tokens_key]
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
            raise BertkitError(f"{where}: '{tokens_key}' must be a list of non-empty strings")
        if not labelled:
            return Sentence(words, None, where)
        tags_key = _first_key(row, ("tags", "ner_tags", "labels"))
        tags = row.get(tags_key) if tags_key else None
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise BertkitError(f"{where}: needs \"tags\": a list of tag strings such as \"B-PER\", one per token "
                               f"(found keys: {', '.join(row)})")
        if len(tags) != len(words):
            skips.bad("tags and tokens of different lengths", where, f"{len(words)} tokens but {len(tags)} tags",
                      "give one tag per token")
            return None
        return Sentence(words, tags, where)
    if not isinstance(row.get("text"), str):
        raise BertkitError(f"{where}: no \"tokens\" list and no \"text\" string (keys: {', '.join(row) or 'none'})"
                           f" — write {{\"tokens\": [...], \"tags\": [...]}} or {{\"text\": ..., \"entities\": "
                           f"[...]}}")
    text = row["text"]
    if not labelled:
        offsets = split_words(text, split)
        return Sentence([text[a:b] for a, b in offsets], None, where, text, offsets)
    entities_key = _first_key(row, ("entities", "spans", "label"))
    entities = row.get(entities_key, []) if entities_key else []
    if not isinstance(entities, list):
        raise BertkitError(f"{where}: \"{entities_key}\" must be a list of {{\"start\", \"end\", \"type\"}} objects")
    return _sentence_from_spans(text, entities, where, split, skips)


def _read_jsonl_sentences(path: str, split: str, labelled: bool, skips: _Skips) -> list[Sentence]:
    sentences = []
    for number, row in _jsonl_rows(path):
        sentence = _sentence_from_row(row, f"{path} line {number}", split, labelled, skips)
        if sentence is not None:
            sentences.append(sentence)
    return sentences


def _is_conll(path: str, format: str) -> bool:
    if format != "auto":
        return format == "conll"
    return Path(path).suffix.lower() not in (".json", ".jsonl")


def _check_tag_format(sentences: list[Sentence]) -> None:
    for sentence in sentences:
        for i, tag in enumerate(sentence.tags):
            try:
                split_tag(tag)
            except ValueError:
                raise BertkitError(f"{sentence.location(i)}: tag {tag!r} is neither O nor B-/I-/E-/S-<type> — "
                                   f"write tags such as B-PER, I-PER (IOB2) or S-PER, E-PER (BIOES)") from None


def _resolve_scheme(sentences: list[Sentence], scheme: str) -> str:
    """auto: BIOES when any E-/S- tag occurs, else IOB2. A declared IOB scheme refuses E-/S- tags."""
    for sentence in sentences:
        for i, tag in enumerate(sentence.tags):
            if tag[:2] in ("E-", "S-"):
                if scheme in ("IOB2", "IOB1"):
                    raise BertkitError(f"{sentence.location(i)}: tag {tag} is not an {scheme} tag — set "
                                       f"data.scheme=BIOES (or auto)")
                return "BIOES"
    return "IOB2" if scheme == "auto" else scheme


def _check_scheme(sentences: list[Sentence], scheme: str, repair: bool, path: str) -> list[str]:
    """Count the tags that break the scheme; stop (naming the first) or repair them. IOB1 always becomes IOB2."""
    count, first = 0, None
    for sentence in sentences:
        problems = scheme_violations(sentence.tags, scheme)
        if problems and first is None:
            first = f"{sentence.location(problems[0][0])}: {problems[0][1]}"
        count += len(problems)
    notes = []
    if count and not repair:
        other = "IOB1" if scheme == "IOB2" else "IOB2"
        raise BertkitError(f"{count} tag{'s' * (count > 1)} break{'s' * (count == 1)} the {scheme} scheme (first: "
                           f"{first}) — fix the file, set data.scheme={other} if it uses that scheme, or set "
                           f"data.repair_tags=true to repair them")
    if count:
        notes.append(f"{path}: repaired {count} tag{'s' * (count > 1)} that broke {scheme} (first: {first})")
    if count or scheme == "IOB1":
        target = "IOB2" if scheme == "IOB1" else scheme
        for sentence in sentences:
            sentence.tags = repair_tags(sentence.tags, target)
    if scheme == "IOB1":
        notes.append(f"{path}: IOB1 tags converted to IOB2")
    return notes


def read_ner_file(path: str, options: ReadOptions | None = None, labelled: bool = True) -> NerData:
    """Sentences of a CoNLL or JSONL file with their tags checked against the scheme (see the module docstring)."""
    options = options or ReadOptions()
    path = str(path)
    if not Path(path).is_file():
        raise BertkitError(f"no such file: {path} — check the path")
    skips = _Skips(options.skip_bad)
    if _is_conll(path, options.format):
        sentences = _read_conll(path, labelled)
    else:
        sentences = _read_jsonl_sentences(path, options.split, labelled, skips)
    empty = [s for s in sentences if not s.words]
    for sentence in empty:
        skips.skipped("no words", sentence.where)
    sentences = [s for s in sentences if s.words]
    if not sentences:
        raise BertkitError(f"{path} holds no sentences with words — check its format (CoNLL columns or JSONL)")
    notes, scheme = skips.notes(path), options.scheme
    if labelled:
        _check_tag_format(sentences)
        scheme = _resolve_scheme(sentences, options.scheme)
        notes += _check_scheme(sentences, scheme, options.repair, path)
        scheme = "IOB2" if scheme == "IOB1" else scheme
    return NerData(sentences, scheme, notes)


def read_texts(path: str, split: str = "bert", text_column: str | None = None) -> list[Sentence]:
    """Unlabelled input for predict: JSONL {"text"} or {"tokens"}, CoNLL (tags, if any, ignored), or any table
    bertkit reads (csv, tsv, txt, parquet) with a text column. Empty texts are kept: they get no entities."""
    path = str(path)
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".json") and text_column is None:
        return [s for s in _read_jsonl_sentences(path, split, False, _Skips(False))]
    if suffix in (".conll", ".bio", ".iob", ".iob2", ".bioes"):
        return _read_conll(path, labelled=False)
    from .data import read_table, resolve_columns, row_location

    table = read_table(path)
    column = resolve_columns(table.features, path, text=text_column, require_label=False).text
    sentences = []
    for i, text in enumerate(table[column]):
        text = "" if text is None else str(text)
        offsets = split_words(text, split)
        sentences.append(Sentence([text[a:b] for a, b in offsets], None, f"{path} {row_location(table, i)}",
                                  text, offsets))
    return sentences


# ================================================================================================ labels and windows


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


def window_spans(num_tokens: int, size: int, stride: int) -> list[tuple[int, int]]:
    """[start, end) token ranges of at most `size` tokens covering 0..num_tokens, consecutive windows sharing at
    least `stride` tokens; the last window is moved back to end at num_tokens, so every window is full."""
    if stride >= size:
        raise BertkitError(f"stride {stride} must be smaller than the {size} tokens of a window — lower data.stride "
                           f"or raise data.max_length")
    if num_tokens <= size:
        return [(0, num_tokens)] if num_tokens else []
    starts = list(range(0, num_tokens - size, size - stride)) + [num_tokens - size]
    return [(start, start + size) for start in starts]


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
class Windows:
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


def build_windows(tokenizer, sentences: list[Sentence], max_length: int, stride: int,
                  label2id: dict[str, int] | None = None, label_all_tokens: bool = False) -> Windows:
    """Tokenize whole sentences (is_split_into_words), then cut each into windows of max_length - 2 sub-tokens
    plus [CLS] / [SEP]. With label2id, each window carries its aligned labels."""
    if not getattr(tokenizer, "is_fast", False):
        raise BertkitError("NER needs a fast tokenizer (word_ids) — save the model with its tokenizer.json")
    windows = Windows([], [], [], [], [])
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
        for start, end in window_spans(len(ids), max_length - 2, stride):
            feature = {"input_ids": [tokenizer.cls_token_id, *ids[start:end], tokenizer.sep_token_id],
                       "attention_mask": [1] * (end - start + 2), "token_type_ids": [0] * (end - start + 2)}
            if labels is not None:
                feature["labels"] = [IGNORE_INDEX, *labels[start:end], IGNORE_INDEX]
            windows.features.append(feature)
            windows.owner.append(index)
            windows.spans.append((start, end))
    return windows


def _label_id(label2id: dict[str, int], tag: str, sentence: Sentence, index: int) -> int:
    if tag not in label2id:
        raise BertkitError(f"{sentence.location(index)}: tag {tag} is not among the model's labels "
                           f"({', '.join(label2id)}) — the training data has no entity of that type")
    return label2id[tag]


def softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float32)
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def window_rows(logits: np.ndarray, windows: Windows) -> list[np.ndarray]:
    """Trainer's padded (windows, T, C) logits -> each window's probabilities at its real tokens ([CLS] and
    [SEP] dropped)."""
    return [softmax(logits[i, 1:1 + end - start]) for i, (start, end) in enumerate(windows.spans)]


# ================================================================================================ decoding and scoring


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

    from .metrics import _SEQEVAL_SCHEMES

    options = {"mode": "strict", "scheme": _SEQEVAL_SCHEMES[scheme]} if strict else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return classification_report(gold, predicted, digits=4, zero_division=0, **options)


def compute_metrics_fn(windows: Windows, sentences: list[Sentence], id2label: dict[int, str], strict: bool,
                       scheme: str):
    """A Trainer `compute_metrics` that stitches the eval windows back into sentences and scores words."""
    o_id = {v: k for k, v in id2label.items()}["O"]

    def compute_metrics(eval_prediction):
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        word_probs = windows.word_probabilities(window_rows(logits, windows), o_id, len(id2label))
        predicted = [decode(p, id2label)[0] for p in word_probs]
        return score_tags(predicted, [s.tags for s in sentences], strict, scheme)

    return compute_metrics


# ================================================================================================ predict / evaluate


@dataclass
class Tagger:
    model: BertkitForTokenClassification
    tokenizer: object
    id2label: dict[int, str]
    scheme: str
    max_length: int
    stride: int
    read: ReadOptions
    strict: bool


def load_tagger(model_dir: str) -> Tagger:
    model = load_finetuned(BertkitForTokenClassification, model_dir, "ner")
    run = read_run_config(model_dir)
    data = run.get("data", {})
    scheme = getattr(model.config, "ner_scheme", None) or "IOB2"  # what the model predicts
    file_scheme = data.get("scheme") if data.get("scheme") in SCHEMES else scheme  # IOB1 files convert on reading
    read = ReadOptions(scheme=file_scheme, repair=bool(data.get("repair_tags", False)),
                       skip_bad=bool(data.get("skip_bad_examples", False)), split=data.get("split", "bert"))
    max_length = data.get("max_length") or min(512, model.config.max_position_embeddings)
    return Tagger(model, load_tokenizer(model_dir), {int(k): v for k, v in model.config.id2label.items()}, scheme,
                  max_length, int(data.get("stride", 32)), read, bool(run.get("strict", False)))


@torch.inference_mode()
def predict_word_probabilities(tagger: Tagger, sentences: list[Sentence], batch_size: int = 64) -> list[np.ndarray]:
    """(words, C) probabilities per sentence: windows run in length-sorted batches under a token budget."""
    windows = build_windows(tagger.tokenizer, sentences, tagger.max_length, tagger.stride)
    lengths = [len(f["input_ids"]) for f in windows.features]
    rows: list[np.ndarray | None] = [None] * len(lengths)
    with ExamplesProgress("tagging", len(sentences)) as progress:  # windows count as their share of sentences
        for batch in token_budget_batches(lengths, batch_size * tagger.max_length, batch_size):
            padded = tagger.tokenizer.pad([windows.features[i] for i in batch], return_tensors="pt")
            probs = run_batch(tagger.model, padded).logits.float().softmax(-1).cpu().numpy()
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
    tagger = load_tagger(model_dir)
    sentences = read_texts(input_path, tagger.read.split)
    probs = predict_word_probabilities(tagger, sentences, batch_size)
    with Path(output_path).open("w", encoding="utf-8") as handle:
        for sentence, word_probs in zip(sentences, probs):
            tags, scores = decode(word_probs, tagger.id2label)
            record = {"text": sentence.text, "entities": entities_from_tags(sentence, tags, scores)}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(sentences)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Entity-level metrics on a labelled CoNLL / JSONL file, read with the options of the training run."""
    tagger = load_tagger(model_dir)
    data = read_ner_file(input_path, tagger.read)
    for note in data.notes:
        say(note)
    probs = predict_word_probabilities(tagger, data.sentences, batch_size)
    predicted = [decode(p, tagger.id2label)[0] for p in probs]
    metrics = score_tags(predicted, [s.tags for s in data.sentences], tagger.strict, tagger.scheme)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "sentences": len(data.sentences), **metrics})
    return metrics


__all__ = [
    "Sentence", "ReadOptions", "NerData", "Windows", "Tagger", "read_ner_file", "read_texts", "split_words",
    "split_tag", "tags_to_spans", "spans_to_tags", "scheme_violations", "repair_tags", "label_names",
    "continuation_ids", "align_labels", "first_tokens", "window_spans", "stitch_windows", "build_windows",
    "window_rows", "entities_from_tags", "decode", "score_tags", "entity_report", "compute_metrics_fn",
    "load_tagger", "predict_word_probabilities", "predict_file", "evaluate_file",
]
