"""Tiny random checkpoints of every encoder family bertkit fine-tunes, laid out as Hub checkpoints are.

    tiny_checkpoint(family, directory, texts=None, seed=0) -> Path of the saved checkpoint

Each checkpoint is `AutoModelForMaskedLM.from_config(config)` saved with `save_pretrained` (safetensors, so the
masked-LM head is there as on the Hub) and, beside it, a tokenizer of the family's real kind and class, trained here
offline with the `tokenizers` library on the repo's sample data (English and Chinese). Nothing is downloaded.

The tokenizers are built through the family's own transformers class (RobertaTokenizer(vocab=..., merges=...),
XLMRobertaTokenizer(vocab=[(piece, score), ...]), ...), not from a hand-made `tokenizers.Tokenizer` saved as is:
in transformers 5 `from_pretrained` on a class with its own `__init__` keeps only tokenizer.json's vocab, merges and
post-processor and rebuilds the normalizer and pre-tokenizer itself, so a tokenizer made any other way would not be
the one that loads back. ModernBERT is the exception, as on the Hub: its repo ships a plain PreTrainedTokenizerFast
(TokenizersBackend in transformers 5) whose tokenizer.json is loaded as it is.

Special tokens sit where the family's Hub vocabularies have them (RoBERTa's <mask> and DeBERTa-v3's [MASK] last,
ModernBERT's five [..] tokens after the whole BPE vocabulary, ALBERT's <pad> <unk> [CLS] [SEP] [MASK] first), so
code that assumes pad id 0 or a mask id below the trained pieces is caught here rather than on a real checkpoint.

Each tokenizer kind is trained once per process (~1 s WordPiece, ~0.5 s BPE, ~5 s Unigram on 2 cores) and the
result is the same in every process; the weights come from `torch.manual_seed(seed)`.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path

import torch
import transformers
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

FAMILIES: tuple[str, ...] = ("bert", "roberta", "xlm-roberta", "deberta-v2", "electra", "distilbert", "albert",
                             "ernie", "modernbert")

TOKENIZER_KIND: dict[str, str] = {
    "bert": "wordpiece", "electra": "wordpiece", "distilbert": "wordpiece", "ernie": "wordpiece",
    "roberta": "bpe", "modernbert": "bpe",
    "xlm-roberta": "unigram", "deberta-v2": "unigram", "albert": "unigram",
}

# Whether the family's tokenizer returns token_type_ids by default (its class's model_input_names, as on the Hub).
# ALBERT's class leaves them out in transformers 5 although AlbertModel has a token-type table: pairs then run as one
# segment unless the caller asks for them (return_token_type_ids=True).
RETURNS_TOKEN_TYPE_IDS: dict[str, bool] = {
    "bert": True, "electra": True, "ernie": True, "deberta-v2": True,
    "distilbert": False, "roberta": False, "xlm-roberta": False, "albert": False, "modernbert": False,
}

# Pieces each trainer learns, before the family's special tokens are added: about 2 tokens per English word for each
# kind. Unigram needs more, as it keeps every character it saw (~1,450 here, most of them CJK) and fills only the rest
# with longer pieces; WordPiece keeps its WORDPIECE_ALPHABET most frequent characters, the rarest becoming [UNK] as in
# English BERTs; byte-level BPE starts from the 256 bytes.
TRAINED_PIECES = {"wordpiece": 2000, "bpe": 2000, "unigram": 3000}
WORDPIECE_ALPHABET = 1000

DATA = Path(__file__).resolve().parent.parent / "data"

# Special tokens per family in vocabulary order: `head` takes ids 0.., `tail` follows the trained pieces. The orders
# are those of the families' Hub vocabularies, except WordPiece's, packed at the front (bert-base-uncased has [PAD] at
# 0 and [UNK] [CLS] [SEP] [MASK] at 100-103, after its [unused] slots).
_SPECIALS = {
    "wordpiece": dict(head=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], tail=[]),
    "roberta": dict(head=["<s>", "<pad>", "</s>", "<unk>"], tail=["<mask>"]),
    "modernbert": dict(head=[], tail=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]),
    # XLMRobertaTokenizer hard-codes unk_id=3 and AlbertTokenizer unk_id=1: these orders are not a free choice.
    "xlm-roberta": dict(head=["<s>", "<pad>", "</s>", "<unk>"], tail=["<mask>"]),
    "deberta-v2": dict(head=["[PAD]", "[CLS]", "[SEP]", "[UNK]"], tail=["[MASK]"]),
    "albert": dict(head=["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], tail=[]),
}


def _specials_of(family: str) -> dict:
    return _SPECIALS["wordpiece" if TOKENIZER_KIND[family] == "wordpiece" else family]


# ---------------------------------------------------------------------------------------------- training texts

def _read_csv(path: Path, columns: tuple[str, ...]) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [row[column] for row in csv.DictReader(handle) for column in columns if row.get(column)]


def _read_jsonl(path: Path, fields: tuple[str, ...]) -> list[str]:
    texts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        for field in fields:
            value = record.get(field)
            texts.extend(value if isinstance(value, list) else [value] if value else [])
    return texts


def _read_conll(path: Path) -> list[str]:
    """Sentences of a CoNLL file, its tokens joined by spaces."""
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(" ".join(words))
            words = []
        else:
            words.append(line.split()[0])
    return sentences


def _read_squad(path: Path) -> list[str]:
    texts = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            texts.append(paragraph["context"])
            texts.extend(qa["question"] for qa in paragraph["qas"])
    return texts


def sample_texts() -> list[str]:
    """Every text of the repo's sample data the tasks read (~640 K characters, English and Chinese): what the
    tokenizers are trained on unless a test gives its own texts."""
    texts = []
    for name in ("en_sentiment", "zh_sentiment"):
        for path in sorted((DATA / name).glob("*.csv")):
            texts += _read_csv(path, ("text",))
    for path in sorted((DATA / "en_pair").glob("*.csv")):
        texts += _read_csv(path, ("premise", "hypothesis"))
    for path in sorted((DATA / "ner").glob("*/*.conll")):
        texts += _read_conll(path)
    for path in sorted((DATA / "ner").glob("*/*.jsonl")):
        texts += _read_jsonl(path, ("text",))
    for path in sorted((DATA / "qa").glob("*/*.json")):
        texts += _read_squad(path)
    for path in sorted((DATA / "choice").glob("*/*.jsonl")):
        texts += _read_jsonl(path, ("context", "question", "options"))
    for path in sorted((DATA / "corpus").glob("*.txt")):
        texts += [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return texts


# ------------------------------------------------------------------------------------------ trained tokenizers

# (kind, texts or None for the samples) -> what the trainer learned, without special tokens. One training per kind
# and process: the families of a kind differ only in their special tokens, which are added afterwards.
_TRAINED: dict[tuple[str, tuple[str, ...] | None], object] = {}


def _trained(kind: str, texts: list[str] | None):
    key = (kind, None if texts is None else tuple(texts))
    if key not in _TRAINED:
        _TRAINED[key] = _train(kind, sample_texts() if texts is None else list(texts))
    return _TRAINED[key]


def _train(kind: str, texts: list[str]):
    """wordpiece: tokens in id order; bpe: (tokens in id order, merges); unigram: [(piece, score), ...].

    The normalizer and pre-tokenizer are those the family classes put in front of the model, so the pieces learned
    are the ones those classes will ask for. The `tokenizers` trainers walk Rust hash maps, so WordPiece's alphabet
    at its cut-off, its character ids and Unigram's scores change from one process to the next: those are fixed
    here, and every process (an xdist worker, a torchrun rank) builds the same tokenizer."""
    if kind == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        alphabet = _frequent_characters(tokenizer.normalizer, texts, WORDPIECE_ALPHABET)
        trainer = trainers.WordPieceTrainer(vocab_size=TRAINED_PIECES[kind], initial_alphabet=alphabet,
                                            limit_alphabet=len(alphabet), show_progress=False)
    elif kind == "bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        # All 256 byte symbols from the start, as GPT-2-style vocabularies have: no text is ever out of vocabulary.
        trainer = trainers.BpeTrainer(vocab_size=TRAINED_PIECES[kind],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    elif kind == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.pre_tokenizer = _metaspace_words()
        trainer = trainers.UnigramTrainer(vocab_size=TRAINED_PIECES[kind], show_progress=False)
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r}")
    tokenizer.train_from_iterator(texts, trainer)
    model = json.loads(tokenizer.to_str())["model"]
    if kind == "unigram":
        return _rescored(sorted(piece for piece, _ in model["vocab"]), texts)
    tokens = [token for token, _ in sorted(model["vocab"].items(), key=lambda item: item[1])]
    if kind == "wordpiece":
        # WordPiece encodes by longest match, so only the set of tokens matters, not their ids; the trainer's ids
        # swap between merges of equal count. Characters first, then ##characters, then the longer pieces, each
        # block sorted.
        return sorted(tokens, key=lambda token: (0 if len(token) == 1 else
                                                 1 if len(token) == 3 and token.startswith("##") else 2, token))
    merges = [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge) for merge in model["merges"]]
    return tokens, merges


def _metaspace_words():
    """XLM-R's and ALBERT's pre-tokenizer: words split on whitespace, each led by "▁"."""
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁")])


def _frequent_characters(normalizer, texts: list[str], limit: int) -> list[str]:
    counts = Counter(char for text in texts for char in normalizer.normalize_str(text) if not char.isspace())
    return [char for char, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]]


def _rescored(pieces: list[str], texts: list[str], rounds: int = 2) -> list[tuple[str, float]]:
    """Unigram log-probabilities for a learned piece set, re-estimated deterministically: each round segments every
    distinct word with the current scores (Viterbi, in Rust) and scores each piece by the log of its smoothed share of
    the pieces used. Rounds start from equal scores (fewest pieces per word). Ordered by score, as SentencePiece
    vocabularies are."""
    words = Counter(word for text in texts for word, _ in _metaspace_words().pre_tokenize_str(text))
    distinct = sorted(words)
    scores = dict.fromkeys(pieces, -1.0)
    for _ in range(rounds):
        # The trainer keeps every character it saw, so no word needs the <unk> the model wants to be given.
        vocab = [("<unk>", 0.0)] + [(piece, scores[piece]) for piece in pieces]
        segmenter = Tokenizer(models.Unigram(vocab, unk_id=0))
        used = Counter()
        for word, encoding in zip(distinct, segmenter.encode_batch(distinct)):
            for token in encoding.tokens:
                used[token] += words[word]
        total = sum(used.values()) + 0.5 * len(pieces)
        scores = {piece: math.log((used[piece] + 0.5) / total) for piece in pieces}
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def _with_specials(family: str, pieces: list) -> list:
    """The family's special tokens around the trained pieces (unigram pieces carry a score; specials get 0.0)."""
    specials = _specials_of(family)
    scored = bool(pieces) and isinstance(pieces[0], tuple)
    names = set(specials["head"]) | set(specials["tail"])
    wrap = (lambda token: (token, 0.0)) if scored else (lambda token: token)
    kept = [piece for piece in pieces if (piece[0] if scored else piece) not in names]
    return [wrap(token) for token in specials["head"]] + kept + [wrap(token) for token in specials["tail"]]


