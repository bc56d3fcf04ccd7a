"""Unpadded execution against the padded path (`unpad=False`) on the same weights: every head, eager and sdpa,
ragged batches. Real tokens and everything per sequence agree within 1e-5, padding positions of per-token outputs
are zeros, gradients agree, and inputs without padding take the padded path."""

import json

import pytest
import torch
import torch.nn.functional as F
import transformers
from helpers import HEAD_PAIRS, output_tensors, random_batch, tiny_config_kwargs

import bertkit
from bertkit import modeling_bert
from bertkit.padding import Unpadding

ATOL = 1e-5
PER_TOKEN = {"last_hidden_state": 3, "logits": 3, "prediction_logits": 3, "start_logits": 2, "end_logits": 2}
HEAD_CASES = [("base", None), ("pretraining", None), ("mlm", None), ("token", None), ("qa", None), ("choice", None),
              ("sequence", "single_label_classification"), ("sequence", "multi_label_classification"),
              ("sequence", "regression"), ("sequence-mean", "single_label_classification")]
CASE_IDS = [f"{h}-{p}" if p else h for h, p in HEAD_CASES]


def build(head, problem_type=None, attn="sdpa", **overrides):
    """A tiny model with every dropout at 0, its heads moved off their zero init."""
    torch.manual_seed(0)
    num_labels = {"qa": 2, "sequence": 1 if problem_type == "regression" else 3}.get(head.split("-")[0], 3)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(
        num_labels=num_labels, problem_type=problem_type, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        classifier_pooling="mean" if head.endswith("-mean") else "cls", **overrides), attn_implementation=attn)
    model = HEAD_PAIRS[head.split("-")[0]][1](config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.02)
    return model


def ragged_batch(head, problem_type=None, **kwargs):
    problem_type = problem_type or "single_label_classification"
    return random_batch(head.split("-")[0], batch_size=4, seq_len=10, problem_type=problem_type, seed=11, **kwargs)


def assert_matches_padded_path(unpadded: dict, padded: dict, mask):
    """Real tokens equal; padding positions of per-token outputs are zeros; everything else equal."""
    assert unpadded.keys() == padded.keys()
    for name, tensor in padded.items():
        ours = unpadded[name]
        assert ours.shape == tensor.shape, name
        if PER_TOKEN.get(name) == tensor.dim() and tensor.shape[:2] == mask.shape:
            real = mask.bool()
            assert (ours[~real] == 0).all(), f"{name}: padding positions are not zero"
            ours, tensor = ours[real], tensor[real]
        diff = (ours - tensor).abs().max().item()
        assert diff <= ATOL, f"{name}: max abs difference {diff}"


def qa_loss_from_logits(start_logits, end_logits, batch):
    losses = [F.cross_entropy(logits, batch[f"{end}_positions"])
              for logits, end in ((start_logits, "start"), (end_logits, "end"))]
    return (losses[0] + losses[1]) / 2


@pytest.fixture(params=[None, 3], ids=["one-bucket", "buckets-of-3"])
def bucket_tokens(request, monkeypatch):
    """Attention length buckets: the default (one bucket at these lengths) or a granularity of 3 tokens (several)."""
    if request.param is not None:
        monkeypatch.setattr(modeling_bert, "ATTENTION_BUCKET_TOKENS", request.param)
    return request.param


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("head,problem_type", HEAD_CASES, ids=CASE_IDS)
def test_every_head_matches_the_padded_path(head, problem_type, attn, bucket_tokens):
    model = build(head, problem_type, attn).eval()
    batch = ragged_batch(head, problem_type)
    with torch.no_grad():
        unpadded = output_tensors(model(**batch, output_hidden_states=True))
        padded = output_tensors(model(**batch, output_hidden_states=True, unpad=False))
        hidden_unpadded = model(**batch, output_hidden_states=True).hidden_states
        hidden_padded = model(**batch, output_hidden_states=True, unpad=False).hidden_states
    mask = batch["attention_mask"].reshape(-1, batch["attention_mask"].shape[-1])  # choice: (B*N, T)
    if head == "qa":  # the loss is the cross-entropy of the returned logits: with zeros at the pad tokens
        own_loss = qa_loss_from_logits(unpadded["start_logits"], unpadded["end_logits"], batch)
        assert (unpadded["loss"] - own_loss).abs() < ATOL
        del unpadded["loss"], padded["loss"]
    assert_matches_padded_path(unpadded, padded, batch["attention_mask"])
    assert len(hidden_unpadded) == 3  # embeddings + 2 layers, each re-padded to (B, T, D)
    for ours, reference in zip(hidden_unpadded, hidden_padded):
        assert_matches_padded_path({"last_hidden_state": ours}, {"last_hidden_state": reference}, mask)


