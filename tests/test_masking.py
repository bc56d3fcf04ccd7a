"""Masked-LM masking (per-process streams and per-example masks from example ids), word ids, NSP pairs and the
bundled Chinese tokenizer.

The statistical tests run the collator over 2,000 sequences: with ~20,000 selected tokens the standard error of
the 0.80 / 0.10 / 0.10 shares is about 0.003, so the +-0.02 bands are far from flaky yet catch a wrong rule.
"""

import random

import pytest
import torch
from transformers import AutoTokenizer

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.corpus import make_nsp_examples
from bertkit.tasks.mlm.whole_word_masking import (EXAMPLE_ID, MaskingCollator, add_word_ids, chinese_word_ids,
                                                  example_seed, random_token_ids, wordpiece_word_ids)
from bertkit.tokenization import chinese_bert_tokenizer, chinese_vocab_path, read_vocab

N_SEQUENCES = 2000


@pytest.fixture(scope="module")
def zh():
    return chinese_bert_tokenizer()


@pytest.fixture(scope="module")
def en(minilm_dir):
    return AutoTokenizer.from_pretrained(minilm_dir)


def with_ids(features):
    return [{**f, EXAMPLE_ID: i} for i, f in enumerate(features)]


def collate_all(collator, features, batch_size=50):
    """Run the collator batch by batch; yield (original features, batch) pairs."""
    for i in range(0, len(features), batch_size):
        chunk = features[i : i + batch_size]
        yield chunk, collator(chunk)


def padded_originals(chunk, width, pad_id):
    """The unmasked input ids of a chunk, padded like the collator pads them. (B, T)"""
    return torch.tensor([f["input_ids"] + [pad_id] * (width - len(f["input_ids"])) for f in chunk])


def token_classes(orig, inputs, labels, mask_id):
    """Masks over (B, T): selected, and within it [MASK] / random / unchanged."""
    selected = labels != -100
    masked = selected & (inputs == mask_id)
    randomised = selected & (inputs != mask_id) & (inputs != orig)
    kept = selected & (inputs == orig)
    return selected, masked, randomised, kept


# ----------------------------------------------------------------------------------------------- tokenizer
def test_chinese_tokenizer_known_ids(zh):
    assert zh("我爱北京")["input_ids"] == [101, 2769, 4263, 1266, 776, 102]
    assert len(zh) == 21128


def test_chinese_tokenizer_ids_after_the_u2028_entry(zh):
    # Every id after 343 would shift by one if the vocab file were read with splitlines().
    lines = chinese_vocab_path().read_text(encoding="utf-8").split("\n")
    assert lines[343] == "\u2028" and lines[13502] == "##\u2028"
    assert len(chinese_vocab_path().read_text(encoding="utf-8").splitlines()) != 21128  # the trap is real
    text = "我在北京大学读书，天气很好。"
    expected = [101] + [lines.index(ch) for ch in text] + [102]
    assert zh(text)["input_ids"] == expected
    assert all(i > 343 for i in expected[1:-1])


def test_chinese_tokenizer_matches_every_vocab_line(zh):
    vocab = read_vocab(chinese_vocab_path())
    sample = random.Random(0).sample(sorted(vocab.items(), key=lambda kv: kv[1]), 500)
    assert zh.convert_tokens_to_ids([t for t, _ in sample]) == [i for _, i in sample]
    assert zh.convert_ids_to_tokens([343, 13502, 21127]) == ["\u2028", "##\u2028", list(vocab)[-1]]


def test_read_vocab_missing_file_is_a_bertkit_error(tmp_path):
    with pytest.raises(BertkitError, match="cannot read"):
        read_vocab(tmp_path / "nope.txt")


# ----------------------------------------------------------------------------------------------- word ids
def test_wordpiece_word_ids_follow_the_hash_rule():
    tokens = ["[CLS]", "un", "##bel", "##ie", "to", "##ken", "[UNK]", "!", "[SEP]", "##x", "[PAD]"]
    assert wordpiece_word_ids(tokens) == [None, 0, 0, 0, 1, 1, 2, 3, None, 4, None]


