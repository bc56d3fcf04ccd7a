"""The vocabulary: domain words added to a pretrained tokenizer and model, or a WordPiece tokenizer and BERT
config trained from scratch on the corpus.

Vocabulary extension, in short (`find_new_tokens` + `extend_vocabulary`):
- candidates are the corpus's words, exactly as the tokenizer's own normalizer and pre-tokenizer cut them
  (lower-cased for uncased models), that the WordPiece model splits into `min_pieces` or more pieces, or maps to
  [UNK]; ranked by the tokens they save (count x (pieces - 1); an [UNK] word counts once per occurrence);
- each is added with `tokenizer.add_tokens(AddedToken(word, single_word=True, normalized=True))`. `single_word`
  matters: a plain added token also matches *inside* longer words ("troponins" would become "troponin" + "s",
  "pretroponin" "pre" + "troponin"), which changes the ids of text that has no new word at all. A character that
  the pre-tokenizer isolates anyway (a CJK character, a punctuation mark) is added without `single_word`;
- `model.resize_token_embeddings`, then each new row = the mean of its old pieces' rows, in the input embeddings
  (the tied MLM decoder shares them) and in the MLM decoder bias.
Chinese: BERT's Chinese vocabulary is one token per character, so the gain is characters that map to [UNK]
(each becomes a token). Frequent multi-character words are deliberately not added: they would change the model's
unit from characters to words, drop per-character masking targets, and break the character-aligned recipes (NER,
QA) downstream. On the sample legal corpus bert-base-chinese has no [UNK] character, so nothing is added.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Sequence

import torch
from tokenizers import AddedToken

from bertkit.console import say
from bertkit.errors import BertkitError
from bertkit.shipped import SCRATCH_PREFIX, SCRATCH_SIZES, scratch_size

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4 in a from-scratch vocabulary

# ------------------------------------------------------------------------------------- vocabulary extension


@dataclass(frozen=True)
class NewToken:
    word: str
    """The word as the tokenizer's normalizer leaves it (lower-cased for uncased models)."""
    count: int
    """Occurrences in the corpus."""
    pieces: tuple[str, ...]
    """The old tokenizer's WordPiece tokens for the word."""
    piece_ids: tuple[int, ...] = field(default=())
    """Their ids: the rows whose mean initialises the new embedding."""

    @property
    def saving(self) -> int:
        """Tokens saved over the corpus ([UNK] words: one per occurrence, for the information gained)."""
        return self.count * max(len(self.pieces) - 1, 1)


def count_words(texts: Sequence[str], tokenizer) -> collections.Counter:
    """The corpus's words as the tokenizer sees them: its normalizer, then its pre-tokenizer."""
    backend = tokenizer.backend_tokenizer
    counts: collections.Counter = collections.Counter()
    for text in texts:
        normalized = backend.normalizer.normalize_str(text) if backend.normalizer else text
        counts.update(word for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized))
    return counts


def find_new_tokens(counts: collections.Counter, tokenizer, max_new_tokens: int, min_frequency: int,
                    min_pieces: int = 3) -> list[NewToken]:
    """Words seen at least `min_frequency` times that WordPiece maps to [UNK], or splits into `min_pieces` or more
    pieces (words with a letter: not numbers); the `max_new_tokens` that save the most tokens (ties: alphabetical)."""
    backend, vocab, unk = tokenizer.backend_tokenizer, tokenizer.get_vocab(), tokenizer.unk_token
    candidates = []
    for word, count in counts.items():
        if count < min_frequency or word in vocab:
            continue
        pieces = tuple(token.value for token in backend.model.tokenize(word))
        if unk in pieces or (len(pieces) >= min_pieces and any(c.isalpha() for c in word)):
            candidates.append(NewToken(word, count, pieces, tuple(vocab[p] for p in pieces)))
    candidates.sort(key=lambda t: (-t.saving, t.word))
    return candidates[:max_new_tokens]


def _isolated(word: str, tokenizer) -> bool:
    """Whether the pre-tokenizer cuts `word` out of its neighbours anyway (a CJK character, a punctuation mark):
    then it needs no `single_word` guard (which would refuse it between CJK characters)."""
    backend = tokenizer.backend_tokenizer
    probe = backend.normalizer.normalize_str(f"a{word}a") if backend.normalizer else f"a{word}a"
    return len(backend.pre_tokenizer.pre_tokenize_str(probe)) == 3


