"""The mlm recipe and bertkit.tasks.mlm: held-out perplexity with fixed masks, resuming to the same weights,
vocabulary extension, a fresh tied MLM head for MiniLM, from-scratch tokenizer + model, and chaining the output
into classify.

Masking statistics live in test_masking.py; exact gradient accumulation of the MLM heads in test_training.py.
"""

import collections
import csv
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file
from typer.testing import CliRunner

import bertkit
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.errors import BertkitError
from bertkit.tasks.mlm import decoder_is_tied, load_mlm_model, masked_perplexity
from bertkit.tasks.mlm.corpus import (documents_from_lines, group_examples, line_examples, read_examples,
                                      split_documents)
from bertkit.tasks.mlm.vocabulary import NewToken, count_words, extend_vocabulary, find_new_tokens, train_wordpiece
from bertkit.tasks.mlm.whole_word_masking import (MaskingCollator, MaskingEpochCallback, mask_once,
                                                  resolve_whole_word, with_example_ids)
from bertkit.tokenization import chinese_bert_tokenizer, read_vocab

ROOT = Path(__file__).resolve().parent.parent
EN_CORPUS = str(ROOT / "data" / "corpus" / "en_medical.txt")
ZH_CORPUS = str(ROOT / "data" / "corpus" / "zh_legal.txt")
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def en(minilm_dir):
    return transformers.AutoTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    """The first 30 documents of the English sample corpus (runs that only need some text)."""
    lines = Path(EN_CORPUS).read_text(encoding="utf-8").split("\n")
    docs = documents_from_lines(lines)[:30]
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n", encoding="utf-8")
    return str(path)


def run_mlm(overrides: list[str]) -> dict:
    module = load_recipe("mlm")
    return module.main(load_config(module.Config, None, overrides))


def tiny_overrides(model, corpus, out, *extra):
    return [f"model={model}", f"data.train={corpus}", f"output_dir={out}", "precision=fp32", "data.max_length=64",
            "train.per_device_train_batch_size=16", "train.logging_steps=5", "train.learning_rate=1.0e-3", *extra]


def tiny_mlm(vocab_size=30522, **kwargs):
    torch.manual_seed(0)
    config = bertkit.BertkitConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37, max_position_embeddings=64, **kwargs)
    return bertkit.BertkitForMaskedLM(config).eval()


# ----------------------------------------------------------------------------------------------- perplexity


def test_short_run_lowers_held_out_perplexity_and_masks_are_fixed(tiny_model_dir, tmp_path):
    trained = run_mlm(tiny_overrides(tiny_model_dir, EN_CORPUS, tmp_path / "trained", "train.max_steps=20",
                                     "train.learning_rate=5.0e-3"))
    before, after = trained["eval"]["perplexity_before"], trained["eval"]["perplexity"]
    assert after < 0.5 * before, (before, after)
    assert trained["after"]["masked_tokens"] > 100
    saved = json.loads((tmp_path / "trained" / "metrics.json").read_text())
    assert saved["eval"]["perplexity"] == pytest.approx(after) and saved["before"]["perplexity"] == before
    # Control: nothing learns at learning rate 1e-30 (below float32 resolution; 0 is refused as a config error), so
    # after == before — the same masked positions, the same replacements — and the "before" of a second run equals
    # the first run's (the eval seed fixes the masks).
    frozen = run_mlm(tiny_overrides(tiny_model_dir, EN_CORPUS, tmp_path / "frozen", "train.max_steps=2",
                                    "train.learning_rate=1.0e-30"))
    assert frozen["eval"]["perplexity_before"] == before
    assert frozen["eval"]["perplexity"] == pytest.approx(before, rel=1e-6)


def test_interrupted_run_resumes_to_the_same_weights(tiny_model_dir, small_corpus, tmp_path, monkeypatch):
    """Training masks are a function of (seed, epoch, example row): a run interrupted in its second epoch and
    resumed masks every later batch as the uninterrupted run does (it used to differ by ~1e-4: the Trainer fetches
    the first resumed batch before it restores the RNG state the masks were drawn from)."""
    # 170 examples of 64 tokens at batch 16: 11 steps per epoch; the crash at step 15 is inside epoch 2.
    extra = ["train.num_train_epochs=2", "train.save_strategy=steps", "train.save_steps=5", "train.eval_strategy=no",
             "train.load_best_model_at_end=false", "train.warmup_steps=0"]
    straight = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "straight", *extra))

    interrupted = tmp_path / "interrupted"
    original_save = transformers.Trainer._save_checkpoint

    def save_then_crash(self, *args, **kwargs):
        original_save(self, *args, **kwargs)
        if self.state.global_step == 15:
            assert 1.0 < self.state.epoch < 2.0
            raise KeyboardInterrupt("simulated interruption")

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        run_mlm(tiny_overrides(tiny_model_dir, small_corpus, interrupted, *extra))
    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", original_save)
    assert (interrupted / "checkpoint-15").is_dir() and not (interrupted / "model.safetensors").exists()
    resumed = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, interrupted, *extra, "resume=true"))

    expected = load_file(tmp_path / "straight" / "model.safetensors")
    actual = load_file(interrupted / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.allclose(expected[name], actual[name], atol=1e-6), name
    assert resumed["eval"]["perplexity"] == pytest.approx(straight["eval"]["perplexity"], rel=1e-6)
    assert resumed["eval"]["perplexity_before"] == straight["eval"]["perplexity_before"]  # fixed held-out masks


def test_epoch_callback_sets_the_collator_epoch(en, tmp_path):
    collator = MaskingCollator(en, seed=0)
    callback = MaskingEpochCallback(collator)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to="none")
    for epoch, expected in ((0.0, 0), (1.0, 1), (1.0 - 1e-12, 1), (1.4545, 1), (2.0, 2)):  # 1.4545: a resume
        callback.on_epoch_begin(args, transformers.TrainerState(epoch=epoch), transformers.TrainerControl())
        assert collator.epoch == expected, epoch
    callback.on_train_begin(args, transformers.TrainerState(), transformers.TrainerControl())
    persistent = transformers.TrainingArguments(output_dir=str(tmp_path), report_to="none", dataloader_num_workers=1,
                                                dataloader_persistent_workers=True)
    with pytest.raises(BertkitError, match="persistent_workers"):  # workers would keep the first epoch's collator
        callback.on_train_begin(persistent, transformers.TrainerState(), transformers.TrainerControl())
    assert with_example_ids([{"input_ids": [1]}, {"input_ids": [2]}]) == [{"input_ids": [1], "example_id": 0},
                                                                       {"input_ids": [2], "example_id": 1}]


