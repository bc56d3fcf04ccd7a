"""Continued (or from-scratch) masked-LM pretraining: corpus reading, example building, held-out perplexity with
fixed masks, vocabulary extension, and from-scratch tokenizers and models. Plain functions (plus a collator and
a Trainer whose evaluation scores masked positions only); `recipes/mlm.py` wires them to `transformers.Trainer`.

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
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import transformers
from tokenizers import AddedToken

from bertkit.errors import BertkitError
from bertkit.masking import EXAMPLE_ID, add_word_ids, make_nsp_examples

IGNORE_INDEX = -100
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4 in a from-scratch vocabulary

# ----------------------------------------------------------------------------------------------------- corpus


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


def read_documents(path: str, text_column: str | None = None) -> list[list[str]]:
    """A corpus as documents of paragraphs. A .txt file: one paragraph per line, blank lines between documents.
    A table (csv, tsv, json, jsonl, parquet, Hub dataset): one document per row of the text column, its lines the
    paragraphs."""
    from bertkit.data import read_table, resolve_columns

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


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")


def split_sentences(paragraph: str) -> list[str]:
    """Sentences for NSP pairs: after . ! ? followed by space, and after Chinese 。！？；."""
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s and s.strip()]


def is_cjk(char: str) -> bool:
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


# --------------------------------------------------------------------------------------------------- examples


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


# ------------------------------------------------------------------------------------------ head warm-up


def new_head_parameters(model) -> list[torch.nn.Parameter]:
    """The head's own parameters (MLM transform and bias, NSP classifier): not the decoder, which is the encoder's
    word embedding matrix (tied)."""
    encoder = {id(p) for p in model.bert.parameters()}
    return [p for p in model.cls.parameters() if id(p) not in encoder]


def warmup_order(count: int, examples: int, seed: int) -> list[int]:
    """`count` example indices in a seeded random order, passing over the examples again when there are fewer."""
    order: list[int] = []
    for rounds in range(-(-count // max(examples, 1))):
        need = min(examples, count - len(order))
        order += random.Random(f"head-warmup/{seed}/{rounds}").sample(range(examples), need)
    return order


def warm_up_head(model, examples, collator, steps: int, batch_size: int, lr: float, seed: int) -> int:
    """Train a new MLM (and NSP) head for `steps` with the encoder frozen and in eval mode, so that the held-out
    perplexity measured next is that of the pretrained encoder read by a fitted head, not of a random head (about
    50,000 on MiniLM, which any training "lowers"). Eval mode (no dropout), seeded example order and masks (the
    collator's epoch -1, never a training epoch): the same head in any process layout and after a resume. The
    batch size is the run's global one, so one process and several warm up alike. Returns the steps taken."""
    head = new_head_parameters(model)
    frozen = [p for p in model.parameters() if p.requires_grad and all(p is not h for h in head)]
    for p in frozen:
        p.requires_grad_(False)
    was_training, epoch = model.training, collator.epoch
    model.eval()
    collator.epoch = -1
    optimizer = torch.optim.AdamW(head, lr=lr, weight_decay=0.0)
    order = warmup_order(steps * batch_size, len(examples), seed)
    device = next(model.parameters()).device
    try:
        for start in range(0, len(order), batch_size):
            batch = collator([examples[i] for i in order[start:start + batch_size]])
            loss = head_loss(model, {k: v.to(device) for k, v in batch.items()})
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    finally:
        for p in frozen:
            p.requires_grad_(True)
        model.train(was_training)
        collator.epoch = epoch
    return -(-len(order) // batch_size)


def head_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Masked-LM loss (plus NSP loss when labelled) through the head only: the encoder runs without a graph."""
    with torch.no_grad():
        out = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    selected = batch["labels"].ne(IGNORE_INDEX)  # (B, T)
    logits = model.cls.predictions(out.last_hidden_state[selected])  # (M, D) -> (M, V)
    loss = torch.nn.functional.cross_entropy(logits.float(), batch["labels"][selected])
    if "next_sentence_label" in batch and hasattr(model.cls, "seq_relationship"):
        nsp = model.cls.seq_relationship(out.pooler_output)  # (B, 2)
        loss = loss + torch.nn.functional.cross_entropy(nsp.float(), batch["next_sentence_label"])
    return loss


# ---------------------------------------------------------------------------------------- loading the model


def load_mlm_model(path: str, nsp: bool = False):
    """A checkpoint as `BertkitForMaskedLM` (or `BertkitForPreTraining` with nsp) and what was new in it.

    A checkpoint without an MLM head (a sentence-embedding model such as MiniLM) gets a fresh one: transform
    initialised as in BERT, bias zero, decoder tied to the word embeddings. A checkpoint's pooler, which the MLM
    head never uses, is carried along unchanged (no gradient reaches it), so a classifier fine-tuned from the
    output starts from the same pooler as one fine-tuned from the original checkpoint."""
    from bertkit import BertkitForMaskedLM, BertkitForPreTraining, BertkitModel

    from .console import quiet_load_report

    model_class = BertkitForPreTraining if nsp else BertkitForMaskedLM
    with quiet_load_report():  # the report says what is new (the caller prints it): transformers' table to train.log
        model, info = model_class.from_pretrained(path, output_loading_info=True)
    missing = sorted(info["missing_keys"])
    report = {"new_mlm_keys": [k for k in missing if k.startswith("cls.predictions.")],
              "new_nsp_keys": [k for k in missing if k.startswith("cls.seq_relationship.")],
              "pooler": "none"}
    if nsp:
        report["pooler"] = "new" if any(".pooler." in f".{k}" for k in missing) else "kept"
    elif any(".pooler." in f".{k}" for k in info["unexpected_keys"]):
        with quiet_load_report():
            model.bert.pooler = BertkitModel.from_pretrained(path).pooler
        report["pooler"] = "kept"
    report["mlm_head"] = "new" if report["new_mlm_keys"] else "loaded"
    return model, report


def decoder_is_tied(model) -> bool:
    return model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


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

SCRATCH_SIZES = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "mini": {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    "small": {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "intermediate_size": 2048},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
}
SCRATCH_PREFIX = "scratch:"


def scratch_size(model: str) -> str | None:
    """`scratch:tiny` -> "tiny"; None for a checkpoint name. An unknown size is an error naming the sizes."""
    if not model.startswith(SCRATCH_PREFIX):
        return None
    size = model[len(SCRATCH_PREFIX):]
    if size not in SCRATCH_SIZES:
        raise BertkitError(f"model={model}: unknown size '{size}' — use scratch:{' | scratch:'.join(SCRATCH_SIZES)}")
    return size


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
    from bertkit import BertkitConfig

    return BertkitConfig(vocab_size=vocab_size, max_position_embeddings=max_position_embeddings, pad_token_id=0,
                         **SCRATCH_SIZES[size])


def write_vocab_txt(tokenizer, path) -> None:
    """vocab.txt (one token per line, id = line number) beside tokenizer.json, for tools that read it."""
    tokens = [t for t, _ in sorted(tokenizer.backend_tokenizer.get_vocab(with_added_tokens=False).items(),
                                   key=lambda item: item[1])]
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write("".join(f"{t}\n" for t in tokens))


__all__ = [
    "SCRATCH_SIZES", "SPECIAL_TOKENS", "MaskingEpochCallback", "NewToken",
    "PretrainingCollator", "cjk_fraction",
    "count_words", "decoder_is_tied", "documents_from_lines", "extend_vocabulary", "find_new_tokens", "head_loss",
    "new_head_parameters", "warm_up_head", "warmup_order",
    "group_examples", "is_cjk", "line_examples", "load_mlm_model", "mask_once",
    "nsp_examples", "pad_masked", "read_documents", "resolve_whole_word", "scratch_config",
    "scratch_size", "split_documents", "split_sentences", "train_wordpiece", "with_example_ids", "write_vocab_txt",
]
