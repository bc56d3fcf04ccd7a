"""Training through the real Trainer and peft: gradient accumulation is exact for every head, LoRA attaches,
trains, saves, reloads and merges."""

import subprocess
import sys

import pytest
import torch
import transformers
from helpers import HEAD_PAIRS, random_batch, tiny_config_kwargs

import bertkit

GA_CASES = [
    ("pretraining", None), ("mlm", None), ("token", None), ("qa", None), ("choice", None),
    ("sequence", "single_label_classification"), ("sequence", "multi_label_classification"),
    ("sequence", "regression"),
]


def _examples(head, problem_type, count=8):
    """`count` examples with different real lengths, hence different numbers of labelled tokens per micro-batch."""
    batch = random_batch(head, batch_size=count, seq_len=12, problem_type=problem_type, seed=7)
    if head == "pretraining":
        # The NSP term is exact when each micro-batch holds the same share of masked tokens: two per row here.
        labels = torch.full_like(batch["labels"], -100)
        labels[:, 1:3] = batch["input_ids"][:, 1:3]
        batch["labels"] = labels
    return [{key: value[i] for key, value in batch.items()} for i in range(count)]


def _one_sgd_step(head, problem_type, batch_size, accumulation, tmp_path) -> dict:
    torch.manual_seed(0)
    num_labels = {"qa": 2, "sequence": 1 if problem_type == "regression" else 3}.get(head, 3)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(
        num_labels=num_labels, problem_type=problem_type, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    model = HEAD_PAIRS[head][1](config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / f"{batch_size}x{accumulation}"), per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation, max_steps=1, learning_rate=1.0, optim="sgd",
        lr_scheduler_type="constant", weight_decay=0.0, max_grad_norm=0.0,  # clipping would hide a wrong scale
        save_strategy="no", report_to="none", use_cpu=True, seed=0, disable_tqdm=True)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    transformers.Trainer(model=model, args=args, train_dataset=_examples(head, problem_type)).train()
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


@pytest.mark.parametrize("head,problem_type", GA_CASES, ids=[f"{h}-{p}" if p else h for h, p in GA_CASES])
def test_gradient_accumulation_is_exact(head, problem_type, tmp_path):
    full_batch = _one_sgd_step(head, problem_type, batch_size=8, accumulation=1, tmp_path=tmp_path)
    accumulated = _one_sgd_step(head, problem_type, batch_size=2, accumulation=4, tmp_path=tmp_path)
    update_norm = torch.sqrt(sum((u**2).sum() for u in full_batch.values()))
    assert update_norm > 1e-3  # the step really moved the weights
    for name, update in full_batch.items():
        assert torch.allclose(update, accumulated[name], atol=1e-6, rtol=1e-4), name


def test_model_accepts_loss_kwargs_so_trainer_passes_the_item_count(tmp_path):
    model = bertkit.BertkitForMaskedLM(bertkit.BertkitConfig(**tiny_config_kwargs()))
    trainer = transformers.Trainer(model=model, args=transformers.TrainingArguments(
        output_dir=str(tmp_path / "unused"), report_to="none", use_cpu=True))
    assert trainer.model_accepts_loss_kwargs


# ------------------------------------------------------------------------------------------------ LoRA (peft)


def _toy_task(count=64, seq_len=8, seed=0):
    """Label 1 iff token 5 appears: learnable by attention + classifier in a few dozen steps."""
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(6, 99, (count, seq_len), generator=gen)
    labels = torch.randint(0, 2, (count,), generator=gen)
    input_ids[labels == 1, 3] = 5
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}


def test_lora_trains_saves_loads_and_merges(tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    torch.manual_seed(0)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(num_labels=2))
    bertkit.BertkitForSequenceClassification(config).save_pretrained(tmp_path / "base")
    base = bertkit.BertkitForSequenceClassification.from_pretrained(tmp_path / "base")
    lora = LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["query", "value"])
    model = get_peft_model(base, lora)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert any("query.lora_A" in name for name in trainable) and any("value.lora_B" in name for name in trainable)
    assert not any("key" in name or "dense" in name for name in trainable if "lora" not in name)

    data = _toy_task()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(40):
        loss = model(**data).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5

    model.eval()
    with torch.no_grad():
        trained_logits = model(**data).logits
    model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").exists()

    fresh_base = bertkit.BertkitForSequenceClassification.from_pretrained(tmp_path / "base")
    reloaded = PeftModel.from_pretrained(fresh_base, tmp_path / "adapter").eval()
    with torch.no_grad():
        assert torch.allclose(reloaded(**data).logits, trained_logits, atol=1e-5)
        merged = reloaded.merge_and_unload()
        assert type(merged) is bertkit.BertkitForSequenceClassification
        assert torch.allclose(merged(**data).logits, trained_logits, atol=1e-5)


# ------------------------------------------------------------------------------------------------ allocator

MMAPPED_BYTES_AFTER_BIG_ALLOCATION = """
import ctypes, sys, torch
from bertkit.speed import keep_freed_memory

class MallInfo2(ctypes.Structure):  # glibc >= 2.33
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
block = torch.empty(100 * 2**20, dtype=torch.uint8)  # 100 MB, like a bert-base embedding gradient
print(int(applied), libc.mallinfo2().hblkhd)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_keep_freed_memory_takes_big_blocks_from_the_heap_not_mmap():
    """A 100 MB tensor is an mmap that free() unmaps (page-faulted back in on every step) by default; after
    keep_freed_memory() it comes from the heap, where a freed block stays for the next step."""
    results = {}
    for mode in ("default", "keep"):
        done = subprocess.run([sys.executable, "-c", MMAPPED_BYTES_AFTER_BIG_ALLOCATION, mode], capture_output=True,
                              text=True, check=True)
        results[mode] = [int(value) for value in done.stdout.split()]
    assert results["default"][0] == 0 and results["default"][1] >= 100 * 2**20
    assert results["keep"][0] == 1 and results["keep"][1] < 100 * 2**20