def test_chinese_word_ids_group_rjieba_words(zh):
    text = "我在北京大学读书"
    enc = zh(text, return_offsets_mapping=True)
    word_ids = chinese_word_ids(text, enc["offset_mapping"])
    # [CLS] 我 在 北 京 大 学 读 书 [SEP]
    assert word_ids == [None, 0, 1, 2, 2, 2, 2, 3, 3, None]


def test_chinese_word_ids_keep_english_wordpieces_together(zh):
    text = "我用transformers模型做NLP2023研究，Müller先生"
    out = add_word_ids([text], zh, "chinese")
    tokens = zh.convert_ids_to_tokens(out["input_ids"][0])
    words = {}
    for token, w in zip(tokens, out["word_ids"][0]):
        words.setdefault(w, []).append(token)
    assert ["t", "##ran", "##s", "##form", "##ers"] in words.values()
    assert ["n", "##lp", "##20", "##23"] in words.values()
    assert ["mu", "##ller"] in words.values()  # rjieba cuts M|ü|ller; the ## rule rejoins the pieces
    assert ["模", "型"] in words.values() and ["研", "究"] in words.values() and ["先", "生"] in words.values()
    assert words[None] == ["[CLS]", "[SEP]"]


def test_add_word_ids_maps_overflow_windows_back_to_their_text(zh):
    text = "我在北京大学读书，他在清华大学工作。" "今天天气很好，我们去颐和园散步吧。" * 3
    full = add_word_ids([text], zh, "chinese")["word_ids"][0][1:-1]  # one word id per character
    windows = zh([text], truncation=True, max_length=16, stride=4, return_overflowing_tokens=True,
                 return_offsets_mapping=True)
    out = add_word_ids(windows, zh, "chinese", texts=[text])
    assert len(out["word_ids"]) > 3
    for row, offsets in zip(out["word_ids"], windows["offset_mapping"]):
        pairs = [(w, full[s]) for w, (s, e) in zip(row, offsets) if w is not None]
        for (w1, f1), (w2, f2) in zip(pairs, pairs[1:]):
            assert (w1 == w2) == (f1 == f2)  # same word partition as the whole text


def test_add_word_ids_runs_in_datasets_map(zh):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": ["我在北京大学读书", "他在清华大学工作"]})
    ds = ds.map(lambda b: add_word_ids(b["text"], zh, "chinese", truncation=True, max_length=32),
                batched=True, remove_columns=["text"])
    assert set(ds.column_names) == {"input_ids", "token_type_ids", "word_ids"}
    assert ds[0]["word_ids"] == [None, 0, 1, 2, 2, 2, 2, 3, 3, None]
    batch = MaskingCollator(zh, whole_word="chinese", seed=0)(list(ds))
    assert batch["input_ids"].shape == batch["labels"].shape == (2, 10)


# ----------------------------------------------------------------------------------------------- token masking
def random_features(n, seed=0, low=16, high=128):
    """n sequences of random CJK-character ids framed by [CLS] ... [SEP], lengths uniform in [low, high]."""
    rng = random.Random(seed)
    return [{"input_ids": [101] + [rng.randrange(670, 8000) for _ in range(rng.randint(low, high))] + [102]}
            for _ in range(n)]


@pytest.mark.parametrize("per_example", [False, True], ids=["stream", "per-example"])
def test_token_masking_rates(zh, per_example):
    features = random_features(N_SEQUENCES)
    features = with_ids(features) if per_example else features
    real = selected = masked = randomised = kept = 0
    for chunk, batch in collate_all(MaskingCollator(zh, seed=0), features):
        orig = padded_originals(chunk, batch["input_ids"].shape[1], zh.pad_token_id)
        sel, m, r, k = token_classes(orig, batch["input_ids"], batch["labels"], zh.mask_token_id)
        assert torch.equal(batch["labels"][sel], orig[sel])  # labels carry the original ids
        real += sum(len(f["input_ids"]) - 2 for f in chunk)
        selected, masked, randomised, kept = (selected + int(sel.sum()), masked + int(m.sum()),
                                              randomised + int(r.sum()), kept + int(k.sum()))
    assert selected / real == pytest.approx(0.15, abs=0.01)
    assert masked / selected == pytest.approx(0.80, abs=0.02)
    assert randomised / selected == pytest.approx(0.10, abs=0.02)
    assert kept / selected == pytest.approx(0.10, abs=0.02)


