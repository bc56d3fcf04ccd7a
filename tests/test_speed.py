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


def test_inference_reads_the_stacked_qkv_weight_without_copying_it(monkeypatch, models):
    """for_inference puts query, key and value side by side in one buffer: project_qkv's stacked weight is then a
    view (no copy per call), outputs match transformers, and the parameters keep their names and values."""
    from bertkit.checkpoints import for_inference
    from bertkit.modeling_bert import stacked

    reference, ours = models
    before = {name: value.clone() for name, value in ours.state_dict().items()}
    ours = for_inference(ours)
    attention = ours.encoder.layer[0].attention.self
    parts = [attention.query.weight, attention.key.weight, attention.value.weight]
    with torch.no_grad():
        assert stacked(parts).data_ptr() == parts[0].data_ptr()  # a view of the shared buffer
        batch = padded_batch()
        expected, got = reference(**batch).last_hidden_state, ours(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-4)
    after = ours.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[name], before[name]) for name in before)
    # with the trick off, or where a gradient is wanted, the weight is a copy
    monkeypatch.setenv(speed.PLAIN_ENV, "fused_qkv")
    fresh = bertkit.BertkitModel(ours.config)
    fresh.load_state_dict(before)
    fresh = for_inference(fresh)
    monkeypatch.delenv(speed.PLAIN_ENV)
    fresh_attention = fresh.encoder.layer[0].attention.self
    fresh_parts = [fresh_attention.query.weight, fresh_attention.key.weight, fresh_attention.value.weight]
    with torch.no_grad():
        assert stacked(fresh_parts).data_ptr() != fresh_parts[0].data_ptr()
    assert stacked(parts).data_ptr() != parts[0].data_ptr()  # grad enabled and parts require it: a copy


def test_training_a_model_after_inference_sharing_updates_query_key_and_value(models):
    """Gradients reach all three projections when their weights share one buffer (the stacked weight is copied
    where autograd needs it), and equal those of a model that never shared."""
    import copy

    from bertkit.checkpoints import for_inference

    _, ours = models
    shared, plain = for_inference(copy.deepcopy(ours)), copy.deepcopy(ours)  # eval mode: no dropout, same numbers
    batch = padded_batch()
    for model in (shared, plain):
        model(**batch).last_hidden_state.square().mean().backward()
    for name in ("query", "key", "value"):
        got = getattr(shared.encoder.layer[0].attention.self, name).weight.grad
        expected = getattr(plain.encoder.layer[0].attention.self, name).weight.grad
        assert got is not None and got.abs().sum() > 0
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("variable", speed.KERNEL_CACHE_ENVS)
def test_a_server_keeps_fewer_compiled_kernels_unless_told(monkeypatch, variable):
    assert set(speed.KERNEL_CACHE_ENVS) == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"}  # oneDNN, ideep
    monkeypatch.delenv(variable, raising=False)
    speed.limit_kernel_cache()
    assert speed.os.environ[variable] == str(speed.SERVER_KERNEL_CACHE)
    monkeypatch.setenv(variable, "4096")  # the user's own setting stays
    speed.limit_kernel_cache()
    assert speed.os.environ[variable] == "4096"
    monkeypatch.delenv(variable)
    monkeypatch.setenv(speed.PLAIN_ENV, "server_memory")
    speed.limit_kernel_cache()
    assert variable not in speed.os.environ