def scalar_loss(head, output, mask):
    """The head's own loss; for the base model and QA (whose loss also reads the pad tokens' logits, which differ
    between the paths), a fixed random weighting of the real tokens' outputs."""
    if head not in ("base", "qa"):
        return output.loss
    real = mask.bool()
    if head == "base":
        per_token = output.last_hidden_state
    else:
        per_token = torch.stack([output.start_logits, output.end_logits], -1)
    weights = torch.randn(per_token[real].shape, generator=torch.Generator().manual_seed(0))
    return (per_token[real] * weights).sum()


@pytest.mark.parametrize("head,problem_type", HEAD_CASES, ids=CASE_IDS)
def test_gradients_match_the_padded_path(head, problem_type, bucket_tokens):
    model = build(head, problem_type).train()
    batch = ragged_batch(head, problem_type)
    grads = []
    for unpad in (True, False):
        model.zero_grad()
        scalar_loss(head, model(**batch, unpad=unpad), batch["attention_mask"]).backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name, grad in grads[1].items():
        assert torch.allclose(grads[0][name], grad, atol=ATOL), name


def test_attention_buckets_group_rows_by_length(monkeypatch):
    monkeypatch.setattr(modeling_bert, "ATTENTION_BUCKET_TOKENS", 3)
    mask = (torch.arange(10) < torch.tensor([[10], [2], [5], [1], [8]])).long()  # lengths 10, 2, 5, 1, 8
    unpadding = Unpadding.from_mask(mask).with_length_buckets(3)
    buckets = unpadding.attention_buckets()
    assert [b.rows.tolist() for b in buckets] == [[1, 3], [2], [4], [0]]  # ceil(L / 3): 1, 2, 3, 4
    assert [(b.batch, b.seqlen) for b in buckets] == [(2, 2), (1, 5), (1, 8), (1, 10)]
    # packed bucket by bucket, row-major inside one: rows 1 and 3, then 2, 4, 0, each bucket a slice of the packing
    assert unpadding.batch_index.tolist() == [1, 1, 3] + [2] * 5 + [4] * 8 + [0] * 10
    assert [(b.tokens.start, b.tokens.stop) for b in buckets] == [(0, 3), (3, 8), (8, 16), (16, 26)]
    assert unpadding.position_index[:3].tolist() == [0, 1, 0]
    assert torch.equal(unpadding.indices, unpadding.batch_index * 10 + unpadding.position_index)
    assert buckets[0].slots.tolist() == [0, 1, 2]  # (row 1, col 0), (row 1, col 1), (row 3, col 0) in a 2 x 2 layout
    hidden = torch.randn(5, 10, 4)
    assert torch.equal(unpadding.unpack(unpadding.pack(hidden))[mask.bool()], hidden[mask.bool()])
    assert Unpadding.from_mask(mask).with_length_buckets(32).attention_buckets()[0].rows is None  # one bucket: all