def test_custom_rates_are_honoured(zh):
    collator = MaskingCollator(zh, mlm_probability=0.3, mask_replace_prob=0.5, random_replace_prob=0.5, seed=0)
    chunk = random_features(200)
    batch = collator(chunk)
    orig = padded_originals(chunk, batch["input_ids"].shape[1], zh.pad_token_id)
    sel, m, r, k = token_classes(orig, batch["input_ids"], batch["labels"], zh.mask_token_id)
    assert sel.sum() / sum(len(f["input_ids"]) - 2 for f in chunk) == pytest.approx(0.3, abs=0.01)
    assert m.sum() / sel.sum() == pytest.approx(0.5, abs=0.03) and k.sum() / sel.sum() < 0.01


def test_special_tokens_and_padding_are_never_selected(zh):
    rng = random.Random(1)
    features = []
    for _ in range(400):
        body = [rng.choice([100, 103, rng.randrange(670, 8000)]) for _ in range(rng.randint(1, 30))]  # [UNK], [MASK]
        cut = rng.randint(0, len(body))
        ids = [101] + body[:cut] + [102] + body[cut:] + [102]
        features.append({"input_ids": ids, "token_type_ids": [0] * (cut + 2) + [1] * (len(body) - cut + 1)})
    unk_selected = 0
    for chunk, batch in collate_all(MaskingCollator(zh, mlm_probability=0.4, seed=3), features):
        orig = padded_originals(chunk, batch["input_ids"].shape[1], zh.pad_token_id)
        lengths = torch.tensor([len(f["input_ids"]) for f in chunk])
        real = torch.arange(orig.shape[1])[None, :] < lengths[:, None]  # (B, T)
        assert torch.equal(batch["attention_mask"].bool(), real)
        protected = ~real | torch.isin(orig, torch.tensor([0, 101, 102, 103]))
        assert (batch["labels"][protected] == -100).all()
        assert torch.equal(batch["input_ids"][protected], orig[protected])
        tt = [f["token_type_ids"] + [0] * (orig.shape[1] - len(f["token_type_ids"])) for f in chunk]
        assert torch.equal(batch["token_type_ids"], torch.tensor(tt))
        unk_selected += int((batch["labels"] == 100).sum())
    assert unk_selected > 0  # [UNK] stands for real text and may be masked


def test_random_replacements_avoid_special_and_unused_tokens(zh):
    allowed = set(random_token_ids(zh).tolist())
    assert not allowed & set(zh.all_special_ids)
    assert not any(t.startswith("[unused") for t in zh.convert_ids_to_tokens(sorted(allowed)))
    collator = MaskingCollator(zh, mask_replace_prob=0.0, random_replace_prob=1.0, seed=0)
    chunk = random_features(100)
    batch = collator(chunk)
    sel = batch["labels"] != -100
    assert set(batch["input_ids"][sel].tolist()) <= allowed
    assert len(set(batch["input_ids"][sel].tolist())) > 0.5 * int(sel.sum())  # drawn per position


def test_at_least_one_token_per_sequence(zh):
    batch = MaskingCollator(zh, seed=0)([{"input_ids": [101, 2769, 102]}, {"input_ids": [101, 102]}])
    assert (batch["labels"][0] != -100).sum() == 1
    assert (batch["labels"][1] == -100).all()  # nothing maskable: nothing selected


