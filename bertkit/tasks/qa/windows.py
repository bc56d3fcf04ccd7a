"""Question windows: each (question, context) pair tokenized into windows of max_length tokens, neighbouring
windows sharing doc_stride context tokens, with each token's character offsets into the context and (training)
the answer's token span in every window, or [CLS] where the window does not hold the whole answer.

    windows = encode(tokenizer, examples, max_length=384, doc_stride=128)    QuestionWindows
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BertkitError
from .read import QAExample


@dataclass
class QuestionWindows:
    """The model inputs of every window, and what maps each back to its example's context."""

    inputs: dict[str, list]  # input_ids, token_type_ids, attention_mask [, start_positions, end_positions]
    example_index: list[int]  # window -> example
    offsets: list[list[tuple[int, int] | None]]  # window -> token -> (start, end) in the context; None elsewhere
    truncated_questions: int = 0

    def __len__(self) -> int:
        return len(self.example_index)


def check_window_settings(max_length: int, doc_stride: int, question_tokens: int) -> None:
    """The tokenizer panics (not an exception Python code catches) when the stride does not fit: refuse early.
    The recipe checks with data.max_question_length (every question fits), encode with its longest question."""
    room = max_length - question_tokens - 3  # [CLS] question [SEP] context [SEP]
    if room <= 0:
        raise BertkitError(f"data.max_length={max_length} leaves no room for the context after {question_tokens} "
                           f"question tokens — raise data.max_length or lower data.max_question_length")
    if not 0 <= doc_stride < room:
        raise BertkitError(f"data.doc_stride={doc_stride} must be less than data.max_length={max_length} minus "
                           f"{question_tokens} question tokens minus 3 = {room} — set data.doc_stride<={room - 1} "
                           f"(or lower data.max_question_length)")


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
    check_window_settings(max_length, doc_stride, longest)  # the questions at hand (the recipe checks the maximum)
    encoded = tokenizer(questions, [e.context for e in examples], truncation="only_second", max_length=max_length,
                        stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    example_index = list(encoded["overflow_to_sample_mapping"])
    offsets = [[span if sequence_id == 1 else None for span, sequence_id in
                zip(encoded["offset_mapping"][w], encoded.sequence_ids(w))] for w in range(len(example_index))]
    inputs = {key: encoded[key] for key in ("input_ids", "token_type_ids", "attention_mask") if key in encoded}
    if with_labels:
        spans = [_window_label(examples[example_index[w]], offsets[w]) for w in range(len(example_index))]
        inputs["start_positions"] = [s for s, _ in spans]
        inputs["end_positions"] = [e for _, e in spans]
    return QuestionWindows(inputs, example_index, offsets, cut)


def _window_label(example: QAExample, offsets: list) -> tuple[int, int]:
    if not example.answers:
        return 0, 0
    answer = example.answers[0]  # training uses the first gold answer, as SQuAD training sets have one
    return answer_token_span(offsets, answer["answer_start"], answer["answer_start"] + len(answer["text"]))


__all__ = ["encode", "QuestionWindows", "check_window_settings", "answer_token_span"]
