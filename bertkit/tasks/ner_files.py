"""Reading NER files into sentences of words: CoNLL columns (token first, tag last, a blank line between sentences,
`-DOCSTART-` skipped) and JSONL rows of `{"tokens": [...], "tags": [...]}` or `{"text": ..., "entities": [{"start",
"end", "type"}]}` (character offsets, end exclusive), with the tags checked against their scheme.

    read_examples("train.conll", ReadOptions())  -> NerData(sentences=[Sentence(words, tags, ...)], scheme="IOB2")

Raw text becomes words the way BERT's basic tokenizer splits it (or one word per character), each word keeping its
character offsets into the original string. Tags that break the scheme (I-PER after O under IOB2) are counted and
reported with the first place they occur: an error, or repaired on request. Bad examples stop the read, or are counted
and skipped on request.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.datafiles import json_lines, read_table, read_text, resolve_columns, row_location
from bertkit.errors import BertkitError
from bertkit.tasks.ner_tag_schemes import repair_tags, scheme_violations, split_tag


# ------------------------------------------------------------------------------------------------ words


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


@dataclass
class Sentence:
    """One sentence: its words with their tags and character offsets into the original text, and where it came from."""

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


# ------------------------------------------------------------------------------------------------ reading files


@dataclass
class ReadOptions:
    """How a NER file is read: its scheme and format, what is repaired or skipped, how raw text becomes words."""

    scheme: str = "auto"  # auto | IOB2 | IOB1 | BIOES
    repair: bool = False  # repair tags that break the scheme instead of stopping
    skip_bad: bool = False  # skip (and count) examples with bad spans / mismatched tags instead of stopping
    split: str = "bert"  # how raw text becomes words: bert | chars
    format: str = "auto"  # auto | conll | jsonl


@dataclass
class NerData:
    """The sentences of one file, the scheme of their tags, and what reading them changed."""

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


TABLE_NAMES = {"text", "label", "labels", "sentence", "review", "content"}


def _looks_like_table(path: str) -> bool:
    """A classification table given where CoNLL is read: a parquet file, or a first line of comma- or tab-separated
    column names, one of them a text or label column, whose last cell is not a tag (a CoNLL .tsv of `word<TAB>O`
    lines is CoNLL)."""
    if Path(path).suffix.lower() == ".parquet":
        return True
    with open(path, "rb") as handle:
        first = handle.readline(4096).decode("utf-8", "replace").strip()
    for separator in (",", "\t"):
        names = [name.strip().strip('"') for name in first.split(separator)]
        if len(names) >= 2 and TABLE_NAMES & {name.lower() for name in names} and not _is_tag(names[-1]):
            return True
    return False


def _is_tag(text: str) -> bool:
    try:
        split_tag(text)
    except ValueError:
        return False
    return True


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


def read_examples(path: str, options: ReadOptions | None = None, labelled: bool = True) -> NerData:
    """Sentences of a CoNLL or JSONL file with their tags checked against the scheme (see the module docstring)."""
    options = options or ReadOptions()
    path = str(path)
    if not Path(path).is_file():
        raise BertkitError(f"no such file: {path} — check the path")
    skips = _Skips(options.skip_bad)
    if labelled and _is_conll(path, options.format) and _looks_like_table(path):
        raise BertkitError(f"{path} looks like a classification table (columns such as text,label: one label per "
                           "row), and ner needs a tag per word — write CoNLL (.conll: a token and its tag on each "
                           'line, a blank line between sentences) or JSONL ({"tokens": [...], "tags": [...]} or '
                           '{"text": ..., "entities": [{"start", "end", "type"}]}); for a label per text use '
                           "bertkit run classify")
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
    table = read_table(path)
    column = resolve_columns(table.features, path, text=text_column, require_label=False).text
    sentences = []
    for i, text in enumerate(table[column]):
        text = "" if text is None else str(text)
        offsets = split_words(text, split)
        sentences.append(Sentence([text[a:b] for a, b in offsets], None, f"{path} {row_location(table, i)}",
                                  text, offsets))
    return sentences


__all__ = ["Sentence", "split_words", "joined_text", "ReadOptions", "NerData", "read_examples", "read_texts"]