def test_bucketed_attention_left_padded_and_ragged(monkeypatch):
    monkeypatch.setattr(modeling_bert, "ATTENTION_BUCKET_TOKENS", 2)
    model = build("base").eval()
    batch = ragged_batch("base", with_labels=False)
    left = {k: v.flip(-1) for k, v in batch.items()}
    for inputs in (batch, left):
        with torch.no_grad():
            unpadded = model(**inputs).last_hidden_state
            padded = model(**inputs, unpad=False).last_hidden_state
        real = inputs["attention_mask"].bool()
        assert (unpadded[real] - padded[real]).abs().max() <= ATOL


def test_batch_with_a_length_one_row():
    model = build("token").eval()
    batch = ragged_batch("token")
    batch["attention_mask"][2] = 0
    batch["attention_mask"][2, 0] = 1
    batch["labels"][2, 1:] = -100
    with torch.no_grad():
        unpadded = output_tensors(model(**batch))
        padded = output_tensors(model(**batch, unpad=False))
        alone = model(**{k: v[2:3, :1] for k, v in batch.items()}).logits
    assert_matches_padded_path(unpadded, padded, batch["attention_mask"])
    assert (unpadded["logits"][2, 0] - alone[0, 0]).abs().max() <= ATOL


def test_left_padding_real_tokens_match():
    model = build("base").eval()
    batch = ragged_batch("base", with_labels=False)
    batch = {k: v.flip(-1) for k, v in batch.items()}  # pad on the left
    with torch.no_grad():
        unpadded = model(**batch).last_hidden_state
        padded = model(**batch, unpad=False).last_hidden_state
    real = batch["attention_mask"].bool()
    assert (unpadded[real] - padded[real]).abs().max() <= ATOL


def test_inputs_embeds_position_ids_and_no_token_types():
    model = build("base").eval()
    batch = ragged_batch("base", with_labels=False)
    embeds = model.embeddings.word_embeddings(batch["input_ids"]).detach()
    positions = torch.arange(10).flip(0).expand(4, -1)  # any positions, as long as both paths get the same
    for call in ({"inputs_embeds": embeds}, {"input_ids": batch["input_ids"], "position_ids": positions},
                 {"input_ids": batch["input_ids"], "position_ids": positions[:1]}):
        with torch.no_grad():
            unpadded = output_tensors(model(**call, attention_mask=batch["attention_mask"]))
            padded = output_tensors(model(**call, attention_mask=batch["attention_mask"], unpad=False))
        assert_matches_padded_path(unpadded, padded, batch["attention_mask"])


def test_which_path_runs(monkeypatch):
    model = build("sequence").eval()
    batch = ragged_batch("sequence", with_labels=False)
    full = {k: torch.ones_like(v) if k == "attention_mask" else v for k, v in batch.items()}
    assert model.bert.unpadding(batch["attention_mask"]) is not None
    assert model.bert.unpadding(full["attention_mask"]) is None  # nothing to skip
    assert model.bert.unpadding(None) is None
    assert model.bert.unpadding(batch["attention_mask"], unpad=False) is None
    assert model.bert.unpadding(batch["attention_mask"], output_attentions=True) is None

    def refuse(mask):
        raise AssertionError("took the unpadded path")

    monkeypatch.setattr(Unpadding, "from_mask", staticmethod(refuse))
    with torch.no_grad():
        model(**full)
        model(**batch, unpad=False)
        out = model(**batch, output_attentions=True)
        model.config.unpad = False
        model(**batch)
    assert len(out.attentions) == 2


