"""bertkit/speed.py: one switch turns every speed trick off (BERTKIT_PLAIN=1), or some by name, and each trick's
site obeys it; eval outputs of the real tokens do not change either way."""

import pytest
import torch
import torch.nn.functional as F
import transformers

import bertkit
from bertkit import speed
from bertkit.errors import BertkitError
from bertkit.padding import fast_dropout
from bertkit.tasks.mlm.corpus import release_mapped_pages


@pytest.mark.parametrize("value, off", [("", set()), ("0", set()), ("1", set(speed.TRICKS)),
                                        ("all", set(speed.TRICKS)), ("dropout, buckets", {"dropout", "buckets"})])
def test_the_switch_names_what_it_turns_off(monkeypatch, value, off):
    monkeypatch.setenv(speed.PLAIN_ENV, value)
    assert speed.plain_tricks() == off
    assert {trick for trick in speed.TRICKS if not speed.on(trick)} == off


def test_an_unknown_trick_is_refused_with_the_names_it_takes(monkeypatch):
    monkeypatch.setenv(speed.PLAIN_ENV, "dropuot")
    with pytest.raises(BertkitError, match=r"BERTKIT_PLAIN=dropuot: unknown trick dropuot — use 1 for all.*dropout"):
        speed.on("dropout")


@pytest.fixture
def models(tmp_path):
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=37, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(tmp_path)
    return (transformers.BertModel.from_pretrained(tmp_path).eval(),
            bertkit.BertkitModel.from_pretrained(tmp_path).eval())


def padded_batch():
    ids = torch.randint(5, 99, (3, 12), generator=torch.Generator().manual_seed(1))
    mask = (torch.arange(12) < torch.tensor([12, 5, 8])[:, None]).long()  # (B, T), two rows padded
    return {"input_ids": ids * mask, "attention_mask": mask}


@pytest.mark.parametrize("plain", ["", "1", "unpadding", "buckets,fused_qkv"])
def test_eval_outputs_of_real_tokens_match_transformers_with_or_without_the_tricks(monkeypatch, models, plain):
    reference, ours = models
    monkeypatch.setenv(speed.PLAIN_ENV, plain)
    batch = padded_batch()
    with torch.no_grad():
        expected = reference(**batch).last_hidden_state
        got = ours(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-4)


def test_plain_runs_the_padded_path(monkeypatch, models):
    _, ours = models
    mask = padded_batch()["attention_mask"]
    assert ours.unpadding(mask) is not None  # the trick is on by default
    monkeypatch.setenv(speed.PLAIN_ENV, "1")
    assert ours.unpadding(mask) is None


def test_plain_dropout_is_torchs_own(monkeypatch):
    x = torch.ones(4096)
    monkeypatch.setenv(speed.PLAIN_ENV, "dropout")
    torch.manual_seed(3)
    ours = fast_dropout(x, 0.1)
    torch.manual_seed(3)
    torch_dropout = F.dropout(x, 0.1, training=True)
    assert torch.equal(ours, torch_dropout)
    monkeypatch.setenv(speed.PLAIN_ENV, "")
    torch.manual_seed(3)
    assert not torch.equal(fast_dropout(x, 0.1), torch_dropout)  # the 16-bit masks draw differently


def test_plain_leaves_memory_alone(monkeypatch, tmp_path):
    monkeypatch.setenv(speed.PLAIN_ENV, "malloc,page_release")
    assert speed.keep_freed_memory() is False
    path = tmp_path / "mapped.bin"
    path.write_bytes(b"x" * 8192)
    import mmap

    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert mapped[0] == ord("x")
        assert release_mapped_pages((str(path),)) == 0
        monkeypatch.setenv(speed.PLAIN_ENV, "")
        assert release_mapped_pages((str(path),)) >= 1  # on Linux, the mapping is released when the trick is on
