"""Extractive question answering (SQuAD v1.1 / v2.0, CMRC-style Chinese): reading, question windows,
post-processing, the settings a run saves, and `bertkit predict` / `bertkit evaluate` for QA models.

    examples, report = read_examples("data/qa/en/dev.json")        SQuAD JSON, JSON array or JSONL records  (reading)
    windows = encode(tokenizer, examples, max_length=384, doc_stride=128)   QuestionWindows              (windows)
    predictions = postprocess(start_logits, end_logits, windows, examples)   one Prediction per example  (answers)
    threshold = tune_null_threshold(margins, f1_if_answered, f1_if_null)     v2: when to answer ""       (scoring)
    qa = load_predictor("runs/qa")                                     model, tokenizer, saved Settings  (predict)

Reading checks each answer against its context and repairs it (answer_start moved within REPAIR_RADIUS characters) or
drops it, with a report of both. A long context is cut into overlapping windows of max_length tokens (`doc_stride`
context tokens shared between neighbours), each token keeping its character offsets into the context and (training)
the answer's token span in every window, or [CLS] where the window does not hold the whole answer. Each window is
scored on its own; an example's answer is the best span over all its windows, taken from the original context by
character offsets. Under SQuAD v2 the best span competes with the null answer ([CLS] start + end): the example is
answered "" when `null_score - best_score > threshold`, the threshold tuned on dev to maximise F1 and saved with the
model's Settings (None for a v1 model, which always answers); SQuAD EM / F1 count examples, not windows. Post-
processing is pure functions over numpy arrays and offsets, tested on exact small cases. The Settings are written by
recipes/qa.py into config.json under tasks.SETTINGS_KEY so that predict / evaluate cut windows and pick answers the
way training did.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from bertkit.tasks import reporting, serving
from bertkit.errors import BertkitError
from bertkit.rundir import atomic_output, check_output_path
from bertkit.report_html import SHOWN_EXAMPLES, esc, highlight, missing, section, table
from bertkit.tasks import SETTINGS_KEY, no_confidence_cut, read_settings


# ------------------------------------------------------------------------------------------------ reading


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
    from bertkit.datafiles import read_text  # strict UTF-8, BOM, empty-file and encoding-guess errors

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
    from bertkit.datafiles import json_lines

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


# ------------------------------------------------------------------------------------------------ windows


@dataclass
class QuestionWindows:
    """The model inputs of every window, and what maps each back to its example's context."""

    inputs: dict[str, list]  # input_ids, token_type_ids, attention_mask [, start_positions, end_positions]
    example_index: list[int]  # window -> example
    offsets: list[list[tuple[int, int] | None]]  # window -> token -> (start, end) in the context; None elsewhere
    truncated_questions: int = 0

    def __len__(self) -> int:
        return len(self.example_index)


def check_window_settings(max_length: int, doc_stride: int, question_tokens: int, specials: int = 3) -> None:
    """The tokenizer panics (not an exception Python code catches) when the stride does not fit: refuse early.
    The recipe checks with data.max_question_length (every question fits), encode with its longest question and
    the tokenizer's own count of special tokens (3 for [CLS] q [SEP] c [SEP], 4 for RoBERTa's <s> q </s></s> c </s>)."""
    room = max_length - question_tokens - specials
    if room <= 0:
        raise BertkitError(f"data.max_length={max_length} leaves no room for the context after {question_tokens} "
                           f"question tokens — raise data.max_length or lower data.max_question_length")
    if not 0 <= doc_stride < room:
        raise BertkitError(f"data.doc_stride={doc_stride} must be less than data.max_length={max_length} minus "
                           f"{question_tokens} question tokens minus {specials} special tokens = {room} — set "
                           f"data.doc_stride<={room - 1} (or lower data.max_question_length)")