def build_tokenizer(family: str, texts: list[str] | None = None, model_max_length: int = 128):
    """The family's transformers tokenizer over a vocabulary trained on `texts` (the sample data by default)."""
    kind = TOKENIZER_KIND[family]
    common = dict(model_max_length=model_max_length)
    if kind == "wordpiece":
        vocab = {token: i for i, token in enumerate(_with_specials(family, _trained(kind, texts)))}
        # ELECTRA and ERNIE ship BertTokenizer (transformers 5 has ElectraTokenizer only as an alias of it).
        cls = transformers.DistilBertTokenizer if family == "distilbert" else transformers.BertTokenizer
        return cls(vocab=vocab, do_lower_case=True, **common)
    if kind == "bpe":
        tokens, merges = _trained(kind, texts)
        if family == "modernbert":
            return _modernbert_tokenizer(tokens, merges, common)
        vocab = {token: i for i, token in enumerate(_with_specials(family, tokens))}
        return transformers.RobertaTokenizer(vocab=vocab, merges=merges, add_prefix_space=False, trim_offsets=True,
                                             **common)
    vocab = _with_specials(family, _trained(kind, texts))
    if family == "xlm-roberta":
        return transformers.XLMRobertaTokenizer(vocab=vocab, **common)
    if family == "deberta-v2":
        # As microsoft/deberta-v3-*: cased, no punctuation split.
        unk_id = next(i for i, (piece, _) in enumerate(vocab) if piece == "[UNK]")
        return transformers.DebertaV2Tokenizer(vocab=vocab, do_lower_case=False, split_by_punct=False, unk_id=unk_id,
                                               **common)
    if family == "albert":
        return transformers.AlbertTokenizer(vocab=vocab, do_lower_case=True, keep_accents=False, **common)
    raise ValueError(f"unknown family {family!r}")