def test_masked_perplexity_weights_tokens_not_batches():
    model = tiny_mlm(vocab_size=50)
    masked = [{"input_ids": [2, 5, 4, 9, 3], "labels": [-100, 7, 8, 9, -100]},  # 3 targets
              {"input_ids": [2, 4, 3], "labels": [-100, 11, -100]}]  # 1 target, shorter (padded in a batch)
    nll = []
    with torch.no_grad():
        for f in masked:
            logits = model(input_ids=torch.tensor([f["input_ids"]])).logits[0]  # (T, V)
            logp = logits.log_softmax(-1)
            nll += [-logp[t, y].item() for t, y in enumerate(f["labels"]) if y != -100]
    expected = math.exp(sum(nll) / len(nll))  # 4 tokens, not (mean of 3 + mean of 1) / 2
    for batch_size in (1, 2):
        result = masked_perplexity(model, masked, pad_token_id=0, batch_size=batch_size)
        assert result["masked_tokens"] == 4
        assert result["perplexity"] == pytest.approx(expected, rel=1e-5)
    batch_mean = math.exp((sum(nll[:3]) / 3 + nll[3]) / 2)
    assert abs(batch_mean - expected) > 1e-3 * expected  # the two averages differ here, so the check can fail


def test_mask_once_is_reproducible_by_seed(en):
    features = [{"input_ids": en(f"the patient number {i} was given warfarin and aspirin today")["input_ids"]}
                for i in range(20)]
    first = mask_once(features, MaskingCollator(en, seed=7), batch_size=8)
    again = mask_once(features, MaskingCollator(en, seed=7), batch_size=8)
    other = mask_once(features, MaskingCollator(en, seed=8), batch_size=8)
    assert first == again and first != other
    assert [len(f["input_ids"]) for f in first] == [len(f["input_ids"]) for f in features]  # unpadded again
    assert all(any(label != -100 for label in f["labels"]) for f in first)


# ------------------------------------------------------------------------------------------ corpus / examples


def test_documents_split_and_whole_word_auto(tmp_path):
    assert documents_from_lines(["a", "b", "", "  ", "c", ""]) == [["a", "b"], ["c"]]
    docs = read_examples(EN_CORPUS)
    assert len(docs) > 90 and all(docs)
    train, held = split_documents(docs, 0.05, seed=0)
    assert len(held) == 5 and len(train) + len(held) == len(docs)
    assert split_documents(docs, 0.05, seed=0) == (train, held)
    assert not {tuple(d) for d in held} & {tuple(d) for d in train}
    table = tmp_path / "corpus.jsonl"
    table.write_text('{"id": 1, "content": "First line.\\nSecond line."}\n{"id": 2, "content": "Other."}\n')
    assert read_examples(str(table)) == [["First line.", "Second line."], ["Other."]]
    zh_texts = [p for d in read_examples(ZH_CORPUS) for p in d]
    assert resolve_whole_word("auto", zh_texts) == "chinese"
    assert resolve_whole_word("auto", [p for d in docs for p in d]) == "wordpiece"
    assert resolve_whole_word("none", zh_texts) == "none"


def test_group_and_line_examples_keep_every_token(en):
    texts = ["The half-life of digoxin is long.", "Warfarin needs INR monitoring " * 12, "Short one."]
    group = group_examples(texts, en, max_length=16, whole_word="wordpiece")
    assert all(len(block) <= 16 and block[0] == en.cls_token_id and block[-1] == en.sep_token_id
               for block in group["input_ids"])
    expected = [i for t in texts for i in en(t, add_special_tokens=False)["input_ids"]]
    assert [i for block in group["input_ids"] for i in block[1:-1]] == expected
    lines = line_examples(texts, en, max_length=16, whole_word="none")
    assert len(lines["input_ids"]) > len(texts)  # the long text continues in further windows
    assert [i for row in lines["input_ids"] for i in row[1:-1]] == expected