def test_freed_memory_goes_back_to_the_os_unless_plain(monkeypatch):
    import sys

    if sys.platform.startswith("linux"):
        assert speed.release_freed_memory() in (True, False)  # glibc answers whether it released anything
    monkeypatch.setenv(speed.PLAIN_ENV, "server_memory")
    assert speed.release_freed_memory() is False


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                    reason="oneDNN has no native bf16 on this CPU (AVX2 alone): the fused kernel does not exist here")
def test_bf16_inference_fuses_the_feed_forward_gelu_into_its_matmul(monkeypatch, models):
    """The fused path runs where it should (bf16 weights, CPU, no gradient) and gives what the plain path gives, to
    bf16's precision; fp32, gradients and BERTKIT_PLAIN=fused_gelu take the plain path."""
    import copy

    _, ours = models
    cast = copy.deepcopy(ours).to(torch.bfloat16)
    intermediate = cast.encoder.layer[0].intermediate
    hidden = torch.randn(7, ours.config.hidden_size, dtype=torch.bfloat16)
    with torch.no_grad():
        assert intermediate._fuses_gelu(hidden)
        fused = intermediate(hidden)
        monkeypatch.setenv(speed.PLAIN_ENV, "fused_gelu")
        assert not intermediate._fuses_gelu(hidden)
        plain = intermediate(hidden)
        monkeypatch.delenv(speed.PLAIN_ENV)
        assert not ours.encoder.layer[0].intermediate._fuses_gelu(hidden.float())  # fp32 weights and input
    torch.testing.assert_close(fused.float(), plain.float(), atol=2e-2, rtol=2e-2)
    assert not intermediate._fuses_gelu(hidden)  # gradients wanted: autograd needs the two steps
    batch = padded_batch()
    with torch.no_grad():
        got = cast(**batch).last_hidden_state.float()
        expected = ours(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], expected[real], atol=0.1, rtol=0.05)  # the whole bf16 model vs fp32


@pytest.mark.parametrize("mask_kind", ["none", "keys", "square", "additive"])
def test_blockwise_attention_gives_eager_attentions_numbers_block_by_block(monkeypatch, mask_kind):
    from bertkit import modeling_bert

    batch, heads, seqlen, head_dim = 5, 3, 7, 4
    q, k, v = torch.randn(3, batch, heads, seqlen, head_dim, generator=torch.Generator().manual_seed(0))
    keys = torch.arange(seqlen) < torch.tensor([7, 3, 5, 1, 6])[:, None]  # (B, T)
    mask = {"none": None, "keys": keys[:, None, None, :],
            "square": keys[:, None, None, :] & keys[:, None, :, None] | torch.eye(seqlen, dtype=torch.bool),
            "additive": torch.zeros(batch, 1, 1, seqlen).masked_fill(~keys[:, None, None, :], -1e9)}[mask_kind]
    monkeypatch.setattr(modeling_bert, "SCORES_PER_BLOCK", 2 * heads * seqlen * seqlen)  # blocks of 2, 2, 1 rows
    expected, _ = modeling_bert.eager_attention(torch.nn.Module().eval(), q, k, v, mask, scaling=0.5)
    got, probs = modeling_bert.blockwise_attention(None, q, k, v, mask, scaling=0.5)
    assert got.shape == (batch, seqlen, heads, head_dim) and probs is None
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    got16, _ = modeling_bert.blockwise_attention(None, q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, scaling=0.5)
    torch.testing.assert_close(got16.float(), expected, atol=3e-2, rtol=3e-2)


def test_bf16_inference_runs_attention_blockwise_and_nothing_else_does(monkeypatch, models):
    """Blockwise attention replaces sdpa at bf16 inference on CPU (when the scores are many enough), and gives what
    sdpa gives to bf16's precision; fp32, gradients, a small call and BERTKIT_PLAIN=blockwise_attention keep sdpa."""
    import copy

    from bertkit import modeling_bert

    calls = []
    original = modeling_bert.blockwise_attention
    monkeypatch.setattr(modeling_bert, "blockwise_attention", lambda *a, **kw: calls.append(1) or original(*a, **kw))
    monkeypatch.setattr(modeling_bert, "BLOCKWISE_FROM_SCORES", 0)
    _, ours = models
    cast = copy.deepcopy(ours).to(torch.bfloat16)
    batch = padded_batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        blockwise = cast(**batch).last_hidden_state.float()
        assert calls, "bf16 inference should run blockwise attention"
        calls.clear()
        monkeypatch.setenv(speed.PLAIN_ENV, "blockwise_attention")
        plain = cast(**batch).last_hidden_state.float()
        monkeypatch.delenv(speed.PLAIN_ENV)
        ours(**batch)  # fp32
    cast(**batch).last_hidden_state.sum().backward()  # gradients wanted
    assert not calls
    torch.testing.assert_close(blockwise[real], plain[real], atol=2e-2, rtol=2e-2)
    monkeypatch.setattr(modeling_bert, "BLOCKWISE_FROM_SCORES", 10**9)
    with torch.no_grad():
        cast(**batch)
    assert not calls  # too few scores to pay for three calls
