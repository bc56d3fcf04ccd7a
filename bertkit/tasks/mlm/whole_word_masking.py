"""Whole-word masking for BERT's masked LM: which tokens form one word (word ids computed once, at tokenization
time), and a collator that selects 15 % of the tokens, or of whole words, and replaces them 80/10/10; fixed
held-out masks.

Why our own word ids and collator: transformers 5.x's `DataCollatorForLanguageModeling(whole_word_mask=True)` finds
words by gaps in character offsets, so an unsegmented Chinese sentence is one "word"; it never reads a segmenter's
output and forces 100 % [MASK] in whole-word mode (docs/notes.md). Here word boundaries are computed when a text is
tokenized (`add_word_ids`, stored as a `word_ids` column: `##` pieces for "wordpiece", rjieba words for
"chinese"), and the collator (`MaskingCollator`) only groups, selects and replaces. `resolve_whole_word` picks the
mode of whole-word="auto" from the corpus's script.

Selection follows Google's `create_pretraining_data.py`: each sequence gets a token budget round(p * n) over its
n maskable tokens, units (tokens or whole words, from the `word_ids`) are taken in random order, and a word that
would overshoot the budget is skipped. Unlike Google (whose 80/10/10 draw is per token even with whole-word
masking), the 80/10/10 decision here is made once per unit, so all tokens of a word get the same treatment.

Reproducible training masks: features that carry an `example_id` (e.g. the dataset's row index) and a collator
with a `seed` get masks that are a pure function of (seed, epoch, example_id, the example itself): each example
draws from its own generator, over its own unpadded length, so the masks do not depend on the batch an example
lands in, on the padded width, on the number of processes, on DataLoader workers or on where a run was resumed.
Set `collator.epoch` at each epoch (`MaskingEpochCallback` does it under `Trainer`) for fresh masks per epoch
(RoBERTa's dynamic masking). Without `example_id` a seeded collator keeps one random stream per process (as
`mask_once` uses for the fixed held-out masks).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import re
from typing import Any, Literal, Sequence

import rjieba
import torch
import transformers

from bertkit.errors import BertkitError

WholeWord = Literal["none", "wordpiece", "chinese"]
WHOLE_WORD_MODES = ("none", "wordpiece", "chinese")
# Tokens that never form a word and are never masked. [UNK] is deliberately absent: it stands for real text.
NON_WORD_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]"})
_UNUSED = re.compile(r"\[unused\d+\]")
EXAMPLE_ID = "example_id"
"""Feature key of an example's identity; with a seeded collator it makes the example's mask reproducible."""
IGNORE_INDEX = -100


# ------------------------------------------------------------------------------------------------ word ids


def _renumber(raw: Sequence[int | None]) -> list[int | None]:
    """Map word indices to 0, 1, 2, ... in order of first appearance; None stays None."""
    new: dict[int, int] = {}
    return [None if w is None else new.setdefault(w, len(new)) for w in raw]


# How a tokenizer marks the pieces of one word: WordPiece marks a continuation (`##able`), byte-level BPE
# (RoBERTa, ModernBERT) and SentencePiece (XLM-R, DeBERTa-v3, ALBERT) mark a word's start (`Ġable`, `▁able`).
WORDPIECE = ("##", False)  # (prefix, whether the prefix starts a word)


def piece_marker(tokenizer) -> tuple[str, bool]:
    """The word-piece marker of a tokenizer, read from its backend (tokenizer.json): WordPiece's continuing-subword
    prefix, or the word-start symbol of a ByteLevel / Metaspace pre-tokenizer (alone or inside a Sequence). A
    tokenizer without a backend (slow) is WordPiece here, as BERT's slow tokenizer is."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return WORDPIECE
    spec = json.loads(backend.to_str())
    if spec["model"]["type"] == "WordPiece":
        return spec["model"].get("continuing_subword_prefix") or "##", False
    pre = spec.get("pre_tokenizer") or {}
    for part in pre.get("pretokenizers") or [pre]:
        if part.get("type") == "ByteLevel":
            return "\u0120", True  # Ġ: the byte-level form of the space before a word
        if part.get("type") == "Metaspace":
            return part.get("replacement", "\u2581"), True  # ▁
    raise BertkitError(f"{type(tokenizer).__name__} marks words neither by WordPiece ## pieces nor by a byte-level "
                       "or SentencePiece word start — set masking.whole_word=none (token-level masking)")


