"""Small builders shared by the tests: tiny BERT configs and random batches."""

import csv
import json
from pathlib import Path

import pytest
import torch
import transformers

import bertkit

# Each bertkit head and the stock transformers class whose checkpoints it must read and write.
HEAD_PAIRS = {
    "base": (transformers.BertModel, bertkit.BertkitModel),
    "pretraining": (transformers.BertForPreTraining, bertkit.BertkitForPreTraining),
    "mlm": (transformers.BertForMaskedLM, bertkit.BertkitForMaskedLM),
    "sequence": (transformers.BertForSequenceClassification, bertkit.BertkitForSequenceClassification),
    "token": (transformers.BertForTokenClassification, bertkit.BertkitForTokenClassification),
    "qa": (transformers.BertForQuestionAnswering, bertkit.BertkitForQuestionAnswering),
    "choice": (transformers.BertForMultipleChoice, bertkit.BertkitForMultipleChoice),
}


def tiny_config_kwargs(**overrides) -> dict:
    kwargs = dict(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=64, type_vocab_size=2, num_labels=3,
    )
    kwargs.update(overrides)
    return kwargs


def random_batch(head: str, batch_size=3, seq_len=11, vocab_size=99, num_labels=3, padded=True, seed=0,
                 with_labels=True, problem_type="single_label_classification", num_choices=4) -> dict:
    """A batch of random ids whose rows have different real lengths (when padded), with labels for the head."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch_size, num_choices, seq_len) if head == "choice" else (batch_size, seq_len)
    input_ids = torch.randint(1, vocab_size, shape, generator=gen)
    attention_mask = torch.ones(shape, dtype=torch.long)
    if padded:
        lengths = torch.randint(2, seq_len + 1, shape[:-1], generator=gen)
        lengths.view(-1)[0] = seq_len  # at least one full row, so the batch is as long as its longest row
        attention_mask = (torch.arange(seq_len) < lengths.unsqueeze(-1)).long()
        input_ids = input_ids * attention_mask
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[..., seq_len // 2:] = 1
    token_type_ids = token_type_ids * attention_mask
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    if with_labels:
        batch.update(_labels(head, gen, batch_size, seq_len, vocab_size, num_labels, attention_mask, problem_type,
                             num_choices))
    return batch


def _labels(head, gen, batch_size, seq_len, vocab_size, num_labels, attention_mask, problem_type, num_choices):
    if head in ("mlm", "pretraining"):
        labels = torch.randint(0, vocab_size, (batch_size, seq_len), generator=gen)
        selected = (torch.rand(batch_size, seq_len, generator=gen) < 0.3) & attention_mask.bool()
        selected[:, 1] = True  # every row has at least one target
        out = {"labels": labels.masked_fill(~selected, -100)}
        if head == "pretraining":
            out["next_sentence_label"] = torch.randint(0, 2, (batch_size,), generator=gen)
        return out
    if head == "token":
        labels = torch.randint(0, num_labels, (batch_size, seq_len), generator=gen)
        return {"labels": labels.masked_fill(~attention_mask.bool(), -100)}
    if head == "qa":
        return {"start_positions": torch.randint(0, seq_len, (batch_size,), generator=gen),
                "end_positions": torch.randint(0, seq_len, (batch_size,), generator=gen)}
    if head == "choice":
        return {"labels": torch.randint(0, num_choices, (batch_size,), generator=gen)}
    if head == "sequence":
        if problem_type == "regression":
            return {"labels": torch.randn(batch_size, generator=gen)}
        if problem_type == "multi_label_classification":
            return {"labels": torch.randint(0, 2, (batch_size, num_labels), generator=gen).float()}
        return {"labels": torch.randint(0, num_labels, (batch_size,), generator=gen)}
    return {}


def output_tensors(output) -> dict:
    """The tensors of a ModelOutput that both implementations produce, by name."""
    return {k: v for k, v in output.items() if torch.is_tensor(v)}


LONG_DOCS = Path(__file__).resolve().parent.parent / "data" / "long_docs"


def shortest_long_docs(root: Path, per_label: int = 2) -> dict[str, Path]:
    """train.jsonl / dev.jsonl in `root`: the shortest `per_label` documents of each label of the shipped long-document
    sample (every one still several windows at max_length 64)."""
    files = {}
    for name in ("train", "dev"):
        rows = [json.loads(line) for line in (LONG_DOCS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        chosen = []
        for label in sorted({row["label"] for row in rows}):
            chosen += sorted((r for r in rows if r["label"] == label), key=lambda r: len(r["text"]))[:per_label]
        files[name] = root / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in chosen), encoding="utf-8")
    return files


def one_line_error(result, code, *fragments):
    """A CLI result that is one `error:` line with exit `code`, no traceback, holding every fragment."""
    assert result.exit_code == code, result.output
    message = result.output.strip()
    assert message.startswith("error: ") and "\n" not in message, message
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def write_csv(path: Path, header: list[str], rows: list[list]) -> str:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def one_sgd_step(folder: Path, batch_size: int, accumulation: int):
    """TrainingArguments of exactly one plain SGD step (lr 0.5, no decay, no clipping, no schedule) at `batch_size` x
    `accumulation`, and a 99-token tokenizer that pads with id 0: the gradient accumulation tests compare the update of
    8 x 1 with 2 x 4 on the same rows, which must be equal when the loss is exact."""
    args = transformers.TrainingArguments(
        output_dir=str(folder / f"{batch_size}x{accumulation}"), per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation, max_steps=1, learning_rate=0.5, optim="sgd",
        lr_scheduler_type="constant", weight_decay=0.0, max_grad_norm=0.0, use_cpu=True, report_to="none",
        save_strategy="no", logging_strategy="no", seed=0, dataloader_drop_last=False)
    return args, transformers.BertTokenizerFast(vocab={f"t{i}": i for i in range(99)}, pad_token="t0")


def tiny_stock_head(head_class, path: Path, tokenizer_dir: str, **config) -> str:
    """A tiny random stock BERT head with a real tokenizer: a model directory predict and serve take as it is."""
    torch.manual_seed(0)
    bert = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=128, **config)
    head_class(bert).save_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(path)
    return str(path)


def tiny_task_models(root: Path, tokenizer_dir: str) -> dict[str, str]:
    """One tiny model directory per task (classify, ner, qa, choice, mlm) under `root`."""
    labels = {"id2label": {0: "negative", 1: "positive"}, "label2id": {"negative": 0, "positive": 1}}
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    return {
        "classify": tiny_stock_head(transformers.BertForSequenceClassification, root / "classify", tokenizer_dir,
                                    **labels),
        "ner": tiny_stock_head(transformers.BertForTokenClassification, root / "ner", tokenizer_dir,
                               id2label=dict(enumerate(tags)), label2id={t: i for i, t in enumerate(tags)}),
        "qa": tiny_stock_head(transformers.BertForQuestionAnswering, root / "qa", tokenizer_dir),
        "choice": tiny_stock_head(transformers.BertForMultipleChoice, root / "choice", tokenizer_dir),
        "mlm": tiny_stock_head(transformers.BertForMaskedLM, root / "mlm", tokenizer_dir),
    }


def assert_close_records(got, expected) -> None:
    """Equal records (what predict writes, what serve answers), but floats (scores, probabilities) within 1e-4."""
    if isinstance(expected, float):
        assert got == pytest.approx(expected, abs=1e-4)
    elif isinstance(expected, dict):
        assert got.keys() == expected.keys()
        for key in expected:
            assert_close_records(got[key], expected[key])
    elif isinstance(expected, list):
        assert len(got) == len(expected)
        for item, reference in zip(got, expected):
            assert_close_records(item, reference)
    else:
        assert got == expected


def run_in_process(*args, cwd, env: dict | None = None):
    """A `bertkit` command run in this process, as the console script runs it (bertkit.cli's app through typer's
    runner, in `cwd`, with `env` set for the call): the same code as the installed command without its seconds of
    interpreter start-up and imports, for tests of what a command answers rather than of the entry point (which
    tests/test_entry_point.py, tests/test_startup.py and tests/test_wheel.py run as installed). Returns what a finished
    subprocess gives: returncode, stdout, stderr."""
    import contextlib
    import subprocess

    from typer.testing import CliRunner

    from bertkit.cli import app

    with contextlib.chdir(cwd):
        result = CliRunner().invoke(app, [str(arg) for arg in args], env=env)
    return subprocess.CompletedProcess(["bertkit", *map(str, args)], result.exit_code, result.stdout, result.stderr)