def test_padding_to_multiple_and_nsp_labels_pass_through(zh):
    features = [{"input_ids": [101, 2769, 4263, 102], "next_sentence_label": 1},
                {"input_ids": [101] + [2769] * 8 + [102], "next_sentence_label": 0}]
    batch = MaskingCollator(zh, pad_to_multiple_of=8, seed=0)(features)
    assert batch["input_ids"].shape == (2, 16)
    assert batch["next_sentence_label"].tolist() == [1, 0]
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}


def test_seeded_collator_is_reproducible(zh):
    chunk = random_features(64)
    a, b = MaskingCollator(zh, seed=7)(chunk), MaskingCollator(zh, seed=7)(chunk)
    c = MaskingCollator(zh, seed=8)(chunk)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["labels"], c["labels"])
    torch.manual_seed(0)
    d = MaskingCollator(zh)(chunk)
    torch.manual_seed(0)
    assert torch.equal(d["input_ids"], MaskingCollator(zh)(chunk)["input_ids"])  # seed=None follows torch's RNG


# ----------------------------------------------------------------------------------------------- per-example masks
def unpadded(features, batch):
    """Each example's (input_ids, labels) cut back to its own length: what its mask did to it."""
    return [(batch["input_ids"][b, :len(f["input_ids"])].tolist(), batch["labels"][b, :len(f["input_ids"])].tolist())
            for b, f in enumerate(features)]


def masks_by_id(collator, features, batch_size, order):
    """{example_id: (input_ids, labels)} when `features` are collated in `order`, `batch_size` at a time."""
    shuffled = [features[i] for i in order]
    out = {}
    for chunk, batch in collate_all(collator, shuffled, batch_size):
        out.update({f[EXAMPLE_ID]: masked for f, masked in zip(chunk, unpadded(chunk, batch))})
    return out


@pytest.mark.parametrize("whole_word", ["none", "wordpiece"])
def test_example_ids_make_masks_independent_of_batching_and_padding(en, en_features, whole_word):
    """What one process x batch 8, two processes x batch 4, or a resumed run hand the collator: the same examples
    in other batches, other orders, other padded widths. With example ids each example's mask is the same."""
    features = with_ids(en_features[:48])
    if whole_word == "none":
        features = [{k: v for k, v in f.items() if k != "word_ids"} for f in features]
    order = list(range(48))
    one = masks_by_id(MaskingCollator(en, whole_word=whole_word, seed=3), features, 8, order)
    random.Random(0).shuffle(order)
    other = MaskingCollator(en, whole_word=whole_word, seed=3, pad_to_multiple_of=64)
    other(features[:5])  # an earlier batch must not shift later masks (no shared stream)
    two = masks_by_id(other, features, 4, order)
    assert one == two
    assert sum(labels != [-100] * len(labels) for _, labels in one.values()) == 48  # every example masked
    # Control: without ids the collator's stream depends on what came before, and the same check fails.
    bare = [{k: v for k, v in f.items() if k != EXAMPLE_ID} for f in features]
    a = MaskingCollator(en, whole_word=whole_word, seed=3)(bare[:8])
    b = MaskingCollator(en, whole_word=whole_word, seed=3)(bare[4:12])
    assert unpadded(bare[4:8], {k: v[4:] for k, v in a.items()}) != unpadded(bare[4:8], b)


def test_epoch_seed_and_id_change_the_masks(zh):
    features = with_ids(random_features(64))
    collator = MaskingCollator(zh, seed=11)
    first = collator(features)
    assert EXAMPLE_ID not in first and set(first) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    assert torch.equal(MaskingCollator(zh, seed=11)(features)["labels"], first["labels"])  # a pure function
    collator.epoch = 1
    second = collator(features)
    assert not torch.equal(second["labels"], first["labels"])  # dynamic masking: fresh masks each epoch
    collator.epoch = 0
    assert torch.equal(collator(features)["input_ids"], first["input_ids"])
    assert not torch.equal(MaskingCollator(zh, seed=12)(features)["labels"], first["labels"])
    same_text = [{"input_ids": features[0]["input_ids"], EXAMPLE_ID: i} for i in range(16)]
    labels = MaskingCollator(zh, seed=11)(same_text)["labels"]
    assert len({tuple(row.tolist()) for row in labels}) > 12  # one text, distinct ids: (almost all) distinct masks
    assert len({example_seed(0, e, i) for e in range(3) for i in range(1000)}) > 2990
    assert example_seed(5, 1, torch.tensor(7)) == example_seed(5, 1, 7)