def wordpiece_word_ids(
    tokens: Sequence[str], special_tokens: frozenset[str] | set[str] = NON_WORD_TOKENS,
    marker: tuple[str, bool] = WORDPIECE,
) -> list[int | None]:
    """Word index per sub-word token: with WordPiece a token starts a word and its following `##` tokens continue
    it; with a word-start marker (`marker=("Ġ", True)`, `("▁", True)`) a marked token starts a word and the
    unmarked ones after it continue it.

    `["[CLS]", "un", "##able", "to", "[SEP]"]` -> `[None, 0, 0, 1, None]`;
    `["<s>", "Ġun", "able", "Ġto", "</s>"]` with ("Ġ", True) -> `[None, 0, 0, 1, None]`.
    """
    prefix, prefix_starts = marker
    raw: list[int | None] = []
    word = -1
    for token in tokens:
        if token in special_tokens:
            raw.append(None)
            continue
        # A piece right after a special token has no word to continue: it starts one.
        continues = token.startswith(prefix) != prefix_starts
        if not (continues and raw and raw[-1] is not None):
            word += 1
        raw.append(word)
    return _renumber(raw)


def jieba_spans(text: str) -> list[tuple[int, int]]:
    """Character spans `(start, end)` of the words rjieba cuts `text` into (whitespace pieces included)."""
    spans, cursor = [], 0
    for piece in rjieba.cut(text):
        # Locate each piece rather than summing lengths, so a segmenter that drops characters cannot shift spans.
        start = text.find(piece, cursor)
        if not piece or start < 0:
            continue
        spans.append((start, start + len(piece)))
        cursor = start + len(piece)
    return spans


def chinese_word_ids(
    text: str, offsets: Sequence[Sequence[int]], tokens: Sequence[str] | None = None
) -> list[int | None]:
    """Word index per token from rjieba's segmentation of `text`.

    `offsets` are the fast tokenizer's character spans (`return_offsets_mapping=True`); a token with an empty span
    ([CLS], [SEP], [PAD]) gets None. Given `tokens`, a `##` piece always joins the previous token's word, so an
    English word that WordPiece splits stays one unit even where rjieba cuts inside it ("Müller" -> M|ü|ller).
    """
    starts = [s for s, _ in jieba_spans(text)]
    raw: list[int | None] = []
    for i, (start, end) in enumerate(offsets):
        if end <= start:
            raw.append(None)
        elif tokens is not None and tokens[i].startswith("##") and raw and raw[-1] is not None:
            raw.append(raw[-1])
        else:
            raw.append(max(bisect.bisect_right(starts, start) - 1, 0))  # the word whose span holds `start`
    return _renumber(raw)


def _row_word_ids(encoding, row: int, tokenizer, mode: str, texts: Sequence[str] | None, special: set[str],
                  marker: tuple[str, bool] | None) -> list[int | None]:
    """Word ids of one row of a batch encoding (a window of a long text maps back through
    `overflow_to_sample_mapping`)."""
    tokens = tokenizer.convert_ids_to_tokens(list(encoding["input_ids"][row]))
    if mode == "wordpiece":
        return wordpiece_word_ids(tokens, special, marker)
    if texts is None or "offset_mapping" not in encoding:
        raise BertkitError("chinese word ids need the texts and an encoding made with return_offsets_mapping=True")
    sample = encoding["overflow_to_sample_mapping"][row] if "overflow_to_sample_mapping" in encoding else row
    word_ids = chinese_word_ids(texts[sample], encoding["offset_mapping"][row], tokens)
    return [None if t in special else w for t, w in zip(tokens, word_ids)]