def test_group_examples_carry_distinct_chinese_word_ids():
    zh = chinese_bert_tokenizer()
    out = group_examples(["北京大学很好。", "北京大学"], zh, max_length=64, whole_word="chinese")
    (ids,), (words,) = out["input_ids"], out["word_ids"]
    tokens = zh.convert_ids_to_tokens(ids)
    assert tokens[1:5] == list("北京大学") and len(set(words[1:5])) == 1  # one rjieba word, one unit
    assert words[8:12] == [words[8]] * 4 and words[8] != words[1]  # same word in the next text: a new unit
    assert words[0] is None and words[-1] is None


# ------------------------------------------------------------------------------------------ vocabulary extension


def test_find_new_tokens_filters_and_ranks(en):
    counts = collections.Counter({"troponin": 30, "pharmacokinetics": 12, "apixaban": 5, "the": 100,
                                  "statins": 50, "2018": 40, "☃": 20, "warfarin": 12})
    new = find_new_tokens(counts, en, max_new_tokens=10, min_frequency=10, min_pieces=3)
    # troponin 4 pieces x30 = 90 saved; pharmacokinetics 6 x12 = 60; warfarin 3 x12 = 24; ☃ [UNK] x20 = 20.
    # apixaban is too rare, "the" is one token, statins has 2 pieces, 2018 has no letter.
    assert [t.word for t in new] == ["troponin", "pharmacokinetics", "warfarin", "☃"]
    assert new[0] == NewToken("troponin", 30, ("tr", "##op", "##oni", "##n"),
                              tuple(en.convert_tokens_to_ids(["tr", "##op", "##oni", "##n"])))
    assert new[3].pieces == ("[UNK]",)
    assert [t.word for t in find_new_tokens(counts, en, 2, 10)] == ["troponin", "pharmacokinetics"]
    words = count_words(["Troponin rose; TROPONIN fell.", "troponin-I"], en)
    assert words["troponin"] == 3 and words[";"] == 1 and words["i"] == 1


def test_vocabulary_extension_keeps_old_ids_and_outputs(tiny_model_dir, tmp_path):
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    model = tiny_mlm()
    with torch.no_grad():
        model.cls.predictions.bias.normal_()  # a non-zero bias, so its new rows really are means
    old_size = len(tokenizer)
    old_text = "Troponins rose in the pretroponin assay; war-far-in was stopped and myopathy resolved."
    new_text = "Troponin and warfarin: check troponin again. ☃"
    old_ids = tokenizer(old_text)["input_ids"]
    old_embeddings = model.get_input_embeddings().weight.detach().clone()
    old_bias = model.cls.predictions.bias.detach().clone()
    batch = tokenizer(old_text, return_tensors="pt")
    with torch.no_grad():
        old_out = model(**batch, output_hidden_states=True)

    new_tokens = find_new_tokens(count_words([new_text] * 3, tokenizer), tokenizer, 10, 3)
    assert [t.word for t in new_tokens] == ["troponin", "warfarin", "☃"]
    ids = extend_vocabulary(model, tokenizer, new_tokens)
    assert ids == [old_size, old_size + 1, old_size + 2] and len(tokenizer) == old_size + 3

    # Text without new words (even with a new word inside a longer word): the same ids, the same outputs.
    assert tokenizer(old_text)["input_ids"] == old_ids
    with torch.no_grad():
        new_out = model(**batch, output_hidden_states=True)
    for before, after in zip(old_out.hidden_states, new_out.hidden_states):
        assert torch.equal(before, after)
    assert new_out.logits.shape[-1] == old_size + 3
    assert torch.allclose(new_out.logits[..., :old_size], old_out.logits, atol=1e-6)
    # New words: one token each, whatever the case; rows = mean of the old pieces' rows; old rows untouched.
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(new_text)["input_ids"])
    assert tokens == ["[CLS]", "troponin", "and", "warfarin", ":", "check", "troponin", "again", ".", "☃", "[SEP]"]
    embeddings = model.get_input_embeddings().weight
    assert torch.equal(embeddings[:old_size], old_embeddings)
    for new_id, token in zip(ids, new_tokens):
        pieces = list(token.piece_ids)
        assert torch.allclose(embeddings[new_id], old_embeddings[pieces].mean(0), atol=1e-7)
        assert model.cls.predictions.bias[new_id].item() == pytest.approx(old_bias[pieces].mean().item(), abs=1e-7)
    assert decoder_is_tied(model) and model.cls.predictions.decoder.bias is model.cls.predictions.bias
    # Saved and reloaded, the tokenizer keeps the new ids and the single-word rule.
    tokenizer.save_pretrained(tmp_path)
    reloaded = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded(old_text)["input_ids"] == old_ids
    assert reloaded(new_text)["input_ids"] == tokenizer(new_text)["input_ids"]