def extend_vocabulary(model, tokenizer, new_tokens: Sequence[NewToken]) -> list[int]:
    """Add the words to the tokenizer, grow the model's embeddings, and initialise each new row as the mean of
    its old pieces' rows (input embeddings, hence the tied decoder; and the MLM decoder bias). Old ids and old
    rows are untouched. Returns the new ids, in the order of `new_tokens`."""
    if not new_tokens:
        return []
    old_size = len(tokenizer)
    added = tokenizer.add_tokens([AddedToken(t.word, single_word=not _isolated(t.word, tokenizer), normalized=True)
                                  for t in new_tokens])
    if added != len(new_tokens):
        raise BertkitError(f"the tokenizer took {added} of {len(new_tokens)} new tokens — some already exist")
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    ids = tokenizer.convert_tokens_to_ids([t.word for t in new_tokens])
    embeddings = model.get_input_embeddings().weight  # (V', D)
    bias = model.cls.predictions.bias if hasattr(model, "cls") else None  # (V',)
    with torch.no_grad():
        for new_id, token in zip(ids, new_tokens):
            old = torch.tensor(token.piece_ids, dtype=torch.long)
            embeddings[new_id] = embeddings[old].mean(0)
            if bias is not None:
                bias[new_id] = bias[old].mean()
    if any(i < old_size for i in ids):
        raise BertkitError("new tokens received old ids — the tokenizer's vocabulary is inconsistent")
    return ids


# ---------------------------------------------------------------------------------------------- from scratch



def add_domain_words(model, tokenizer, texts: Sequence[str], max_new_tokens: int, min_frequency: int,
                     min_pieces: int) -> list[str]:
    """vocab.extend: the corpus's frequent many-piece words added to tokenizer and model, said in a line; the words."""
    new = find_new_tokens(count_words(texts, tokenizer), tokenizer, max_new_tokens, min_frequency, min_pieces)
    extend_vocabulary(model, tokenizer, new)
    shown = ", ".join(f"{t.word} ({len(t.pieces)} pieces, x{t.count})" for t in new[:8])
    say(f"vocabulary extended by {len(new)} tokens to {len(tokenizer):,}"
        f"{': ' + shown + (', ...' if len(new) > 8 else '') if new else ' (no word qualified)'}")
    return [token.word for token in new]


def train_wordpiece(texts: Sequence[str], vocab_size: int, lowercase: bool = True, min_frequency: int = 2,
                    model_max_length: int = 512):
    """A BERT WordPiece tokenizer trained on `texts` with `tokenizers` (BERT's normalizer and pre-tokenizer,
    `##` continuations), as a `BertTokenizerFast` with [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4.

    Note: `tokenizers`' WordPiece trainer is not deterministic (huggingface/tokenizers#1794: ties are broken in
    hash-map order), so two trainings on the same text can differ in a few merges; keep the saved tokenizer."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizerFast

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=lowercase, handle_chinese_chars=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    backend.train_from_iterator(texts, trainer)
    vocab = backend.get_vocab()
    if [vocab.get(t) for t in SPECIAL_TOKENS] != list(range(len(SPECIAL_TOKENS))):
        raise BertkitError("the trained vocabulary does not start with [PAD] [UNK] [CLS] [SEP] [MASK]")
    return BertTokenizerFast(vocab=vocab, do_lower_case=lowercase, model_max_length=model_max_length)


def scratch_config(size: str, vocab_size: int, max_position_embeddings: int = 512):
    """A BertkitConfig of a from-scratch size (SCRATCH_SIZES) over a vocabulary of vocab_size, [PAD] = 0."""
    from bertkit import BertkitConfig

    return BertkitConfig(vocab_size=vocab_size, max_position_embeddings=max_position_embeddings, pad_token_id=0,
                         **SCRATCH_SIZES[size])


def write_vocab_txt(tokenizer, path) -> None:
    """vocab.txt (one token per line, id = line number) beside tokenizer.json, for tools that read it."""
    tokens = [t for t, _ in sorted(tokenizer.backend_tokenizer.get_vocab(with_added_tokens=False).items(),
                                   key=lambda item: item[1])]
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write("".join(f"{t}\n" for t in tokens))


__all__ = ["NewToken", "SCRATCH_PREFIX", "SCRATCH_SIZES", "SPECIAL_TOKENS", "add_domain_words", "count_words",
           "extend_vocabulary",
           "find_new_tokens", "scratch_config", "scratch_size", "train_wordpiece", "write_vocab_txt"]