def test_example_ids_need_every_feature_and_a_seed(zh):
    features = with_ids(random_features(4))
    features[2] = {"input_ids": features[2]["input_ids"]}
    with pytest.raises(BertkitError, match="example_id"):
        MaskingCollator(zh, seed=0)(features)
    # Without a seed the ids are ignored: torch's global RNG draws, as before.
    torch.manual_seed(0)
    a = MaskingCollator(zh)(with_ids(random_features(8)))
    torch.manual_seed(0)
    assert torch.equal(a["labels"], MaskingCollator(zh)(random_features(8))["labels"])


def test_bad_settings_are_bertkit_errors(zh):
    with pytest.raises(BertkitError, match="mask_replace_prob"):
        MaskingCollator(zh, mask_replace_prob=0.9, random_replace_prob=0.2)
    with pytest.raises(BertkitError, match="whole_word"):
        MaskingCollator(zh, whole_word="jieba")
    with pytest.raises(BertkitError, match="word_ids"):
        MaskingCollator(zh, whole_word="chinese")([{"input_ids": [101, 2769, 102]}])
    with pytest.raises(BertkitError, match="word_ids has 2"):
        MaskingCollator(zh, whole_word="chinese")([{"input_ids": [101, 2769, 102], "word_ids": [None, 0]}])


# ----------------------------------------------------------------------------------------------- whole words
def english_features(en, n=N_SEQUENCES, seed=0):
    """Sentences mixing single words and glued pairs of words, which WordPiece splits into several pieces."""
    rng = random.Random(seed)
    words = [t for t in en.get_vocab() if t.isascii() and t.isalpha() and len(t) >= 3]
    words.sort()
    texts = [" ".join(rng.choice(words) + (rng.choice(words) if rng.random() < 0.4 else "")
                      for _ in range(rng.randint(8, 40))) for _ in range(n)]
    out = add_word_ids(texts, en, "wordpiece", truncation=True, max_length=128)
    return [{"input_ids": i, "word_ids": w} for i, w in zip(out["input_ids"], out["word_ids"])]


def word_treatments(chunk, batch, mask_id, pad_id):
    """Per word of each sequence: None if not selected, else 'mask' / 'random' / 'kept'. Raises on a word that is
    partly selected or mixes [MASK] with other treatments."""
    orig = padded_originals(chunk, batch["input_ids"].shape[1], pad_id)
    sel, m, r, k = token_classes(orig, batch["input_ids"], batch["labels"], mask_id)
    out = []
    for b, f in enumerate(chunk):
        positions = {}
        for pos, w in enumerate(f["word_ids"]):
            if w is not None:
                positions.setdefault(w, []).append(pos)
        for pos in positions.values():
            flags = {(bool(sel[b, p]), bool(m[b, p]), bool(r[b, p])) for p in pos}
            assert len({s for s, _, _ in flags}) == 1, f"word partly selected: {flags}"
            assert len({mm for _, mm, _ in flags}) == 1, f"word mixes [MASK] and other treatments: {flags}"
            out.append((len(pos), None if not flags.pop()[0] else
                        "mask" if m[b, pos[0]] else "random" if r[b, pos].any() else "kept"))
    return out


@pytest.fixture(scope="module")
def en_features(en):
    return english_features(en)