def test_config_field_is_saved_and_harmless_to_stock_transformers(tmp_path):
    model = build("sequence", unpad=False)
    assert model.bert.unpadding(ragged_batch("sequence")["attention_mask"]) is None
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["unpad"] is False
    assert bertkit.BertkitConfig.from_pretrained(tmp_path).unpad is False
    stock = transformers.BertForSequenceClassification.from_pretrained(tmp_path).eval()
    batch = ragged_batch("sequence", with_labels=False)
    with torch.no_grad():
        assert (stock(**batch).logits - model.eval()(**batch).logits).abs().max() <= ATOL
    assert bertkit.BertkitConfig().unpad is True


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("unpad", [True, False])
def test_sparse_prediction_scores_only_labelled_positions(mode, unpad):
    model = build("mlm", sparse_prediction=True).train(mode == "train")
    batch = ragged_batch("mlm")
    selected = batch["labels"] != -100
    sparse = model(**batch, unpad=unpad)
    model.config.sparse_prediction = False
    with torch.no_grad():
        full = model(**batch, unpad=unpad)
    assert sparse.logits.shape == (int(selected.sum()), 99)
    assert full.logits.shape == (4, 10, 99)
    assert (sparse.logits - full.logits[selected]).abs().max() <= ATOL
    assert (sparse.loss - full.loss).abs() <= ATOL
    assert model(**batch, unpad=unpad, sparse_prediction=True).logits.shape == sparse.logits.shape  # per call
    pretraining = build("pretraining", sparse_prediction=True).train(mode == "train")
    assert pretraining(**ragged_batch("pretraining")).prediction_logits.shape == sparse.logits.shape


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradient_checkpointing_unpadded(use_reentrant):
    model = build("token").train()
    batch = ragged_batch("token")
    grads = []
    for checkpointing in (False, True):
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
        model.zero_grad()
        model(**batch).loss.backward()
        grads.append(model.bert.encoder.layer[0].attention.self.query.weight.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_bf16_autocast_runs_unpadded():
    model = build("token").eval()
    batch = ragged_batch("token")
    with torch.no_grad():
        reference = model(**batch).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            unpadded = model(**batch).logits
            padded = model(**batch, unpad=False).logits
    real = batch["attention_mask"].bool()
    assert (unpadded[real].float() - reference[real]).abs().max() < 0.05
    assert (unpadded[real].float() - padded[real].float()).abs().max() < 0.05


def test_lora_unpadded_matches_padded():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(build("sequence"), LoraConfig(task_type="SEQ_CLS", r=4, target_modules=["query", "value"]))
    with torch.no_grad():  # B starts at zero: give the adapters some effect
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.1)
    batch = ragged_batch("sequence")
    grads = []
    for unpad in (True, False):
        model.zero_grad()
        model(**batch, unpad=unpad).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None})
    assert any("lora_A" in name for name in grads[0])
    for name, grad in grads[1].items():
        assert torch.allclose(grads[0][name], grad, atol=ATOL), name


def fake_varlen_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, cu_seq_lens_q=None,
                          cu_seq_lens_k=None, max_length_q=None, max_length_k=None, **kwargs):
    """A CPU stand-in for flash-attention's varlen kernel: q, k, v (1, H, N, hd) packed, one sequence at a time."""
    assert attention_mask is None and torch.equal(cu_seq_lens_q, cu_seq_lens_k) and cu_seq_lens_q.dtype == torch.int32
    bounds = cu_seq_lens_q.tolist()
    assert max_length_q == max_length_k == max(b - a for a, b in zip(bounds, bounds[1:]))
    pieces = [F.scaled_dot_product_attention(query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], scale=scaling)
              for a, b in zip(bounds, bounds[1:])]
    return torch.cat(pieces, dim=2).transpose(1, 2), None  # (1, H, N, hd) -> (1, N, H, hd)


def test_flash_attention_varlen_hook_gets_packed_tokens_and_cu_seqlens(monkeypatch):
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    model = build("token").eval()
    batch = ragged_batch("token")
    with torch.no_grad():
        reference = model(**batch, unpad=False).logits
        monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS, "flash_attention_2", fake_varlen_attention)
        monkeypatch.setattr(model.config, "_attn_implementation_internal", "flash_attention_2")
        packed = model(**batch).logits
    real = batch["attention_mask"].bool()
    assert (packed[real] - reference[real]).abs().max() <= ATOL