def test_plain_add_tokens_would_change_old_ids(en):
    """Why extend_vocabulary adds single-word tokens: a plain added token matches inside longer words."""
    plain = transformers.AutoTokenizer.from_pretrained(en.name_or_path)
    text = "Troponins rose in the pretroponin assay."
    before = plain(text)["input_ids"]
    plain.add_tokens(["troponin"])
    assert plain(text)["input_ids"] != before


def test_chinese_unknown_characters_become_tokens():
    zh = chinese_bert_tokenizer()
    text = "他住在锘城，锘城很远。"
    assert zh.tokenize("锘") == ["[UNK]"]
    old_ids = zh(text)["input_ids"]
    model = tiny_mlm(vocab_size=len(zh))
    new = find_new_tokens(count_words([text], zh), zh, 10, 2)
    assert [(t.word, t.pieces) for t in new] == [("锘", ("[UNK]",))]  # 城 is known; multi-char words are not added
    (new_id,) = extend_vocabulary(model, zh, new)
    ids = zh(text)["input_ids"]
    assert ids == [new_id if i == zh.unk_token_id else i for i in old_ids]  # between CJK characters, too
    assert torch.equal(model.get_input_embeddings().weight[new_id],
                       model.get_input_embeddings().weight[zh.unk_token_id])


# ---------------------------------------------------------------------------------------------- MiniLM head


def test_minilm_gets_a_fresh_tied_mlm_head_and_the_run_says_so(minilm_dir, small_corpus, tmp_path, capsys):
    model, report = load_mlm_model(minilm_dir)
    assert report["mlm_head"] == "new" and "cls.predictions.transform.dense.weight" in report["new_mlm_keys"]
    assert decoder_is_tied(model) and torch.count_nonzero(model.cls.predictions.bias) == 0
    encoder = transformers.AutoModel.from_pretrained(minilm_dir)
    assert torch.equal(model.bert.pooler.dense.weight, encoder.pooler.dense.weight) and report["pooler"] == "kept"
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)

    out = tmp_path / "minilm"
    results = run_mlm(tiny_overrides("all-MiniLM-L6-v2", small_corpus, out, "train.max_steps=2",
                                     "data.max_length=32", "train.per_device_train_batch_size=8",
                                     "data.eval_fraction=0.1"))
    assert results["mlm_head"] == "new"
    assert "has no MLM head" in " ".join(capsys.readouterr().err.split())
    weights = load_file(out / "model.safetensors")
    assert "cls.predictions.transform.dense.weight" in weights and "bert.pooler.dense.weight" in weights
    stock = transformers.BertForMaskedLM.from_pretrained(out)
    assert stock.cls.predictions.decoder.weight.data_ptr() == stock.bert.embeddings.word_embeddings.weight.data_ptr()


# ---------------------------------------------------------------------------------------------- from scratch


def test_train_wordpiece_special_ids_and_reload(tmp_path):
    texts = [p for d in read_examples(EN_CORPUS)[:40] for p in d]
    tokenizer = train_wordpiece(texts, vocab_size=800)
    vocab = tokenizer.get_vocab()
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    assert 600 < len(tokenizer) <= 800 and any(t.startswith("##") for t in vocab)
    ids = tokenizer("Warfarin and apixaban are anticoagulants.")["input_ids"]
    assert ids[0] == 2 and ids[-1] == 3 and 1 not in ids


def test_scratch_model_with_nsp_trains_and_saves_a_bert_tokenizer(small_corpus, tmp_path):
    out = tmp_path / "scratch"
    results = run_mlm(tiny_overrides("scratch:tiny", small_corpus, out, "vocab.size=600", "train.max_steps=10",
                                     "nsp=true", "data.eval_fraction=0.15"))
    assert results["eval"]["perplexity"] < results["eval"]["perplexity_before"]
    assert 0.0 <= results["eval"]["nsp_accuracy"] <= 1.0
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["num_hidden_layers"] == 2
    assert config["hidden_size"] == 128
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert config["vocab_size"] == len(tokenizer) == results["vocab_size"]
    assert json.loads((out / "tokenizer_config.json").read_text())["tokenizer_class"] in ("BertTokenizer",
                                                                                          "BertTokenizerFast")
    vocab = read_vocab(out / "vocab.txt")  # vocab.txt written too, line number = id
    assert vocab == tokenizer.get_vocab()
    text = "The pharmacokinetics of warfarin."
    assert transformers.BertTokenizerFast(vocab=vocab)(text)["input_ids"] == tokenizer(text)["input_ids"]
    stock = transformers.BertForPreTraining.from_pretrained(out)
    assert stock.config.vocab_size == len(tokenizer)


def test_scratch_refuses_vocab_extension(small_corpus, tmp_path):
    with pytest.raises(BertkitError, match="vocab.extend"):
        run_mlm(tiny_overrides("scratch:tiny", small_corpus, tmp_path / "x", "vocab.extend=true"))
    with pytest.raises(BertkitError, match="scratch:tiny"):
        run_mlm(tiny_overrides("scratch:huge", small_corpus, tmp_path / "x"))


# ---------------------------------------------------------------------------------------------- chaining