@pytest.mark.parametrize("per_example", [False, True], ids=["stream", "per-example"])
def test_wordpiece_whole_word_masking(en, en_features, per_example):
    assert sum(len(set(f["word_ids"])) < len(f["word_ids"]) - 2 for f in en_features) > 0.9 * N_SEQUENCES
    features = with_ids(en_features) if per_example else en_features
    words, real, selected_tokens = [], 0, 0
    for chunk, batch in collate_all(MaskingCollator(en, whole_word="wordpiece", seed=0), features):
        words += word_treatments(chunk, batch, en.mask_token_id, en.pad_token_id)
        real += sum(len(f["input_ids"]) - 2 for f in chunk)
        selected_tokens += int((batch["labels"] != -100).sum())
    chosen = [t for n, t in words if t is not None]
    assert any(n > 1 and t is not None for n, t in words)  # multi-piece words do get masked
    assert selected_tokens / real == pytest.approx(0.15, abs=0.01)
    assert chosen.count("mask") / len(chosen) == pytest.approx(0.80, abs=0.02)
    assert chosen.count("random") / len(chosen) == pytest.approx(0.10, abs=0.02)
    assert chosen.count("kept") / len(chosen) == pytest.approx(0.10, abs=0.02)


def test_wordpiece_mode_derives_word_ids_when_absent(en, en_features):
    chunk = en_features[:200]
    bare = [{"input_ids": f["input_ids"]} for f in chunk]
    a = MaskingCollator(en, whole_word="wordpiece", seed=5)(chunk)
    b = MaskingCollator(en, whole_word="wordpiece", seed=5)(bare)
    assert torch.equal(a["labels"], b["labels"]) and torch.equal(a["input_ids"], b["input_ids"])


def test_word_check_catches_token_level_masking(en, en_features):
    # The whole-word assertions above can fail: token-level masking splits words.
    with pytest.raises(AssertionError, match="partly selected"):
        for chunk, batch in collate_all(MaskingCollator(en, seed=0), en_features[:500]):
            word_treatments(chunk, batch, en.mask_token_id, en.pad_token_id)


def chinese_copies(zh, n=400):
    text = "我在北京大学读书，他在清华大学工作。"
    out = add_word_ids([text] * n, zh, "chinese")
    features = [{"input_ids": i, "word_ids": w} for i, w in zip(out["input_ids"], out["word_ids"])]
    tokens = zh.convert_ids_to_tokens(features[0]["input_ids"])
    start = tokens.index("北")
    return features, list(range(start, start + 4))


@pytest.mark.parametrize("per_example", [False, True], ids=["stream", "per-example"])
def test_chinese_whole_word_masking_keeps_beijing_university_together(zh, per_example):
    features, pku = chinese_copies(zh)
    features = with_ids(features) if per_example else features  # identical texts, distinct ids: distinct masks
    assert len({features[0]["word_ids"][p] for p in pku}) == 1
    batch = MaskingCollator(zh, whole_word="chinese", mlm_probability=0.3, seed=0)(features)
    selected = (batch["labels"][:, pku] != -100)  # (N, 4)
    assert (selected.all(1) | ~selected.any(1)).all()  # all four characters or none
    assert selected.all(1).sum() > 20
    masked = batch["input_ids"][:, pku] == zh.mask_token_id
    assert (masked.all(1) | ~masked.any(1)).all()
    word_treatments(features, batch, zh.mask_token_id, zh.pad_token_id)


def test_chinese_check_can_fail_with_token_masking(zh):
    features, pku = chinese_copies(zh)
    selected = MaskingCollator(zh, mlm_probability=0.3, seed=0)(features)["labels"][:, pku] != -100
    assert not (selected.all(1) | ~selected.any(1)).all()


# ----------------------------------------------------------------------------------------------- NSP
def nsp_documents(n_docs=300, seed=0):
    """Documents of distinct sentences; sentence text encodes (document, index) so pairs can be traced back."""
    rng = random.Random(seed)
    digits = "零一二三四五六七八九"
    name = lambda k: "".join(digits[int(c)] for c in str(k))  # noqa: E731
    return [[f"文档{name(d)}第{name(i)}句" for i in range(rng.randint(1, 8))] for d in range(n_docs)]


