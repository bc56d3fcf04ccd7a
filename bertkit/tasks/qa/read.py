"""Reading QA files: SQuAD v1.1 / v2.0 JSON, a JSON array of records or JSONL records, each answer checked against
its context and repaired (answer_start moved within REPAIR_RADIUS characters) or dropped, with a report of both.

    examples, report = read_examples("data/qa/en/dev.json")        [QAExample], ReadReport
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import BertkitError

REPAIR_RADIUS = 20  # characters searched on each side of a wrong answer_start
_CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FFFF))


@dataclass
class QAExample:
    id: str
    question: str
    context: str
    answers: list[dict]  # [{"text": str, "answer_start": int}], [] = unanswerable (or unlabelled)
    location: str  # "line 7" / "data[0].paragraphs[1].qas[2]", for messages


@dataclass
class ReadReport:
    """What reading a file changed or dropped; each count comes with the first place it happened."""

    path: str
    examples: int = 0
    unanswerable: int = 0
    generated_ids: int = 0
    fixed_starts: int = 0
    first_fixed: str | None = None
    bad_answers: int = 0
    first_bad: str | None = None
    skipped: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        if self.generated_ids:
            out.append(f"{self.path}: {self.generated_ids} questions had no id; generated one for each")
        if self.fixed_starts:
            out.append(f"{self.path}: {self.fixed_starts} answer_start values did not point at the answer text and "
                       f"were moved to the nearest match within ±{REPAIR_RADIUS} characters "
                       f"(first: {self.first_fixed})")
        if self.bad_answers:
            out.append(f"{self.path}: {self.bad_answers} answers are not in the context at their answer_start "
                       f"±{REPAIR_RADIUS} and were dropped, skipping {self.skipped} questions that had no other "
                       f"answer (first: {self.first_bad}) — fix answer_start there")
        return out + self.notes

    def counts(self) -> dict:
        """For metrics.json: what reading kept, repaired and dropped."""
        return {"questions": self.examples, "unanswerable": self.unanswerable, "moved_answer_starts": self.fixed_starts,
                "dropped_answers": self.bad_answers, "skipped_questions": self.skipped}

    def refuse_repairs(self) -> None:
        """Strict reading: an answer that is not where its answer_start says is an error, not a repair or a drop."""
        if self.bad_answers or self.fixed_starts:
            first = self.first_bad or self.first_fixed
            raise BertkitError(f"{self.path}: {self.bad_answers + self.fixed_starts} answers are not at their "
                               f"answer_start (first: {first}) — fix them, or set data.strict=false to move them "
                               f"within ±{REPAIR_RADIUS} characters or drop them")


def read_examples(path: str, require_answers: bool = True) -> tuple[list[QAExample], ReadReport]:
    """SQuAD v1.1/v2.0 JSON ({"data": [...]}), a JSON array of records, or JSONL records
    {"id", "question", "context", "answers"} with answers as {"text": [...], "answer_start": [...]} or a list of
    {"text", "answer_start"}. `require_answers=False` reads questions to predict on (answers optional)."""
    if not Path(path).is_file():
        raise BertkitError(f"{path} does not exist — give a SQuAD-style .json file or a .jsonl file of questions")
    from ...datafiles import read_text  # strict UTF-8, BOM, empty-file and encoding-guess errors

    text = read_text(path)
    report = ReadReport(path=str(path))
    examples = []
    for number, (record, context, location) in enumerate(_records(path, text)):
        example = _example(record, context, location, number, report, require_answers)
        if example is not None:
            examples.append(example)
    if not examples:
        raise BertkitError(f"{path} has no usable questions — add at least one {{question, context}} record")
    report.examples = len(examples)
    report.unanswerable = sum(not e.answers for e in examples) if require_answers else 0
    return examples, report


def _records(path: str, text: str):
    """(record, context, location) for every question in the file."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as err:
            raise BertkitError(f"{path} line {err.lineno} is not valid JSON ({err.msg}) — fix it there") from None
        for index, row in enumerate(rows):
            yield _flat(path, row, f"item {index}")
        return
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as err:
        if not _first_line_is_json(stripped):  # one JSON document (SQuAD layout) that is broken, not JSON lines
            raise _document_error(path, text, err) from None
        whole = None  # JSON lines
    if isinstance(whole, dict) and "context" not in whole:
        yield from _squad_records(path, whole)
        return
    from ...datafiles import json_lines

    for number, row in json_lines(path, text):
        yield _flat(path, row, f"line {number}")


def _first_line_is_json(text: str) -> bool:
    try:
        json.loads(text.split("\n", 1)[0])
        return True
    except json.JSONDecodeError:
        return False


def _document_error(path: str, text: str, err: json.JSONDecodeError) -> BertkitError:
    if err.lineno > text.rstrip().count("\n"):  # the error is on the last line: the document stops early
        return BertkitError(f"{path} ends in the middle of its JSON (line {err.lineno}: {err.msg}) — the file is "
                            "cut off: copy or download it again")
    return BertkitError(f"{path} line {err.lineno} column {err.colno} is not valid JSON ({err.msg}) — fix it there")