def add_word_ids(
    batch_encoding_or_texts: Any, tokenizer, mode: WholeWord, texts: Sequence[str] | None = None, **tokenizer_kwargs
) -> dict[str, list]:
    """Tokenize (if given texts) and add a `word_ids` column; made for `datasets.map(batched=True)`.

        ds.map(lambda b: add_word_ids(b["text"], tok, "chinese", truncation=True, max_length=128),
               batched=True, remove_columns=ds.column_names)

    Returns `input_ids`, `token_type_ids` (when the tokenizer makes them) and `word_ids`. An existing batch
    encoding works too (for "chinese" it must carry `offset_mapping`, and `texts` must be passed). Single
    sequences only: for sentence pairs use `make_nsp_examples`.
    """
    if mode not in ("wordpiece", "chinese"):
        raise BertkitError(f"add_word_ids mode must be 'wordpiece' or 'chinese', got {mode!r}")
    if isinstance(batch_encoding_or_texts, str) or (
        isinstance(batch_encoding_or_texts, Sequence) and all(isinstance(t, str) for t in batch_encoding_or_texts)
    ):
        texts = [batch_encoding_or_texts] if isinstance(batch_encoding_or_texts, str) else list(batch_encoding_or_texts)
        tokenizer_kwargs.setdefault("return_offsets_mapping", mode == "chinese")
        encoding = tokenizer(texts, **tokenizer_kwargs)
    else:
        encoding = batch_encoding_or_texts
    _reject_pairs(encoding, mode)
    out = {key: list(encoding[key]) for key in ("input_ids", "token_type_ids") if key in encoding}
    # read once per batch, not per row: the marker parses the whole tokenizer.json (17 ms, longer than the row)
    special = set(tokenizer.all_special_tokens) - {tokenizer.unk_token}
    marker = piece_marker(tokenizer) if mode == "wordpiece" else None
    out["word_ids"] = [_row_word_ids(encoding, i, tokenizer, mode, texts, special, marker)
                       for i in range(len(encoding["input_ids"]))]
    return out


def _reject_pairs(encoding, mode: str) -> None:
    # Offsets of a pair's second text count from that text's start: mapping them onto the first text is wrong.
    if mode == "chinese" and any(1 in row for row in encoding.get("token_type_ids", [])):
        raise BertkitError(
            "add_word_ids(mode='chinese') takes single texts, not pairs; use make_nsp_examples for pairs")


# ----------------------------------------------------------------------------------------- whole-word mode
def is_cjk(char: str) -> bool:
    """Whether `char` is a CJK ideograph (the unified blocks, extensions and compatibility ideographs)."""
    code = ord(char)
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2FA1F
            or 0xF900 <= code <= 0xFAFF)


def cjk_fraction(texts: Sequence[str], limit: int = 200_000) -> float:
    """Share of CJK ideographs among the non-space characters of the first `limit` characters."""
    chars = [c for c in "".join(texts)[:limit] if not c.isspace()]
    return sum(map(is_cjk, chars)) / len(chars) if chars else 0.0


def resolve_whole_word(mode: str, texts: Sequence[str]) -> str:
    """`auto` -> "chinese" when most characters are CJK, else "wordpiece"; other modes as given."""
    if mode != "auto":
        return mode
    return "chinese" if cjk_fraction(texts) > 0.5 else "wordpiece"


# ----------------------------------------------------------------------------------------------- collator
def _check_probabilities(mlm: float, mask: float, rand: float) -> None:
    for name, value in (("mlm_probability", mlm), ("mask_replace_prob", mask), ("random_replace_prob", rand)):
        if not 0.0 <= value <= 1.0:
            raise BertkitError(f"{name} must be in [0, 1], got {value}")
    if mask + rand > 1.0 + 1e-9:
        raise BertkitError(f"mask_replace_prob + random_replace_prob must be <= 1, got {mask} + {rand}")


def random_token_ids(tokenizer) -> torch.Tensor:
    """Ids a random replacement may draw: the vocabulary minus special tokens and `[unusedN]` slots
    (never seen in text, so replacing with them teaches nothing). Shape (V',)."""
    special = set(tokenizer.all_special_ids)
    ids = [i for t, i in tokenizer.get_vocab().items() if i not in special and not _UNUSED.fullmatch(t)]
    return torch.tensor(sorted(ids), dtype=torch.long)


def _word_units(maskable: list[bool], word_ids: Sequence[int | None]) -> list[list[int]]:
    """Group maskable positions into words: runs of equal word id. A non-maskable position ends a run (so a pair's
    two sentences, whose word ids may both start at 0, never merge); a None id is a unit of its own."""
    units: list[list[int]] = []
    prev: int | None = None
    for pos, (ok, word) in enumerate(zip(maskable, word_ids)):
        if not ok:
            prev = None
            continue
        if word is None or word != prev:
            units.append([])
        units[-1].append(pos)
        prev = word
    return units