def _cut_questions(questions: list[str], tokenizer, max_question_length: int) -> tuple[list[str], int, int]:
    """Questions cut to at most max_question_length tokens (at a token's end, so no word is split); also how many
    were cut and the longest length in tokens after cutting."""
    encoded = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    out, cut, longest = [], 0, 0
    for question, offsets in zip(questions, encoded["offset_mapping"]):
        if len(offsets) > max_question_length:
            question, cut = question[:offsets[max_question_length - 1][1]], cut + 1
        out.append(question)
        longest = max(longest, min(len(offsets), max_question_length))
    return out, cut, longest


def answer_token_span(offsets: list, start_char: int, end_char: int) -> tuple[int, int]:
    """Token indices (start, end), inclusive, of the answer characters [start_char, end_char) in one window;
    (0, 0) — the [CLS] token — when the window does not hold the whole answer."""
    context_tokens = [i for i, span in enumerate(offsets) if span is not None]
    if not context_tokens:
        return 0, 0
    first, last = context_tokens[0], context_tokens[-1]
    if offsets[first][0] > start_char or offsets[last][1] < end_char:
        return 0, 0
    start = max(i for i in context_tokens if offsets[i][0] <= start_char)
    end = min(i for i in context_tokens if offsets[i][1] >= end_char)
    return start, end