def test_nsp_examples_structure_and_balance(zh):
    docs = nsp_documents()
    owner = {tuple(zh(s, add_special_tokens=False)["input_ids"]): (d, i) for d, doc in enumerate(docs)
             for i, s in enumerate(doc)}
    examples = make_nsp_examples(docs, zh, max_length=64, seed=0)
    assert len(examples) == sum(len(doc) - 1 for doc in docs)
    for ex in examples:
        ids, tt = ex["input_ids"], ex["token_type_ids"]
        first_sep = ids.index(zh.sep_token_id)
        assert ids[0] == zh.cls_token_id and ids[-1] == zh.sep_token_id and ids.count(zh.sep_token_id) == 2
        assert tt == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        (da, ia), (db, ib) = owner[tuple(ids[1:first_sep])], owner[tuple(ids[first_sep + 1 : -1])]
        if ex["next_sentence_label"] == 0:
            assert (db, ib) == (da, ia + 1)
        else:
            assert db != da
    labels = [ex["next_sentence_label"] for ex in examples]
    assert sum(labels) / len(labels) == pytest.approx(0.5, abs=0.05)
    assert make_nsp_examples(docs, zh, max_length=64, seed=0) == examples


def first_is_next(docs, tokenizer, max_length):
    """The first IsNext pair over a few seeds (the 50 % coin decides which seed gives one)."""
    examples = (e for seed in range(20) for e in make_nsp_examples(docs, tokenizer, max_length, seed=seed))
    return next(e for e in examples if e["next_sentence_label"] == 0)


def test_nsp_truncates_the_longer_side_first(zh):
    long_a, short_b = "长" * 50, "短句子"
    docs = [[long_a, short_b], ["别的文档"]]
    ex = first_is_next(docs, zh, 20)
    assert len(ex["input_ids"]) == 20
    assert ex["input_ids"][-4:] == zh(short_b, add_special_tokens=False)["input_ids"] + [zh.sep_token_id]
    docs = [["甲" * 30, "乙" * 30], ["丙"]]
    both = first_is_next(docs, zh, 21)
    assert both["token_type_ids"].count(0) - 2 == both["token_type_ids"].count(1) - 1 == 9


def test_nsp_word_ids_feed_the_whole_word_collator(zh):
    docs = [["我在北京大学读书", "他在清华大学工作"], ["今天天气很好", "我们去散步"]]
    examples = make_nsp_examples(docs, zh, max_length=32, seed=0, whole_word="chinese")
    assert examples[0]["word_ids"][:7] == [None, 0, 1, 2, 2, 2, 2]
    assert all(len(e["word_ids"]) == len(e["input_ids"]) for e in examples)
    batch = MaskingCollator(zh, whole_word="chinese", seed=0)(examples)
    assert batch["next_sentence_label"].tolist() == [e["next_sentence_label"] for e in examples]


def test_nsp_needs_two_documents(zh):
    with pytest.raises(BertkitError, match="two non-empty documents"):
        make_nsp_examples([["一句", "两句"], ["  "]], zh, 32)


def test_the_word_piece_marker_is_read_once_per_batch_not_per_row(en, monkeypatch):
    """piece_marker parses the whole tokenizer.json (about 17 ms for MiniLM's): read per row it made English
    whole-word masking 70x slower than the tokenizing itself (2,000 rows: 40 s, 0.6 s read once)."""
    from bertkit.tasks.mlm import corpus, whole_word_masking

    calls = []
    counted = lambda tokenizer: calls.append(1) or whole_word_masking.WORDPIECE  # noqa: E731
    monkeypatch.setattr(whole_word_masking, "piece_marker", counted)
    monkeypatch.setattr(corpus, "piece_marker", counted)
    texts = [f"unbelievable sentence number {i} about tokenization" for i in range(50)]
    out = add_word_ids(texts, en, "wordpiece", truncation=True, max_length=32)
    assert len(out["word_ids"]) == 50 and len(calls) == 1
    calls.clear()
    make_nsp_examples([texts[:25], texts[25:]], en, max_length=64, whole_word="wordpiece", seed=0)
    assert len(calls) == 1