def _modernbert_tokenizer(tokens: list[str], merges: list[tuple[str, str]], common: dict):
    """ModernBERT's Hub tokenizer: GPT-style byte-level BPE with BERT's [CLS] A [SEP] B [SEP] template, its five
    special tokens appended after the BPE vocabulary, [MASK] eating the space before it, no token_type_ids."""
    backend = Tokenizer(models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False, lstrip=token == "[MASK]")
                                for token in _SPECIALS["modernbert"]["tail"]])
    cls_id, sep_id = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"], clean_up_tokenization_spaces=True,
        **common)


def load_tokenizer_for_words(directory, **kwargs):
    """AutoTokenizer for pre-split words (`is_split_into_words=True`, as NER feeds them).

    Byte-level BPE marks a word start by the space before it, so each pre-split word needs one put in front. In
    transformers 5 `add_prefix_space` passed at call time is silently ignored (every word is then encoded as if it
    continued the previous one): it has to be given when the tokenizer is built. RobertaTokenizer rebuilds its
    pre-tokenizer from it at `from_pretrained`; ModernBERT's PreTrainedTokenizerFast loads tokenizer.json's
    pre-tokenizer as it is and only records the flag, so its pre-tokenizer is switched here. The other kinds mark
    every word start (Metaspace, WordPiece) and load as usual."""
    if TOKENIZER_KIND.get(_model_type(directory)) != "bpe":
        return transformers.AutoTokenizer.from_pretrained(directory, **kwargs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory, add_prefix_space=True, **kwargs)
    pre_tokenizer = tokenizer.backend_tokenizer.pre_tokenizer
    if isinstance(pre_tokenizer, pre_tokenizers.ByteLevel) and not pre_tokenizer.add_prefix_space:
        pre_tokenizer.add_prefix_space = True
        tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizer
    return tokenizer