def encode(tokenizer, examples: list[QAExample], max_length: int = 384, doc_stride: int = 128,
           max_question_length: int = 64, with_labels: bool = True) -> QuestionWindows:
    """Tokenize (question, context) pairs into windows of max_length tokens, consecutive windows sharing
    doc_stride context tokens. With labels, each window gets the answer's token span, or [CLS] (index 0) when the
    question is unanswerable or the window does not contain the whole answer."""
    if not getattr(tokenizer, "is_fast", False):
        raise BertkitError("question answering needs a fast tokenizer (character offsets) — save a tokenizer.json "
                           "with the model")
    questions, cut, longest = _cut_questions([e.question for e in examples], tokenizer, max_question_length)
    # the questions at hand (the recipe checks the maximum)
    check_window_settings(max_length, doc_stride, longest, tokenizer.num_special_tokens_to_add(pair=True))
    encoded = tokenizer(questions, [e.context for e in examples], truncation="only_second", max_length=max_length,
                        stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    example_index = list(encoded["overflow_to_sample_mapping"])
    offsets = [[_without_space(span, examples[example_index[w]].context) if sequence_id == 1 else None
                for span, sequence_id in zip(encoded["offset_mapping"][w], encoded.sequence_ids(w))]
               for w in range(len(example_index))]
    inputs = {key: encoded[key] for key in ("input_ids", "token_type_ids", "attention_mask") if key in encoded}
    if with_labels:
        spans = [_window_label(examples[example_index[w]], offsets[w]) for w in range(len(example_index))]
        inputs["start_positions"] = [s for s, _ in spans]
        inputs["end_positions"] = [e for _, e in spans]
    return QuestionWindows(inputs, example_index, offsets, cut)


def _without_space(span: tuple[int, int], context: str) -> tuple[int, int]:
    """A token's character span without the space a byte-level BPE token carries in front (ModernBERT's offsets
    include it: 'Ġworld' -> ' world'), so an answer never starts with a space."""
    start, end = span
    while start < end - 1 and context[start].isspace():
        start += 1
    return start, end


def _window_label(example: QAExample, offsets: list) -> tuple[int, int]:
    if not example.answers:
        return 0, 0
    answer = example.answers[0]  # training uses the first gold answer, as SQuAD training sets have one
    return answer_token_span(offsets, answer["answer_start"], answer["answer_start"] + len(answer["text"]))


# ------------------------------------------------------------------------------------------------ answers


@dataclass(frozen=True)
class Span:
    score: float  # start logit + end logit
    start: int  # character offsets into the context, end exclusive
    end: int


@dataclass
class Prediction:
    """The best non-null span of an example over all its windows, and its null score (min over windows)."""

    text: str
    start: int | None
    end: int | None
    score: float  # -inf when no window had a valid span
    null_score: float

    @property
    def null_margin(self) -> float:
        """How much the null answer beats the best span; answer "" when this exceeds the threshold."""
        return self.null_score - self.score

    def decide(self, null_threshold: float | None) -> tuple[str, int | None, int | None, float]:
        """(answer, start, end, score) after the v2 null decision; None threshold = always answer (v1)."""
        if self.start is None or (null_threshold is not None and self.null_margin > null_threshold):
            return "", None, None, self.null_score
        return self.text, self.start, self.end, self.score


def candidate_spans(start_logits, end_logits, offsets: list, n_best: int = 20,
                 max_answer_length: int = 30) -> list[Span]:
    """Candidate spans of one window, best first: the n_best start and n_best end positions among the context
    tokens, paired; spans that are reversed or longer than max_answer_length tokens are skipped."""
    context = np.array([i for i, span in enumerate(offsets) if span is not None], dtype=np.int64)
    if context.size == 0:
        return []
    start_logits, end_logits = np.asarray(start_logits, np.float64), np.asarray(end_logits, np.float64)
    starts = context[np.argsort(-start_logits[context], kind="stable")[:n_best]]
    ends = context[np.argsort(-end_logits[context], kind="stable")[:n_best]]
    spans = []
    for s in starts:
        for e in ends:
            if e < s or e - s + 1 > max_answer_length:
                continue
            spans.append(Span(float(start_logits[s] + end_logits[e]), offsets[s][0], offsets[e][1]))
    return sorted(spans, key=lambda span: (-span.score, span.start, span.end))


def best_prediction(windows: list[tuple], context: str, n_best: int = 20, max_answer_length: int = 30) -> Prediction:
    """One example from its windows [(start_logits, end_logits, offsets)]: the best span across all windows, the
    text cut from the original context, and the smallest null score ([CLS] start + end) of any window."""
    best, null_score = None, math.inf
    for start_logits, end_logits, offsets in windows:
        null_score = min(null_score, float(start_logits[0]) + float(end_logits[0]))
        spans = candidate_spans(start_logits, end_logits, offsets, n_best, max_answer_length)
        if spans and (best is None or spans[0].score > best.score):
            best = spans[0]
    if best is None:
        return Prediction("", None, None, -math.inf, null_score)
    start = best.start
    while start < best.end and context[start].isspace():  # a span starting at a byte-level BPE token of a lone space
        start += 1
    return Prediction(context[start:best.end], start, best.end, best.score, null_score)


def postprocess(start_logits, end_logits, windows: QuestionWindows, examples: list[QAExample], n_best: int = 20,
                max_answer_length: int = 30) -> list[Prediction]:
    """One Prediction per example from per-window logits, in window order (rows may carry padding past each
    window's length, as Trainer's concatenated eval outputs do)."""
    grouped: list[list[tuple]] = [[] for _ in examples]
    for w, example in enumerate(windows.example_index):
        length = len(windows.offsets[w])
        grouped[example].append((start_logits[w][:length], end_logits[w][:length], windows.offsets[w]))
    return [best_prediction(grouped[i], example.context, n_best, max_answer_length)
            for i, example in enumerate(examples)]


# ------------------------------------------------------------------------------------------------ scoring


def tune_null_threshold(margins, f1_if_answered, f1_if_null) -> tuple[float, float]:
    """(threshold, mean F1) that maximises F1 when example i is answered "" iff margins[i] > threshold.

    Candidates lie below all margins (all null), between neighbouring distinct margins (midpoints) and above all
    (never null); among equally good ones the threshold nearest 0 wins (then the lower)."""
    margins = np.asarray(margins, np.float64)
    answered, null = np.asarray(f1_if_answered, np.float64), np.asarray(f1_if_null, np.float64)
    finite = np.unique(margins[np.isfinite(margins)])
    if finite.size == 0:
        return 0.0, float(np.mean(null)) if margins.size else 0.0
    candidates = np.concatenate([[finite[0] - 1.0], (finite[:-1] + finite[1:]) / 2, [finite[-1] + 1.0]])
    f1 = np.array([np.where(margins > t, null, answered).mean() for t in candidates])
    best = candidates[np.isclose(f1, f1.max(), rtol=0, atol=1e-12)]
    threshold = float(min(best, key=lambda t: (abs(t), t)))
    return threshold, float(f1.max())


def references(examples: list[QAExample]) -> list[list[str]]:
    return [[a["text"] for a in e.answers] for e in examples]


def score_predictions(predictions: list[Prediction], examples: list[QAExample], lang: str,
                      null_threshold: float | None) -> dict:
    """SQuAD EM/F1 (0-100, HasAns/NoAns breakdown when both kinds occur) with the given null threshold."""
    from bertkit.metrics import SquadMetric

    answers = [p.decide(null_threshold)[0] for p in predictions]
    return SquadMetric().compute(predictions=answers, references=references(examples), lang=lang)


def tune_and_score(predictions: list[Prediction], examples: list[QAExample], lang: str,
                   allow_no_answer: bool) -> tuple[dict, float | None]:
    """Dev metrics and the null threshold: tuned on these examples for v2 (metrics at that threshold, plus the
    untuned ones at threshold 0 as `*_threshold_0`); None and plain metrics for v1."""
    if not allow_no_answer:
        return score_predictions(predictions, examples, lang, None), None
    from bertkit.metrics import answer_scorer  # the exact normalisation SquadMetric uses

    scorer, golds = answer_scorer(lang), references(examples)
    f1_answered = [scorer(p.text, g)[1] for p, g in zip(predictions, golds)]
    f1_null = [scorer("", g)[1] for g in golds]
    threshold, _ = tune_null_threshold([p.null_margin for p in predictions], f1_answered, f1_null)
    metrics = score_predictions(predictions, examples, lang, threshold)
    untuned = score_predictions(predictions, examples, lang, 0.0)
    metrics.update({"exact_match_threshold_0": untuned["exact_match"], "f1_threshold_0": untuned["f1"],
                    "null_threshold": threshold})
    return metrics, threshold


def compute_metrics_fn(windows: QuestionWindows, examples: list[QAExample], lang: str, allow_no_answer: bool,
                       n_best: int = 20, max_answer_length: int = 30):
    """A Trainer `compute_metrics` scoring examples, not windows. Trainer does not shuffle the eval set, so row w
    of its (padded, concatenated) start/end logits is window w of `windows`; the closure maps windows back to
    examples, picks answers and scores them (v2: at the threshold tuned on this eval set, as the final model is)."""

    def compute_metrics(eval_prediction):
        start_logits, end_logits = eval_prediction.predictions[:2]
        if len(start_logits) != len(windows):
            raise BertkitError(f"got logits for {len(start_logits)} windows but the eval set has {len(windows)} — "
                               "evaluate on the unshuffled eval set built by encode")
        predictions = postprocess(start_logits, end_logits, windows, examples, n_best, max_answer_length)
        return tune_and_score(predictions, examples, lang, allow_no_answer)[0]

    return compute_metrics


def prediction_record(example: QAExample, prediction: Prediction, null_threshold: float | None) -> dict:
    """One output line: the answer text, its character offsets into the context (end exclusive) and its score;
    under v2, "" with the null score when the null answer wins, and the null score always."""
    text, start, end, score = prediction.decide(null_threshold)
    record = {"id": example.id, "question": example.question, "answer": text, "start": start, "end": end,
              "score": round(score, 4) if math.isfinite(score) else None}
    if null_threshold is not None:
        record["null_score"] = round(prediction.null_score, 4)
    return record


# ------------------------------------------------------------------------------------------------ settings


@dataclass
class Settings:
    max_length: int = 384
    """Tokens per window: [CLS] question [SEP] context [SEP]."""
    doc_stride: int = 128
    """Context tokens shared by neighbouring windows of a long context."""
    max_question_length: int = 64
    """Questions longer than this many tokens are cut."""
    n_best: int = 20
    """Start and end positions considered per window."""
    max_answer_length: int = 30
    """Longest answer in tokens."""
    language: Literal["en", "zh"] = "en"
    """Answer scoring: en = SQuAD word EM/F1, zh = character EM/F1."""
    null_threshold: float | None = None
    """SQuAD v2: answer "" when the null score beats the best span by more than this; None = always answer (v1)."""

    def check(self) -> None:
        """Raise a one-line BertkitError naming the key when a saved value cannot work."""
        for key in ("max_length", "max_question_length", "n_best", "max_answer_length"):
            if getattr(self, key) < 1:
                raise BertkitError(f"{SETTINGS_KEY}.{key}={getattr(self, key)} must be at least 1")
        if not 0 <= self.doc_stride < self.max_length - 3:
            raise BertkitError(f"{SETTINGS_KEY}.doc_stride={self.doc_stride} must be between 0 and "
                               f"{SETTINGS_KEY}.max_length={self.max_length} minus 4")
        if self.null_threshold is not None and not math.isfinite(self.null_threshold):
            raise BertkitError(f"{SETTINGS_KEY}.null_threshold={self.null_threshold} must be a finite number (or "
                               f"null for a v1 model)")


# ------------------------------------------------------------------------------------------------ predict / evaluate


@dataclass
class QAModel:
    """A saved QA model, its tokenizer, and the settings it was trained with."""

    model: object
    tokenizer: object
    settings: Settings


def load_predictor(model_dir: str) -> QAModel:
    """A qa run's output directory: the model, its tokenizer, and the window / answer settings it was trained with.
    A checkpoint that saved none (not trained by bertkit) gets windows that fit its positions, a quarter shared."""
    from bertkit.checkpoints import load_finetuned, load_tokenizer
    from bertkit.modeling_bert import BertkitForQuestionAnswering

    model = load_finetuned(BertkitForQuestionAnswering, model_dir, "qa")
    source = str(Path(model_dir) / "config.json")
    settings = read_settings(Settings, model.config, source)
    if getattr(model.config, SETTINGS_KEY, None) is None:
        max_length = min(settings.max_length, model.config.max_position_embeddings)
        settings = dataclasses.replace(settings, max_length=max_length, doc_stride=max_length // 4)
    return QAModel(model, load_tokenizer(model_dir), settings)


def run_windows(model, tokenizer, windows: QuestionWindows, batch_size: int = 64,
                progress=None) -> tuple[list, list]:
    """Start and end logits of every window (one 1-D array each, in window order), batched under a token budget."""
    import torch

    from bertkit.inference import run_batch, token_budget_batches

    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in windows.inputs]
    lengths = [len(ids) for ids in windows.inputs["input_ids"]]
    starts, ends = [None] * len(windows), [None] * len(windows)
    with torch.inference_mode():
        for batch in token_budget_batches(lengths, batch_size * max(lengths, default=1), batch_size):
            padded = tokenizer.pad([{k: windows.inputs[k][w] for k in keys} for w in batch], return_tensors="pt")
            output = run_batch(model, padded)
            for row, w in enumerate(batch):
                starts[w] = output.start_logits[row, :lengths[w]].float().cpu().numpy()
                ends[w] = output.end_logits[row, :lengths[w]].float().cpu().numpy()
            if progress is not None:  # in questions: windows count as their share of them
                progress.advance(len(batch) * progress.total / max(len(windows), 1))
    return starts, ends


def predict_examples(qa: QAModel, examples: list[QAExample], batch_size: int = 64) -> list[Prediction]:
    """One Prediction per example (before the null decision), windows cut as the model was trained."""
    from bertkit.console import ExamplesProgress

    settings = qa.settings
    windows = encode(qa.tokenizer, examples, settings.max_length, settings.doc_stride, settings.max_question_length,
                     with_labels=False)
    with ExamplesProgress("answering", len(examples)) as progress:
        starts, ends = run_windows(qa.model, qa.tokenizer, windows, batch_size, progress)
    return postprocess(starts, ends, windows, examples, settings.n_best, settings.max_answer_length)


def _print_report(report: ReadReport) -> None:
    from bertkit.console import warn

    for line in report.lines():
        warn(line)


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """Answer every {question, context} record of a file; write one JSON line per question, in input order."""
    no_confidence_cut(min_confidence, "qa")
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir],
                                    suffixes=(".jsonl", ".json"),
                                    wrong_suffix="QA predictions are written as JSON lines — use a .jsonl name")
    qa = load_predictor(model_dir)
    examples, report = read_examples(input_path, require_answers=False)
    _print_report(report)
    predictions = predict_examples(qa, examples, batch_size)
    with atomic_output(output_path, "predictions") as handle:
        for example, prediction in zip(examples, predictions):
            record = prediction_record(example, prediction, qa.settings.null_threshold)
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(examples)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """EM / F1 of the model on a labelled file with its saved null threshold (HasAns / NoAns for v2 data)."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    from bertkit.rundir import write_json

    qa = load_predictor(model_dir)
    examples, report = read_examples(input_path, require_answers=True)
    _print_report(report)
    predictions = predict_examples(qa, examples, batch_size)
    metrics = score_predictions(predictions, examples, qa.settings.language, qa.settings.null_threshold)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "examples": len(examples),
                                       "skipped": report.skipped, **metrics})
    return metrics


# ================================================================================================ serving


class Endpoint(serving.Endpoint):
    """{question, context} in; the answer span with its offsets and score out (and the null score under v2)."""

    name = "qa"
    form, spans_in = ("question", "context"), "context"

    def body_of(self, values: dict) -> dict:
        return {"inputs": [{"question": values["question"], "context": values["context"]}]}

    def __init__(self, run_dir: str):
        self.predictor = qa = load_predictor(run_dir)
        self.count = serving.token_counter(qa.tokenizer, 10**9)  # the context is cut into windows: every token costs
        self.info = {"max_length": qa.settings.max_length, "doc_stride": qa.settings.doc_stride}

    def parse(self, inputs) -> list:
        examples = []
        for i, value in enumerate(serving.items(inputs)):
            where = f"inputs[{i}]"
            if not isinstance(value, dict) or not {"question", "context"} <= set(value) or \
                    set(value) - {"question", "context", "id"}:
                raise serving.InputError(f"{where} must be {{\"question\", \"context\"}} (and an optional \"id\")")
            examples.append(QAExample(str(value.get("id", i)), serving.filled(value["question"], f"{where}.question"),
                                      serving.filled(value["context"], f"{where}.context"), [], where))
        return examples

    def chars(self, example) -> int:
        return len(example.question) + len(example.context)

    def tokens(self, examples: list) -> list[int]:
        return self.count([e.question for e in examples], [e.context for e in examples])

    def predict(self, examples: list) -> list[dict]:
        predictions = predict_examples(self.predictor, examples)
        return [prediction_record(e, p, self.predictor.settings.null_threshold) for e, p in zip(examples, predictions)]


# ------------------------------------------------------------------------------------------------ its report


class Report(reporting.Report):
    """The qa part of report.html: dev questions with the context and both answers marked (from the run's
    dev_predictions.jsonl), EM and F1 by answer length."""

    def examples(self, view) -> dict:
        from bertkit.metrics import answer_scorer

        predictions = view.path / "dev_predictions.jsonl"
        if not predictions.is_file():
            return {"why": "no dev_predictions.jsonl (the run had no dev split)"}
        records = {}
        for line in predictions.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "id" in record:
                records[str(record["id"])] = record
        dev = view.dev_file
        if not dev or not Path(dev).is_file():
            return {"why": f"its dev file {dev} is not there any more: the contexts cannot be shown"}
        score = answer_scorer("zh" if reporting.language_of(view) == "zh" else "en")
        rows = []
        for example in read_examples(dev)[0]:
            record = records.get(str(example.id))
            if record is None:
                continue
            gold = [(a.get("text", ""), a.get("answer_start")) for a in example.answers]
            em, f1 = score(record.get("answer") or "", [t for t, _ in gold])
            start = record.get("start") if isinstance(record.get("start"), int) else None
            rows.append({"question": example.question, "context": example.context, "gold": gold,
                         "answer": record.get("answer") or "", "start": start,
                         "end": record.get("end") if start is not None else None, "em": em, "f1": f1})
        return {"qa": rows, "keys": [r["question"] + " | " + r["context"][:80] for r in rows],
                "predicted": [r["answer"] for r in rows]}

    def sections(self, view, examples: dict, diagnosis) -> str:
        questions = examples.get("qa")
        if not questions:
            why = examples.get("why") or "no dev_predictions.jsonl"
            return section("Dev questions", missing(why), 3) + section("EM and F1 by answer length", missing(why), 3)
        wrong = [q for q in questions if q["f1"] < 1]
        shown = (wrong + [q for q in questions if q["f1"] >= 1])[:SHOWN_EXAMPLES]
        items = []
        for q in shown:
            spans = [(a, a + len(t), "gold", "gold") for t, a in q["gold"] if isinstance(a, int)]
            if q["start"] is not None:
                overlap = any(s == (q["start"], q["end"]) for s in ((a, b) for a, b, _, _ in spans))
                spans = [s for s in spans if (s[0], s[1]) != (q["start"], q["end"])]
                spans.append((q["start"], q["end"], "both" if overlap else "pred", "both" if overlap else "predicted"))
            golds = " | ".join(t for t, _ in q["gold"]) or "(no answer)"
            items.append(f'<div class="ex"><strong>{esc(q["question"])}</strong><br>{highlight(q["context"], spans)}'
                         f'<br><span class="note">gold: {esc(golds)} · predicted: {esc(q["answer"] or "(no answer)")}'
                         f' · EM {q["em"]:.0f} · F1 {q["f1"]:.2f}</span></div>')
        intro = (f"<p>{len(wrong)} of {len(questions)} dev questions not answered exactly; the first {len(shown)} "
                 'shown. <mark class="gold">gold</mark> <mark class="pred">predicted</mark> '
                 '<mark class="both">both</mark></p>')
        english = reporting.language_of(view) == "en"
        buckets: dict[str, list] = {}
        for q in questions:
            words = min((len(t.split()) if english else len(t) for t, _ in q["gold"]), default=0)
            name = "no answer" if not q["gold"] else "1-2" if words <= 2 else "3-5" if words <= 5 else "6+"
            buckets.setdefault(name, []).append(q)
        unit = "words" if english else "characters"
        rows = [[f"{name} {unit}" if name != "no answer" else name, len(qs), 100 * sum(q["em"] for q in qs) / len(qs),
                 100 * sum(q["f1"] for q in qs) / len(qs)] for name, qs in sorted(buckets.items())]
        return (section("Dev questions", intro + "".join(items), 3)
                + section("EM and F1 by answer length", table(["gold answer length", "questions", "EM", "F1"], rows),
                          3))



__all__ = [
    "read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file", "evaluate_file",
    "QAExample", "ReadReport", "REPAIR_RADIUS", "locate_answer", "detect_language", "QuestionWindows",
    "check_window_settings", "answer_token_span", "Span", "Prediction", "candidate_spans", "best_prediction",
    "postprocess", "tune_null_threshold", "references", "score_predictions", "tune_and_score", "prediction_record",
    "QAModel", "run_windows", "predict_examples", "Endpoint", "Report",
]