def _flat(path: str, row, location: str):
    if not isinstance(row, dict):
        raise BertkitError(f"{path} {location} is a JSON {type(row).__name__}, not an object — write one "
                           f'{{"question": ..., "context": ...}} object per record')
    return row, row.get("context"), location


def _squad_records(path: str, whole: dict):
    if not isinstance(whole.get("data"), list):
        raise BertkitError(f"{path} is a JSON object without a 'data' list (keys: {', '.join(list(whole)[:6])}) — "
                           f"use SQuAD's {{\"data\": [{{\"paragraphs\": [...]}}]}} layout or JSONL records")
    for i, article in enumerate(whole["data"]):
        for j, paragraph in enumerate(article.get("paragraphs", []) if isinstance(article, dict) else []):
            context = paragraph.get("context")
            for k, qa in enumerate(paragraph.get("qas", [])):
                yield qa, context, f"data[{i}].paragraphs[{j}].qas[{k}]"


def _example(record: dict, context, location: str, number: int, report: ReadReport,
             require_answers: bool) -> QAExample | None:
    where = f"{report.path} {location}"
    qid = record.get("id", record.get("qid"))
    if qid in (None, ""):
        qid = f"{Path(report.path).stem}-{number}"
        report.generated_ids += 1
    where_id = f"{where} (id {qid})"
    if not isinstance(context, str) or not context.strip():
        raise BertkitError(f"{where_id} has an empty context — give every question the passage it is asked about")
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BertkitError(f"{where_id} has no question text — add a non-empty 'question'")
    if not require_answers:  # predicting: answers, if any, play no part
        return QAExample(str(qid), question.strip(), context, [], location)
    if "answers" not in record and "is_impossible" not in record:
        raise BertkitError(f"{where_id} has no 'answers' — add answers (or \"answers\": [] for unanswerable)")
    golds = [] if record.get("is_impossible") else _answer_list(record.get("answers"), where_id)
    answers = []
    for text, start in golds:
        fixed = locate_answer(context, text, start)
        if fixed is None:
            report.bad_answers += 1
            report.first_bad = report.first_bad or f"{where_id}: {text!r} at {start}"
            continue
        if fixed != start:
            report.fixed_starts += 1
            report.first_fixed = report.first_fixed or f"{where_id}: {text!r} {start} -> {fixed}"
        answers.append({"text": text, "answer_start": fixed})
    if golds and not answers:
        report.skipped += 1
        return None
    return QAExample(str(qid), question.strip(), context, answers, location)


def _answer_list(answers, where: str) -> list[tuple[str, int | None]]:
    """[(text, answer_start)] from either SQuAD layout; None when answers are absent."""
    if answers is None:
        return []
    if isinstance(answers, dict):
        texts, starts = answers.get("text", []), answers.get("answer_start", [])
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            raise BertkitError(f"{where}: answers needs lists 'text' and 'answer_start' of equal length")
        pairs = list(zip(texts, starts))
    elif isinstance(answers, list):
        if not all(isinstance(a, dict) for a in answers):
            raise BertkitError(f'{where}: each answer must be {{"text": ..., "answer_start": ...}}')
        pairs = [(a.get("text"), a.get("answer_start")) for a in answers]
    else:
        raise BertkitError(f"{where}: answers must be a list of {{text, answer_start}} or "
                           f'{{"text": [...], "answer_start": [...]}}, got {type(answers).__name__}')
    for text, start in pairs:
        if not isinstance(text, str) or not text.strip():
            raise BertkitError(f"{where}: an answer has no text — give each answer its text")
        if start is not None and (isinstance(start, bool) or not isinstance(start, int)):
            raise BertkitError(f"{where}: answer_start {start!r} is not a character index — give an int")
    return pairs


def locate_answer(context: str, text: str, start: int | None, radius: int = REPAIR_RADIUS) -> int | None:
    """`start` when `context[start:]` begins with `text`; else the occurrence of `text` nearest to `start` within
    ±radius characters (the whole context when start is missing); None when there is none."""
    if start is not None and context.startswith(text, start):
        return start
    low, high = (0, len(context)) if start is None else (max(0, start - radius), start + radius + len(text))
    found, position = [], context.find(text, low)
    while position != -1 and position + len(text) <= high:
        found.append(position)
        position = context.find(text, position + 1)
    if not found:
        return None
    return found[0] if start is None else min(found, key=lambda p: (abs(p - start), p))


def detect_language(contexts: list[str]) -> str:
    """'zh' when most letters in the contexts are CJK characters, else 'en' (looks at up to 200 distinct contexts)."""
    cjk = letters = 0
    for context in list(dict.fromkeys(contexts))[:200]:
        for ch in context:
            if ch.isalpha():
                letters += 1
                cjk += any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES)
    return "zh" if letters and cjk / letters > 0.5 else "en"


__all__ = ["read_examples", "QAExample", "ReadReport", "locate_answer", "detect_language", "REPAIR_RADIUS"]