def _model_type(directory) -> str | None:
    return json.loads((Path(directory) / "config.json").read_text(encoding="utf-8")).get("model_type")


# --------------------------------------------------------------------------------------------------- configs

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=128)
# benchmarks/bench_families.py: wide enough that the encoder's compute, not the fixed overhead, sets the time
WIDE = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
            max_position_embeddings=128)


def _config(family: str, vocab_size: int, ids: dict, size: dict = TINY):
    """A config of the family of `size` (TINY or WIDE), shaped as its Hub configs are in everything but size."""
    if family == "bert":
        return transformers.BertConfig(vocab_size=vocab_size, **size, **ids)
    if family == "roberta":
        # RoBERTa's positions start after the padding index (roberta-base: 514 rows for 512 tokens) and it has one
        # token type: 128 usable positions, as the other families have.
        return transformers.RobertaConfig(vocab_size=vocab_size, **{**size, "max_position_embeddings": 130},
                                          type_vocab_size=1, **ids)
    if family == "xlm-roberta":
        return transformers.XLMRobertaConfig(vocab_size=vocab_size, **{**size, "max_position_embeddings": 130},
                                             type_vocab_size=1, **ids)
    if family == "deberta-v2":
        # As microsoft/deberta-v3-small: relative attention only (no absolute positions, no token types).
        return transformers.DebertaV2Config(
            vocab_size=vocab_size, **size, relative_attention=True, max_relative_positions=-1, position_buckets=256,
            pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
            type_vocab_size=0, layer_norm_eps=1e-7, pooler_hidden_size=size["hidden_size"], **ids)
    if family == "electra":
        return transformers.ElectraConfig(vocab_size=vocab_size, embedding_size=size["hidden_size"], **size, **ids)
    if family == "distilbert":
        return transformers.DistilBertConfig(vocab_size=vocab_size, dim=size["hidden_size"],
                                             n_layers=size["num_hidden_layers"], n_heads=size["num_attention_heads"],
                                             hidden_dim=size["intermediate_size"], max_position_embeddings=128, **ids)
    if family == "albert":
        # One group of one layer, shared across the 2 layers of depth; a factorised embedding smaller than hidden.
        return transformers.AlbertConfig(vocab_size=vocab_size, embedding_size=size["hidden_size"] // 2, **size,
                                         num_hidden_groups=1, inner_group_num=1, hidden_act="gelu_new", **ids)
    if family == "ernie":
        # As nghuyong/ernie-3.0-base-zh: a task-type table beside 4 token types (task_type_ids default to 0).
        return transformers.ErnieConfig(vocab_size=vocab_size, **size, type_vocab_size=4, use_task_id=True,
                                        task_type_vocab_size=3, **ids)
    if family == "modernbert":
        # Layer 0 global, layer 1 sliding-window (local_attention 16, so windows bite on short test inputs); mean
        # pooling as answerdotai/ModernBERT-base's config has it.
        return transformers.ModernBertConfig(vocab_size=vocab_size, **{**size, "max_position_embeddings": 512},
                                             local_attention=16, classifier_pooling="mean", **ids)
    raise ValueError(f"unknown family {family!r}")


