"""NER tag schemes: IOB2, IOB1 and BIOES tags as entity spans and back, scheme checks and repair, label names."""

from __future__ import annotations

import re

SCHEMES = ("IOB2", "IOB1", "BIOES")
PREFIXES = {"IOB2": ("B", "I"), "IOB1": ("B", "I"), "BIOES": ("B", "I", "E", "S")}
_TAG = re.compile(r"^([BIES])-(.+)$")


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


__all__ = ["SCHEMES", "PREFIXES", "split_tag", "tags_to_spans", "spans_to_tags", "scheme_violations", "repair_tags",
           "label_names", "continuation_ids"]