def test_mlm_output_chains_into_classify_through_the_cli(tiny_model_dir, small_corpus, tmp_path):
    mlm_out, classify_out = tmp_path / "mlm", tmp_path / "classify"
    result = runner.invoke(app, ["run", "mlm", *tiny_overrides(tiny_model_dir, small_corpus, mlm_out,
                                                               "train.max_steps=3", "vocab.extend=true",
                                                               "vocab.max_new_tokens=20", "vocab.min_frequency=5")])
    assert result.exit_code == 0, result.output
    mlm = load_file(mlm_out / "model.safetensors")
    original = load_file(Path(tiny_model_dir) / "model.safetensors")
    query = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(mlm[f"bert.{query}"], original[query])  # continued pretraining changed the encoder
    assert torch.equal(mlm["bert.pooler.dense.weight"], original["pooler.dense.weight"])  # pooler carried as is
    new_words = json.loads((mlm_out / "metrics.json").read_text())["new_tokens"]
    assert len(new_words) == 20

    rows = [[f"the patient {i} felt {'better' if i % 2 else 'worse'} after warfarin", "good" if i % 2 else "bad"]
            for i in range(16)]
    data = tmp_path / "train.csv"
    with data.open("w", newline="") as handle:
        csv.writer(handle).writerows([["text", "label"], *rows])
    result = runner.invoke(app, ["run", "classify", f"model={mlm_out}", f"data.train={data}", f"data.eval={data}",
                                 f"output_dir={classify_out}", "precision=fp32", "data.max_length=32",
                                 "train.num_train_epochs=1", "train.learning_rate=1.0e-30"])  # frozen: 0 is refused
    assert result.exit_code == 0, result.output
    classify = load_file(classify_out / "model.safetensors")
    assert not any(name.startswith("cls.") for name in classify)  # MLM head dropped
    for name in (query, "embeddings.word_embeddings.weight", "pooler.dense.weight"):
        assert torch.equal(classify[f"bert.{name}"], mlm[f"bert.{name}"]), name  # encoder loaded exactly
    assert classify["bert.embeddings.word_embeddings.weight"].shape[0] == 30522 + 20
    tokenizer = transformers.AutoTokenizer.from_pretrained(classify_out)
    assert len(tokenizer) == 30522 + 20 and tokenizer.tokenize(new_words[0]) == [new_words[0]]


# ------------------------------------------------------------------------------- corpus through datasets (cached)


def test_second_run_loads_the_tokens_from_the_cache(tiny_model_dir, small_corpus, tmp_path, monkeypatch):
    """The corpus goes through datasets.map into Arrow files under data.cache_dir; a second run on the same corpus
    and settings loads them and never calls the tokenizer."""
    cache = tmp_path / "cache"
    extra = [f"data.cache_dir={cache}", "data.num_proc=1", "train.max_steps=2", "head_warmup_steps=0"]
    first = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "first", *extra))
    assert first["tokens_cached"] is False and list(cache.rglob("*.arrow"))
    calls = []
    original = transformers.PreTrainedTokenizerBase.__call__

    def counting(self, *args, **kwargs):
        calls.append(args[:1])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(transformers.PreTrainedTokenizerBase, "__call__", counting)
    second = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "second", *extra))
    assert second["tokens_cached"] is True and calls == []
    assert second["eval"]["perplexity_before"] == first["eval"]["perplexity_before"]
    assert second["eval"]["perplexity"] == pytest.approx(first["eval"]["perplexity"], rel=1e-6)
    # another tokenizer setting (line mode needs the same tokens, NSP does not): a miss, and the tokenizer runs
    third = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "third", *extra, "nsp=true"))
    assert third["tokens_cached"] is False and calls


def test_token_views_match_single_process_grouping_for_any_num_proc(en, tmp_path):
    """Tokenizing is row-wise and blocks are read from the token table, so 1 or 2 workers give exactly the blocks
    and windows that group_examples / line_examples make from the whole training text in one process."""
    from bertkit.tasks.mlm import corpus
    from bertkit.tasks.mlm.corpus import GroupBlocks, LineWindows

    lines = corpus.read_lines(EN_CORPUS, cache_dir=str(tmp_path))
    split = corpus.split_rows(corpus.blank_flags(lines), 0.05, seed=3)
    train_docs, held_docs = split_documents(read_examples(EN_CORPUS), 0.05, seed=3)
    texts = [p for doc in train_docs for p in doc]
    assert list(corpus.iter_texts(lines, split.train)) == texts
    assert list(corpus.iter_texts(lines, split.held)) == [p for doc in held_docs for p in doc]
    expected_blocks = group_examples(texts, en, 128, "wordpiece")["input_ids"]
    expected_lines = line_examples(texts, en, 64, "none")["input_ids"]
    for workers in (1, 2):
        tokens, _ = corpus.tokenize_rows(lines, en, "wordpiece", num_proc=workers)
        blocks = GroupBlocks(tokens, split.train, 128, en.cls_token_id, en.sep_token_id)
        assert [b["input_ids"] for b in blocks] == expected_blocks, workers
        assert [b["example_id"] for b in blocks] == list(range(len(expected_blocks)))
        windows = LineWindows(tokens, split.train, 64, en.cls_token_id, en.sep_token_id)
        assert [w["input_ids"] for w in windows] == expected_lines, workers