def example_seed(seed: int, epoch: int, example_id: Any) -> int:
    """Seed of one example's masks: a hash of (seed, epoch, example_id), so neighbouring ids and epochs give
    unrelated streams. 32 bits, because torch's CPU generator (mt19937) reads only the low 32 bits of a seed;
    two examples sharing a stream (about N**2 / 2**33 pairs among N) only means correlated draws for those two."""
    if hasattr(example_id, "item"):  # a numpy / torch scalar: hash its value, not its repr
        example_id = example_id.item()
    digest = hashlib.blake2b(f"{int(seed)}/{int(epoch)}/{example_id!r}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")


def _uniform_rows(generators: Sequence[torch.Generator], lengths: Sequence[int], shape) -> torch.Tensor:
    """Row b's first lengths[b] entries drawn from generators[b] (its own length, never the padded width, so the
    draws do not depend on the batch); padding gets 1.0. (B, T)"""
    out = torch.ones(shape)  # (B, T)
    for b, (g, n) in enumerate(zip(generators, lengths)):
        out[b, :n] = torch.rand(n, generator=g)
    return out


def _budget(n_maskable: torch.Tensor, p: float) -> torch.Tensor:
    """Tokens to select per sequence: round(p * n), at least 1 when anything is maskable. (B,) -> (B,)"""
    budget = torch.round(n_maskable.double() * p).long().clamp(min=1)
    return torch.where(n_maskable > 0, budget, torch.zeros_like(budget))


