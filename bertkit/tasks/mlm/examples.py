"""Masked-LM examples from a corpus held in memory: documents read from a file, held-out documents, and the model
rows (group blocks, line windows, NSP pairs) built from plain lists.

The recipe builds the same rows from the `datasets` cache instead (`corpus.py`, `blocks.py`), so that memory stays
flat in corpus size; the two paths give the same group blocks and line windows (tests/test_mlm.py compares them).
`bertkit evaluate` on an mlm model reads its file through `read_examples` and `encode`.
"""

from __future__ import annotations

import random
from typing import Literal, Sequence

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.nsp import make_nsp_examples, split_sentences
from bertkit.tasks.mlm.words import WholeWord, add_word_ids

# ---------------------------------------------------------------------------------------------------- documents


def documents_from_lines(lines: Sequence[str | None]) -> list[list[str]]:
    """Blank-line-separated blocks of non-empty lines: `["a", "b", "", "c"]` -> `[["a", "b"], ["c"]]`."""
    documents, current = [], []
    for line in lines:
        text = (line or "").strip()
        if text:
            current.append(text)
        elif current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    return documents


def read_examples(path: str, text_column: str | None = None) -> list[list[str]]:
    """A corpus as documents of paragraphs. A .txt file: one paragraph per line, blank lines between documents.
    A table (csv, tsv, json, jsonl, parquet, Hub dataset): one document per row of the text column, its lines the
    paragraphs."""
    from bertkit.datafiles import read_table, resolve_columns

    table = read_table(path)
    if str(path).lower().endswith(".txt"):
        documents = documents_from_lines(table["text"])
    else:
        column = resolve_columns(table.features, path, text=text_column, require_label=False).text
        rows = ["" if value is None else str(value) for value in table[column]]
        documents = [[line for line in (part.strip() for part in row.split("\n")) if line] for row in rows]
        documents = [doc for doc in documents if doc]
    if not documents:
        raise BertkitError(f"{path} holds no text — every line (or text cell) is empty")
    return documents


def split_documents(documents: list[list[str]], fraction: float, seed: int) -> tuple[list, list]:
    """(train, held-out): a seeded random `fraction` of the documents (at least one) is held out. With fewer than
    ten documents, paragraphs are held out instead (each its own held-out document; the training documents keep
    the rest)."""
    if not 0.0 < fraction < 1.0:
        raise BertkitError(f"data.eval_fraction must be between 0 and 1, got {fraction} — or give data.eval=<file>")
    by_document = len(documents) >= 10
    units = [(d, None) for d in range(len(documents))] if by_document else \
        [(d, i) for d, doc in enumerate(documents) for i in range(len(doc))]
    if len(units) < 2:
        raise BertkitError("the corpus has a single paragraph: nothing to hold out — give data.eval=<file>")
    count = min(max(1, round(fraction * len(units))), len(units) - 1)
    held = sorted(random.Random(seed).sample(units, count))
    held_set = set(held)
    if by_document:
        return [doc for d, doc in enumerate(documents) if (d, None) not in held_set], [documents[d] for d, _ in held]
    train = [[line for i, line in enumerate(doc) if (d, i) not in held_set] for d, doc in enumerate(documents)]
    return [doc for doc in train if doc], [[documents[d][i]] for d, i in held]


# ----------------------------------------------------------------------------------------------------- rows


def line_examples(texts: list[str], tokenizer, max_length: int, whole_word: str) -> dict[str, list]:
    """One example per text; a text longer than max_length continues in further windows (no text is lost)."""
    kwargs = {"truncation": True, "max_length": max_length, "return_overflowing_tokens": True}
    if whole_word == "chinese":
        out = add_word_ids(texts, tokenizer, "chinese", **kwargs)
        return {"input_ids": [list(x) for x in out["input_ids"]], "word_ids": out["word_ids"]}
    return {"input_ids": [list(x) for x in tokenizer(texts, **kwargs)["input_ids"]]}


def group_examples(texts: list[str], tokenizer, max_length: int, whole_word: str,
                   chunk: int = 1000) -> dict[str, list]:
    """All texts' tokens concatenated and cut into blocks `[CLS] max_length-2 tokens [SEP]` (the last may be
    shorter). With whole_word="chinese" each text's rjieba word ids ride along, shifted so they stay distinct."""
    size = max_length - 2
    if size < 1:
        raise BertkitError(f"data.max_length must be at least 3, got {max_length}")
    with_words = whole_word == "chinese"
    ids: list[int] = []
    words: list[int | None] = []
    shift = 0
    for start in range(0, len(texts), chunk):
        batch = texts[start:start + chunk]
        if with_words:
            enc = add_word_ids(batch, tokenizer, "chinese", add_special_tokens=False)
        else:
            enc = {"input_ids": tokenizer(batch, add_special_tokens=False)["input_ids"]}
        for row, row_ids in enumerate(enc["input_ids"]):
            ids.extend(row_ids)
            if with_words:
                row_words = enc["word_ids"][row]
                words.extend(None if w is None else w + shift for w in row_words)
                shift += 1 + max((w for w in row_words if w is not None), default=-1)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    out: dict[str, list] = {"input_ids": [[cls, *ids[s:s + size], sep] for s in range(0, len(ids), size)]}
    if with_words:
        out["word_ids"] = [[None, *words[s:s + size], None] for s in range(0, len(ids), size)]
    return out


def nsp_examples(documents: list[list[str]], tokenizer, max_length: int, seed: int, whole_word: str) -> list[dict]:
    """Sentence pairs for next-sentence prediction: each document's paragraphs cut into sentences first."""
    sentences = [[s for paragraph in doc for s in split_sentences(paragraph)] for doc in documents]
    return make_nsp_examples(sentences, tokenizer, max_length, seed=seed, whole_word=whole_word)


def encode(tokenizer, documents: list[list[str]], max_length: int = 128, mode: Literal["line", "group"] = "group",
           whole_word: WholeWord = "wordpiece", nsp: bool = False, seed: int = 0) -> list[dict]:
    """Documents -> model rows, as the recipe makes them: NSP sentence pairs (drawn with `seed`), or group blocks /
    line windows of every paragraph in order. Each row has `input_ids` and, where the mode makes them,
    `word_ids`, `token_type_ids` and `next_sentence_label`."""
    if nsp:
        return nsp_examples(documents, tokenizer, max_length, seed, whole_word)
    build = line_examples if mode == "line" else group_examples
    columns = build([paragraph for doc in documents for paragraph in doc], tokenizer, max_length, whole_word)
    return [dict(zip(columns, row)) for row in zip(*columns.values())]


__all__ = ["documents_from_lines", "encode", "group_examples", "line_examples", "nsp_examples", "read_examples",
           "split_documents"]
