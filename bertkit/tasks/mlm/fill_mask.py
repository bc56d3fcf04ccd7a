"""Serving a masked LM: the top tokens for each [MASK] of a text (fill-mask), and the held-out perplexity of a text
file over masks fixed by the run's seed (what the run reported as its "after" figure for the same text)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers

from bertkit.checkpoints import load_tokenizer
from bertkit.errors import BertkitError
from bertkit.rundir import atomic_output, check_output_path, write_json
from bertkit.tasks import read_settings
from bertkit.tasks.mlm.evaluation import masked_perplexity
from bertkit.tasks.mlm.examples import encode, read_examples
from bertkit.tasks.mlm.heads import load_mlm_model
from bertkit.tasks.mlm.masking import MaskingCollator, mask_once, with_example_ids
from bertkit.tasks.mlm.settings import Settings, legacy_settings
from bertkit.tasks.mlm.words import resolve_whole_word


TOP_K = 5  # tokens predicted per [MASK]

@dataclass
class FillMaskPredictor:
    """A masked LM ready to serve: its tokenizer, the model in eval mode, and the settings its run saved."""
    tokenizer: Any
    model: Any
    settings: Settings

    @torch.no_grad()
    def top_tokens(self, texts: list[str], top_k: int = TOP_K) -> list[list[list[dict]]]:
        """Per text, per [MASK] in it (left to right), the top_k tokens and their probabilities."""
        enc = self.tokenizer(texts, truncation=True, max_length=self.settings.max_length, padding=True,
                             return_tensors="pt")
        device = next(self.model.parameters()).device
        out = self.model.bert(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device),
                              token_type_ids=enc["token_type_ids"].to(device) if "token_type_ids" in enc else None)
        at_mask = enc["input_ids"].eq(self.tokenizer.mask_token_id)  # (B, T)
        logits = self.model.cls.predictions(out.last_hidden_state[at_mask.to(device)])  # (M, D) -> (M, V)
        scores, ids = logits.float().softmax(-1).topk(top_k, dim=-1)  # (M, k) each
        rows = at_mask.nonzero()[:, 0].tolist()  # (M,) the text of each mask
        result: list[list[list[dict]]] = [[] for _ in texts]
        for row, row_ids, row_scores in zip(rows, ids.tolist(), scores.tolist()):
            tokens = self.tokenizer.convert_ids_to_tokens(row_ids)
            result[row].append([{"token": t, "id": i, "score": s} for t, i, s in zip(tokens, row_ids, row_scores)])
        return result


def load_predictor(model_dir: str) -> FillMaskPredictor:
    """A trained mlm run (or any checkpoint with an MLM head) with the settings saved in its config.json."""
    config = transformers.AutoConfig.from_pretrained(model_dir)
    settings = read_settings(Settings, config, str(Path(model_dir) / "config.json"), legacy_settings(model_dir))
    model, report = load_mlm_model(model_dir, nsp=settings.nsp)
    if report["mlm_head"] == "new":
        raise BertkitError(f"{model_dir} has no MLM head (cls.predictions.* weights): its predictions would come "
                           "from a random head — use the output directory of `bertkit run mlm`")
    return FillMaskPredictor(load_tokenizer(model_dir), model.eval(), settings)


def read_masked_lines(path: str, mask_token: str) -> list[str]:
    """The lines of a text file that hold the mask token (others have nothing to fill)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if mask_token in line]


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64) -> int:
    """Fill-mask over a text file: for each line holding [MASK], one JSON line with the text and, per [MASK], the
    TOP_K tokens with their probabilities. Returns the lines written."""
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir])
    predictor = load_predictor(model_dir)
    texts = read_masked_lines(input_path, predictor.tokenizer.mask_token)
    if not texts:
        raise BertkitError(f"{input_path}: no line holds {predictor.tokenizer.mask_token} — nothing to fill")
    with atomic_output(output_path, "predictions") as handle:  # creates a missing folder, saying so
        for start in range(0, len(texts), batch_size):
            batch = texts[start:start + batch_size]
            for text, masks in zip(batch, predictor.top_tokens(batch, TOP_K)):
                handle.write(json.dumps({"text": text, "masks": masks}, ensure_ascii=False) + "\n")
    return len(texts)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Held-out perplexity of the model on a corpus file (read as the recipe reads data.eval: group blocks or line
    windows as the run made them), each example masked once from (seed, its number), as the run's held-out set
    was. NSP pairs are drawn from one seeded stream, not the training pipeline's per-pair draws."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    predictor = load_predictor(model_dir)
    settings, tokenizer = predictor.settings, predictor.tokenizer
    documents = read_examples(input_path)
    whole_word = resolve_whole_word(settings.whole_word, [paragraph for doc in documents for paragraph in doc])
    rows = encode(tokenizer, documents, settings.max_length, settings.mode, whole_word, settings.nsp, settings.seed)
    collator = MaskingCollator(tokenizer, settings.mlm_probability, settings.mask_replace_prob,
                               settings.random_replace_prob, whole_word, seed=settings.seed)
    held_out = mask_once(with_example_ids(rows), collator)
    result = {**masked_perplexity(predictor.model, held_out, tokenizer.pad_token_id, batch_size),
              "examples": len(held_out), "whole_word": whole_word}
    if output_path:
        write_json(Path(output_path), result)
    return result


__all__ = ["TOP_K", "FillMaskPredictor", "evaluate_file", "load_predictor", "predict_file", "read_masked_lines"]