class MaskingCollator:
    """Pads features and masks them for BERT's masked LM (optionally with next-sentence labels).

    Features: dicts with `input_ids` (list[int]), optional `token_type_ids`, `word_ids` (list[int | None], needed
    for whole_word="chinese"; computed from `##` pieces for "wordpiece" when absent) and `next_sentence_label`.
    Other keys are ignored. Returns `input_ids`, `token_type_ids`, `attention_mask`, `labels` (-100 where not
    selected), each (B, T), and `next_sentence_label` (B,) when given.

    With a `seed` and features that carry an `example_id`, each example's mask is a pure function of (seed,
    `self.epoch`, example_id, the example): the same whatever batch, process layout or resume point brings it
    here; `example_id` is dropped from the batch. With a `seed` and no `example_id`, the collator owns one random
    stream per process (one per DataLoader worker); without a seed it uses torch's global RNG, which
    `transformers.set_seed` controls (example ids are then ignored). Under `Trainer`, set
    `remove_unused_columns=False`, or the Trainer drops the `word_ids` and `example_id` columns before they reach
    this collator.
    """

    def __init__(
        self,
        tokenizer,
        mlm_probability: float = 0.15,
        mask_replace_prob: float = 0.8,
        random_replace_prob: float = 0.1,
        whole_word: WholeWord = "none",
        pad_to_multiple_of: int | None = None,
        seed: int | None = None,
    ):
        _check_probabilities(mlm_probability, mask_replace_prob, random_replace_prob)
        if whole_word not in WHOLE_WORD_MODES:
            raise BertkitError(f"whole_word must be one of {', '.join(WHOLE_WORD_MODES)}; got {whole_word!r}")
        if tokenizer.mask_token_id is None or tokenizer.pad_token_id is None:
            raise BertkitError("the tokenizer needs a [MASK] and a [PAD] token for masked-LM training")
        self.tokenizer, self.whole_word, self.seed = tokenizer, whole_word, seed
        self.mlm_probability, self.mask_replace_prob, self.random_replace_prob = (
            mlm_probability, mask_replace_prob, random_replace_prob)
        self.pad_to_multiple_of = pad_to_multiple_of
        never = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id}
        # word pieces: how this tokenizer marks them, and which tokens are no word ([UNK] stands for real text)
        self._marker = piece_marker(tokenizer) if whole_word == "wordpiece" else WORDPIECE
        self._special = NON_WORD_TOKENS | (set(tokenizer.all_special_tokens) - {tokenizer.unk_token})
        self.never_select = torch.tensor(sorted(i for i in never if i is not None), dtype=torch.long)
        self.random_ids = random_token_ids(tokenizer)
        self._generators: dict[int | None, torch.Generator] = {}
        self.epoch = 0
        """Mixed into each example's seed (see `example_seed`): set it at every epoch for fresh masks."""

    def _rng(self) -> torch.Generator | None:
        """This process's generator. DataLoader workers get distinct seeds, or forked copies would repeat one
        stream of masks in every worker."""
        if self.seed is None:
            return None
        info = torch.utils.data.get_worker_info()
        key = None if info is None else info.id
        if key not in self._generators:
            self._generators[key] = torch.Generator().manual_seed(self.seed if key is None else self.seed + 1 + key)
        return self._generators[key]

    def _example_generators(self, features) -> list[torch.Generator] | None:
        """One generator per example, seeded from (seed, epoch, example_id); None when the batch has no example
        ids or the collator no seed (then the per-process stream or torch's global RNG draws)."""
        with_id = [EXAMPLE_ID in f and f[EXAMPLE_ID] is not None for f in features]
        if not any(with_id) or self.seed is None:
            return None
        if not all(with_id):
            raise BertkitError(f"{sum(with_id)} of {len(features)} features carry an '{EXAMPLE_ID}': give every "
                               "feature one, or none")
        return [torch.Generator().manual_seed(example_seed(self.seed, self.epoch, f[EXAMPLE_ID])) for f in features]

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self._pad(features)
        maskable = self._maskable(batch["input_ids"], batch["attention_mask"])  # (B, T) bool
        generators = self._example_generators(features)
        lengths = [len(f["input_ids"]) for f in features]
        if self.whole_word == "none":
            selected, decision = self._select_tokens(maskable, generators, lengths)
        else:
            selected, decision = self._select_words(maskable, self._word_ids(features), generators)
        batch["input_ids"], batch["labels"] = self._replace(batch["input_ids"], selected, decision, generators,
                                                            lengths)
        return batch

    # -- padding
    def _padded_length(self, features) -> int:
        length = max(len(f["input_ids"]) for f in features)
        m = self.pad_to_multiple_of
        return length if not m else -(-length // m) * m

    def _pad(self, features) -> dict[str, torch.Tensor]:
        if not features:
            raise BertkitError("MaskingCollator got an empty batch")
        B, T = len(features), self._padded_length(features)
        input_ids = torch.full((B, T), self.tokenizer.pad_token_id, dtype=torch.long)  # (B, T)
        token_type_ids = torch.zeros((B, T), dtype=torch.long)  # (B, T)
        attention_mask = torch.zeros((B, T), dtype=torch.long)  # (B, T)
        for b, f in enumerate(features):
            n = len(f["input_ids"])
            input_ids[b, :n] = torch.as_tensor(f["input_ids"], dtype=torch.long)
            attention_mask[b, :n] = 1
            if f.get("token_type_ids") is not None:
                token_type_ids[b, :n] = torch.as_tensor(f["token_type_ids"], dtype=torch.long)
        batch = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
        if "next_sentence_label" in features[0]:
            batch["next_sentence_label"] = torch.tensor([int(f["next_sentence_label"]) for f in features])  # (B,)
        return batch

    def _maskable(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Real tokens other than [CLS]/[SEP]/[PAD]/[MASK]. (B, T) -> (B, T) bool"""
        return attention_mask.bool() & ~torch.isin(input_ids, self.never_select)

    # -- selection
    def _select_tokens(self, maskable: torch.Tensor, generators=None,
                       lengths=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Exactly budget tokens per row, uniformly at random: the budget smallest random scores win."""
        if generators is None:
            g = self._rng()
            draw = lambda: torch.rand(maskable.shape, generator=g)  # noqa: E731
        else:
            draw = lambda: _uniform_rows(generators, lengths, maskable.shape)  # noqa: E731
        scores = draw().masked_fill(~maskable, 2.0)  # (B, T); unmaskable last
        ranks = scores.argsort(dim=1).argsort(dim=1)  # (B, T): rank of each position within its row
        selected = ranks < _budget(maskable.sum(1), self.mlm_probability)[:, None]  # (B, T)
        decision = draw()  # (B, T): one 80/10/10 draw per token
        return selected, decision

    def _word_ids(self, features) -> list[Sequence[int | None]]:
        rows = []
        for i, f in enumerate(features):
            word_ids = f.get("word_ids")
            if word_ids is None and self.whole_word == "chinese":
                raise BertkitError("whole_word='chinese' needs a 'word_ids' column; "
                                   "build it with add_word_ids(..., mode='chinese')")
            if word_ids is None:
                word_ids = wordpiece_word_ids(self.tokenizer.convert_ids_to_tokens(list(f["input_ids"])),
                                              self._special, self._marker)
            if len(word_ids) != len(f["input_ids"]):
                n = len(f["input_ids"])
                raise BertkitError(f"feature {i}: word_ids has {len(word_ids)} entries but input_ids has {n}")
            rows.append(list(word_ids))
        return rows

    def _choose_units(self, units: list[list[int]], budget: int, g) -> list[list[int]]:
        """Google's rule: words in random order, skip one that would overshoot, stop at the budget."""
        chosen, count = [], 0
        order = torch.randperm(len(units), generator=g).tolist()
        for i in order:
            if count >= budget:
                break
            if count + len(units[i]) <= budget:
                chosen.append(units[i])
                count += len(units[i])
        if not chosen and units:  # every word is longer than the budget: still mask one per sequence
            chosen.append(units[order[0]])
        return chosen

    def _select_words(self, maskable: torch.Tensor, word_ids: list,
                      generators=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Whole-word selection; the 80/10/10 draw is made once per word and copied to its tokens."""
        stream = self._rng() if generators is None else None
        budgets = _budget(maskable.sum(1), self.mlm_probability).tolist()
        rows, cols, draws = [], [], []
        for b, (row_ok, row_words) in enumerate(zip(maskable.tolist(), word_ids)):
            g = stream if generators is None else generators[b]
            units = _word_units(row_ok, row_words + [None] * (len(row_ok) - len(row_words)))
            chosen = self._choose_units(units, budgets[b], g)
            for unit, u in zip(chosen, torch.rand(len(chosen), generator=g).tolist()):
                rows += [b] * len(unit)
                cols += unit
                draws += [u] * len(unit)
        selected = torch.zeros_like(maskable)  # (B, T) bool
        decision = torch.ones(maskable.shape)  # (B, T); 1.0 = keep, only read where selected
        selected[rows, cols] = True
        decision[rows, cols] = torch.tensor(draws, dtype=decision.dtype)
        return selected, decision

    # -- replacement
    def _replace(self, input_ids, selected, decision, generators=None,
                 lengths=None) -> tuple[torch.Tensor, torch.Tensor]:
        """80 % [MASK], 10 % a random token (drawn per position), 10 % unchanged. All (B, T)."""
        labels = torch.where(selected, input_ids, torch.full_like(input_ids, -100))  # (B, T)
        p_mask, p_random = self.mask_replace_prob, self.mask_replace_prob + self.random_replace_prob
        to_mask = selected & (decision < p_mask)  # (B, T)
        to_random = selected & (decision >= p_mask) & (decision < p_random)  # (B, T)
        inputs = input_ids.masked_fill(to_mask, self.tokenizer.mask_token_id)
        if generators is None:
            picks = torch.randint(len(self.random_ids), (int(to_random.sum()),), generator=self._rng())  # (R,)
        else:  # a candidate per position of each example (its own length), read where it is randomised
            candidates = torch.zeros_like(input_ids)  # (B, T)
            for b, (g, n) in enumerate(zip(generators, lengths)):
                candidates[b, :n] = torch.randint(len(self.random_ids), (n,), generator=g)
            picks = candidates[to_random]  # (R,)
        inputs[to_random] = self.random_ids[picks]
        return inputs, labels


# ------------------------------------------------------------------------------------- fixed held-out masks


def pad_masked(features: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Pad already-masked features (`input_ids`, `labels`, optional `token_type_ids`, `next_sentence_label`)
    into a batch: input_ids with [PAD], labels with -100. All (B, T) except next_sentence_label (B,)."""
    B, T = len(features), max(len(f["input_ids"]) for f in features)
    batch = {"input_ids": torch.full((B, T), pad_token_id, dtype=torch.long),  # (B, T)
             "token_type_ids": torch.zeros((B, T), dtype=torch.long),  # (B, T)
             "attention_mask": torch.zeros((B, T), dtype=torch.long),  # (B, T)
             "labels": torch.full((B, T), IGNORE_INDEX, dtype=torch.long)}  # (B, T)
    for b, f in enumerate(features):
        n = len(f["input_ids"])
        batch["input_ids"][b, :n] = torch.as_tensor(f["input_ids"])
        batch["labels"][b, :n] = torch.as_tensor(f["labels"])
        batch["attention_mask"][b, :n] = 1
        if f.get("token_type_ids") is not None:
            batch["token_type_ids"][b, :n] = torch.as_tensor(f["token_type_ids"])
    if "next_sentence_label" in features[0]:
        batch["next_sentence_label"] = torch.tensor([int(f["next_sentence_label"]) for f in features])  # (B,)
    return batch


def mask_once(features: Sequence[dict[str, Any]], collator, batch_size: int = 32) -> list[dict[str, Any]]:
    """Mask a held-out set once (give `collator` a fixed seed): the same positions, replacements and labels for
    every later evaluation, so perplexity before and after training compares like with like."""
    masked = []
    for start in range(0, len(features), batch_size):
        chunk = list(features[start:start + batch_size])
        batch = collator(chunk)
        for b, f in enumerate(chunk):
            n = len(f["input_ids"])
            row = {key: batch[key][b, :n].tolist() for key in ("input_ids", "token_type_ids", "labels")}
            if "next_sentence_label" in batch:
                row["next_sentence_label"] = int(batch["next_sentence_label"][b])
            masked.append(row)
    return masked


class PretrainingCollator:
    """Masks training features on the fly with a `MaskingCollator`; features that already carry `labels` (the
    held-out set from `mask_once`) are only padded, so Trainer's evaluation sees the fixed masks too."""

    def __init__(self, masking):
        self.masking = masking

    def __call__(self, features):
        if "labels" in features[0]:
            return pad_masked(features, self.masking.tokenizer.pad_token_id)
        return self.masking(features)


class MaskingEpochCallback(transformers.TrainerCallback):
    """Sets `MaskingCollator.epoch` to the Trainer's epoch at the start of each one: with example ids in the
    features and a seeded collator, every epoch masks afresh (dynamic masking), and an example's mask in an epoch
    is the same in any process layout and after a resume (the resumed epoch is read back from the checkpoint's
    state). Needs the collator to live in the process that runs the Trainer: DataLoader workers are forked at the
    start of each epoch, after this callback, unless `dataloader_persistent_workers` keeps the first epoch's copy
    (then every epoch would reuse the first epoch's masks: refused)."""

    def __init__(self, collator):
        self.collator = collator

    def on_train_begin(self, args, state, control, **kwargs):
        if args.dataloader_num_workers > 0 and args.dataloader_persistent_workers:
            raise BertkitError("dataloader_persistent_workers keeps each worker's copy of the masking collator, so "
                               "its epoch would never advance — set train.dataloader_persistent_workers=false")

    def on_epoch_begin(self, args, state, control, **kwargs):
        # state.epoch is k at the start of epoch k, k + steps done / steps per epoch after a mid-epoch resume; the
        # epsilon guards a float sum that lands a hair under k.
        self.collator.epoch = math.floor(state.epoch + 1e-6)


def with_example_ids(examples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The examples, each with its row index as `example_id` (what makes its training masks reproducible)."""
    return [{**example, EXAMPLE_ID: i} for i, example in enumerate(examples)]


__all__ = [
    "EXAMPLE_ID",
    "IGNORE_INDEX",
    "NON_WORD_TOKENS",
    "WHOLE_WORD_MODES",
    "MaskingCollator",
    "MaskingEpochCallback",
    "PretrainingCollator",
    "WholeWord",
    "add_word_ids",
    "chinese_word_ids",
    "cjk_fraction",
    "example_seed",
    "is_cjk",
    "jieba_spans",
    "mask_once",
    "pad_masked",
    "random_token_ids",
    "resolve_whole_word",
    "with_example_ids",
    "wordpiece_word_ids",
    "piece_marker",
    "WORDPIECE",
]