def _token_ids(family: str, tokenizer) -> dict:
    """pad/bos/eos/cls/sep/mask ids of the tokenizer, for the config. ModernBERT's config names [CLS] and [SEP] as
    its bos and eos (its defaults, 50281 and 50282, would point past a tiny table); other families leave out what
    their tokenizer lacks."""
    ids = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id")
           for name in ("pad", "bos", "eos", "cls", "sep", "mask")}
    if family == "modernbert":
        ids.update(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    return {key: value for key, value in ids.items() if value is not None}


def tiny_checkpoint(family: str, directory, texts: list[str] | None = None, seed: int = 0, wide: bool = False
                    ) -> Path:
    """Save a tiny random masked-LM checkpoint of `family` and its tokenizer into `directory` (created if needed).

    `texts` trains the tokenizer (default: the repo's sample data); `seed` fixes the weights, so two calls with the
    same arguments save the same checkpoint. `wide`: hidden 256, 4 layers (benchmarks)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}: one of {', '.join(FAMILIES)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(family, texts, model_max_length=512 if family == "modernbert" else 128)
    vocab_size = len(tokenizer)
    if family in ("modernbert", "deberta-v2"):
        # Their Hub embedding tables are larger than the tokenizer (50368 rows for 50285 tokens, 128100 for 128001).
        vocab_size = 8 * math.ceil(vocab_size / 8)
    config = _config(family, vocab_size, _token_ids(family, tokenizer), WIDE if wide else TINY)
    torch.manual_seed(seed)
    model = transformers.AutoModelForMaskedLM.from_config(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    if family == "modernbert":
        # transformers 5 writes its own name for the class; ModernBERT's Hub repo names it PreTrainedTokenizerFast.
        # AutoTokenizer loads either as TokenizersBackend.
        path = directory / "tokenizer_config.json"
        tokenizer_config = json.loads(path.read_text(encoding="utf-8"))
        tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast"
        path.write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return directory


__all__ = ["FAMILIES", "TOKENIZER_KIND", "RETURNS_TOKEN_TYPE_IDS", "tiny_checkpoint", "build_tokenizer",
           "load_tokenizer_for_words", "sample_texts"]