def _mapped_rss(path: str) -> int:
    """Bytes of `path`'s mappings resident in this process (the Rss lines of /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0] and ":" not in line.split(" ", 1)[0]:  # a mapping's header line
            inside = line.endswith(" " + path)
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


linux_only = pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")


@pytest.fixture(scope="module")
def big_lines(tmp_path_factory):
    """About 8.6 MB of text as a memory-mapped line table."""
    from bertkit.tasks.mlm import corpus

    folder = tmp_path_factory.mktemp("big")
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta"]
    text = "\n".join(" ".join(words[(i + k) % 7] for k in range(20)) for i in range(70_000))
    (folder / "big.txt").write_text(text + "\n", encoding="utf-8")
    return corpus.read_lines(str(folder / "big.txt"), cache_dir=str(folder / "cache"))


@linux_only
def test_map_functions_unmap_the_text_pages_they_read(big_lines):
    """A map worker's RSS must not grow with the corpus: the pages of the memory-mapped text it has read are
    released as it goes, and what the map writes is what the bare function writes."""
    from bertkit.tasks.mlm import corpus
    from bertkit.tasks.mlm.corpus import release_mapped_pages

    arrow = os.path.realpath(big_lines.cache_files[0]["filename"])
    size = os.path.getsize(arrow)
    assert size > 8e6
    release_mapped_pages((arrow,))
    flags, _ = corpus.cached_map(big_lines, corpus.BlankFlags(), "test-blank", 1, "blank", remove_columns=["text"])
    assert _mapped_rss(arrow) < size / 4  # read in full, at most the last few batches' pages stay mapped
    assert flags["blank"] == corpus.BlankFlags()({"text": big_lines["text"]})["blank"]
    assert _mapped_rss(arrow) > size / 2  # reading it all without the release keeps every page mapped


@linux_only
def test_an_epoch_of_blocks_unmaps_the_token_pages_it_read(en, big_lines, monkeypatch):
    """Training reads blocks from the memory-mapped token table: over an epoch, its pages are released as it goes
    (every ListColumn.RELEASE_EVERY rows), so the process's RSS does not grow by the table's size."""
    from bertkit.tasks.mlm import corpus
    from bertkit.tasks.mlm.corpus import GroupBlocks, ListColumn, release_mapped_pages

    tokens, _ = corpus.tokenize_rows(big_lines, en, "wordpiece")
    arrow = os.path.realpath(tokens.cache_files[0]["filename"])
    size = os.path.getsize(arrow)
    rows = np.arange(len(tokens))

    def read_every_block() -> int:
        blocks = GroupBlocks(tokens, rows, 128, en.cls_token_id, en.sep_token_id)
        return sum(len(blocks[k]["input_ids"]) - 2 for k in range(len(blocks)))

    total = int(ListColumn(tokens, "input_ids").lengths().sum())
    release_mapped_pages((arrow,))
    monkeypatch.setattr(ListColumn, "RELEASE_EVERY", 1000)
    assert read_every_block() == total  # every token, once
    assert _mapped_rss(arrow) < size / 4  # at most the last 1,000 rows' pages stay mapped
    monkeypatch.setattr(ListColumn, "RELEASE_EVERY", 10**9)
    read_every_block()
    assert _mapped_rss(arrow) > size / 2  # without the release, every page read stays mapped


def _units(word_ids):
    """Positions grouped as the collator groups them: runs of one word id."""
    runs, prev = [], object()
    for pos, w in enumerate(word_ids):
        if w is None or w != prev:
            runs.append([])
        runs[-1].append(pos)
        prev = w
    return runs


def test_chinese_blocks_keep_the_rjieba_words(tmp_path):
    from bertkit.tasks.mlm import corpus
    from bertkit.tasks.mlm.corpus import GroupBlocks

    zh = chinese_bert_tokenizer()
    lines = corpus.read_lines(ZH_CORPUS, cache_dir=str(tmp_path))
    split = corpus.split_rows(corpus.blank_flags(lines), 0.05, seed=0)
    texts = list(corpus.iter_texts(lines, split.train))
    expected = group_examples(texts, zh, 64, "chinese")
    tokens, _ = corpus.tokenize_rows(lines, zh, "chinese", num_proc=2)
    blocks = list(GroupBlocks(tokens, split.train, 64, zh.cls_token_id, zh.sep_token_id))
    assert [b["input_ids"] for b in blocks] == expected["input_ids"]
    assert [_units(b["word_ids"]) for b in blocks] == [_units(w) for w in expected["word_ids"]]


def test_fingerprints_are_stable_across_processes_and_calls(en):
    """Cache files are named by fingerprint: it must not depend on the process, or on state a tokenizer call
    leaves behind (truncation), and the map functions must pickle for num_proc workers."""
    import pickle
    import subprocess
    import sys

    from bertkit.tasks.mlm import corpus

    digest = corpus.tokenizer_digest(en)
    en("some text " * 100, truncation=True, max_length=16)
    assert corpus.tokenizer_digest(en) == digest
    step = corpus.step_fingerprint("parent", "tokenize", tokenizer=digest, whole_word="none", sentences=False)
    code = ("import transformers; from bertkit.tasks.mlm import corpus; "
            f"t = transformers.AutoTokenizer.from_pretrained({en.name_or_path!r}); "
            "print(corpus.step_fingerprint('parent', 'tokenize', tokenizer=corpus.tokenizer_digest(t), "
            "whole_word='none', sentences=False))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == step
    encode = pickle.loads(pickle.dumps(corpus.EncodeRows(en, "none")))
    assert encode({"text": ["Warfarin dose.", ""]})["input_ids"] == [en("Warfarin dose.",
                                                                         add_special_tokens=False)["input_ids"], []]


# --------------------------------------------------------------------------------------------------- streaming


def test_streaming_needs_max_steps(tiny_model_dir, small_corpus, tmp_path):
    with pytest.raises(BertkitError, match="train.max_steps") as error:
        run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "s", "data.streaming=true"))
    assert "\n" not in str(error.value)


def test_streaming_run_resumes_to_the_same_weights(tiny_model_dir, small_corpus, tmp_path, monkeypatch):
    """A streamed corpus (a datasets IterableDataset, seeded shuffle buffer) interrupted after 6 steps and resumed
    ends with the weights of the uninterrupted run: the stream replays to the same example, masks are a function
    of (seed, epoch, example_id)."""
    extra = ["data.streaming=true", "data.shuffle_buffer=50", "train.max_steps=14", "train.save_strategy=steps",
             "train.save_steps=6", "train.eval_strategy=no", "train.load_best_model_at_end=false",
             "train.warmup_steps=0", "head_warmup_steps=3"]
    straight = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "straight", *extra))
    assert straight["eval"]["perplexity"] < straight["eval"]["perplexity_before"]
    assert straight["train"]["epoch"] > 1  # the stream (170 blocks, 11 batches) ran out and started again

    interrupted = tmp_path / "interrupted"
    original_save = transformers.Trainer._save_checkpoint

    def save_then_crash(self, *args, **kwargs):
        original_save(self, *args, **kwargs)
        if self.state.global_step == 6:
            raise KeyboardInterrupt("simulated interruption")

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        run_mlm(tiny_overrides(tiny_model_dir, small_corpus, interrupted, *extra))
    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", original_save)
    resumed = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, interrupted, *extra, "resume=true"))

    expected, actual = load_file(tmp_path / "straight" / "model.safetensors"), load_file(interrupted /
                                                                                         "model.safetensors")
    for name in expected:
        assert torch.allclose(expected[name], actual[name], atol=1e-6), name
    assert resumed["eval"]["perplexity"] == pytest.approx(straight["eval"]["perplexity"], rel=1e-6)


def test_streaming_with_a_held_out_file(tiny_model_dir, small_corpus, tmp_path):
    """data.eval beside a streamed corpus: every line of it is held out (through the cache), none of the stream."""
    from bertkit.tasks.mlm.corpus import stream_examples

    held = tmp_path / "held.txt"
    held.write_text("Warfarin needs INR monitoring.\n\nDigoxin has a long half-life.\n", encoding="utf-8")
    result = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "s", "data.streaming=true",
                                    f"data.eval={held}", f"data.cache_dir={tmp_path / 'cache'}",
                                    "train.max_steps=2", "head_warmup_steps=1"))
    assert result["held_out_examples"] == 1  # group mode: both lines' 15 tokens make one block
    stream = stream_examples(small_corpus, transformers.AutoTokenizer.from_pretrained(tiny_model_dir),
                             "wordpiece", "group", 64, 42, 0.0, held=True)
    assert next(iter(stream), None) is None  # fraction 0: nothing of the stream is held out


# ------------------------------------------------------------------------------------------ head warm-up


def test_new_head_is_warmed_up_before_the_before_figure(tiny_model_dir, small_corpus, tmp_path):
    """A checkpoint without an MLM head: the head alone trains head_warmup_steps first (encoder frozen), so the
    "before" perplexity reads the pretrained encoder through a fitted head; metrics.json says which it is."""
    extra = ["train.max_steps=1", "train.learning_rate=1.0e-12", "head_warmup_lr=5.0e-2"]
    cold = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "cold", *extra, "head_warmup_steps=0"))
    warm = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, tmp_path / "warm", *extra, "head_warmup_steps=30"))
    assert cold["eval"]["perplexity_before_is"] == "new random head (head_warmup_steps=0)"
    assert warm["eval"]["perplexity_before_is"] == "after 30 head-only steps (encoder frozen, lr 0.05)"
    saved = json.loads((tmp_path / "warm" / "metrics.json").read_text())
    assert saved["before"]["head"] == warm["eval"]["perplexity_before_is"]
    assert warm["eval"]["perplexity_before"] < 0.5 * cold["eval"]["perplexity_before"]
    # the encoder did not move (a learning rate of 1e-12 after the warm-up); the head did
    original = load_file(Path(tiny_model_dir) / "model.safetensors")
    trained = load_file(tmp_path / "warm" / "model.safetensors")
    cold_head = load_file(tmp_path / "cold" / "model.safetensors")
    for name in original:
        assert torch.allclose(trained[f"bert.{name}"], original[name], atol=1e-8), name
    assert not torch.equal(trained["cls.predictions.transform.dense.weight"],
                           cold_head["cls.predictions.transform.dense.weight"])
    # a checkpoint with an MLM head is not warmed up
    again = run_mlm(tiny_overrides(str(tmp_path / "warm"), small_corpus, tmp_path / "again", *extra))
    assert again["eval"]["perplexity_before_is"] == "pretrained head"


# ------------------------------------------------------------------------------------------ task interface


def test_mlm_module_has_the_task_interface():
    from bertkit import tasks
    from bertkit.tasks import mlm

    assert tuple(mlm.__all__[:7]) == tasks.INTERFACE
    assert all(callable(getattr(mlm, name)) for name in tasks.INTERFACE)


def test_compute_metrics_scores_labelled_positions_dense_or_sparse():
    from bertkit.tasks.mlm import compute_metrics_fn

    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11)  # (B, T, V)
    labels = torch.full((2, 5), -100)
    labels[0, 1], labels[1, 3], labels[1, 4] = 3, int(logits[1, 3].argmax()), 7
    chosen = labels.ne(-100)
    loss = torch.nn.functional.cross_entropy(logits[chosen].double(), labels[chosen]).item()
    accuracy = (logits[chosen].argmax(-1) == labels[chosen]).float().mean().item()
    compute = compute_metrics_fn()
    dense = compute(transformers.EvalPrediction(logits.numpy(), labels.numpy()))
    sparse = compute(transformers.EvalPrediction((logits[chosen].numpy(), None), labels.numpy()))
    for scores in (dense, sparse):
        assert scores["loss"] == pytest.approx(loss, rel=1e-6)
        assert scores["perplexity"] == pytest.approx(math.exp(loss), rel=1e-6)
        assert scores["accuracy"] == pytest.approx(accuracy)


def test_run_saves_its_settings_and_evaluate_and_predict_serve_it(tiny_model_dir, small_corpus, tmp_path):
    """The run's Settings go into config.json; evaluate_file on the run's held-out file gives the run's "after"
    perplexity (the same examples and fixed masks); predict_file fills each [MASK] with its top tokens."""
    from bertkit.tasks import SETTINGS_KEY
    from bertkit.tasks.mlm import Settings, evaluate_file, predict_file

    held = tmp_path / "held.txt"
    held.write_text("Warfarin needs INR monitoring every week.\nDigoxin has a long half-life.\n\n"
                    "Renal function guides the dose of many drugs.\n" * 6, encoding="utf-8")
    out = tmp_path / "run"
    result = run_mlm(tiny_overrides(tiny_model_dir, small_corpus, out, f"data.eval={held}", "train.max_steps=2",
                                    "head_warmup_steps=1", "data.max_length=32", "eval_seed=7"))
    config = json.loads((out / "config.json").read_text())
    expected = Settings(max_length=32, whole_word="wordpiece", seed=7)
    assert config[SETTINGS_KEY] == bertkit.tasks.settings_dict(expected)

    scores = evaluate_file(str(out), str(held), str(tmp_path / "eval.json"), batch_size=3)
    assert scores["masked_tokens"] == result["after"]["masked_tokens"]
    assert scores["perplexity"] == pytest.approx(result["after"]["perplexity"], rel=1e-5)
    assert json.loads((tmp_path / "eval.json").read_text())["perplexity"] == scores["perplexity"]
    cli = CliRunner().invoke(app, ["evaluate", str(out), str(held), "--batch-size", "3"])
    assert cli.exit_code == 0 and "perplexity" in cli.output, cli.output

    lines = tmp_path / "masked.txt"
    lines.write_text("Warfarin needs [MASK] monitoring.\nNo mask here.\nThe [MASK] of [MASK] is long.\n")
    assert predict_file(str(out), str(lines), str(tmp_path / "filled.jsonl"), batch_size=1) == 2
    cli = CliRunner().invoke(app, ["predict", str(out), str(lines), "-o", str(tmp_path / "cli.jsonl"),
                                   "--batch-size", "1"])
    assert cli.exit_code == 0 and "wrote 2 predictions" in cli.output, cli.output  # the CLI serves mlm runs too
    assert (tmp_path / "cli.jsonl").read_text() == (tmp_path / "filled.jsonl").read_text()
    records = [json.loads(line) for line in (tmp_path / "filled.jsonl").read_text().splitlines()]
    assert [r["text"] for r in records] == ["Warfarin needs [MASK] monitoring.", "The [MASK] of [MASK] is long."]
    assert [len(r["masks"]) for r in records] == [1, 2]
    for top in (top for r in records for top in r["masks"]):
        scores = [t["score"] for t in top]
        assert len(top) == 5 and scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6


def test_bad_saved_settings_name_the_key(tiny_model_dir, tmp_path):
    from bertkit.tasks import SETTINGS_KEY
    from bertkit.tasks.mlm import load_predictor

    model = tiny_mlm()
    model.config.update({SETTINGS_KEY: {"mlm_probability": 1.5}})
    model.save_pretrained(tmp_path)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path)
    with pytest.raises(BertkitError, match=f"{SETTINGS_KEY}.mlm_probability=1.5") as error:
        load_predictor(str(tmp_path))
    assert "\n" not in str(error.value)
