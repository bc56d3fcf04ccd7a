"""An embedding model's ONNX export (`bertkit export` of an embed run): the transformer, its pooling and its Normalize
module in one graph whose output is `sentence_embedding`, what SentenceTransformer.encode returns, checked against
encode through the export's own tokenizer and runner (onnx_model.OnnxEmbedder). sentence-transformers' own ONNX path
(optimum) needs transformers < 5.6, so the pooling goes into the graph here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
import transformers
from torch import nn

from bertkit.errors import BertkitError
from bertkit.families import takes_token_types
from bertkit.onnx_model import PARITY_TOLERANCE, Head, TaskGraph


def onnx_graph(run_dir: str) -> TaskGraph:
    """What `bertkit export` puts in the graph for an embedding folder, what onnx_export.json adds for its runner,
    and the check of the written export against SentenceTransformer.encode."""
    model, reference = load_embedding_for_export(run_dir)
    # its dev ranking is `bertkit evaluate EXPORT dev.jsonl`'s (the embed task's first stage), not the export's
    return TaskGraph(model, EMBED_HEAD, summary={"embedding": embedding_settings(reference, model)},
                     check=lambda export_dir: {"encode": check_embedding_parity(reference, export_dir)},
                     dev_metrics=False, files=("retriever.json",))  # the run's first stage (tasks/first_stage.py)


class SentenceEmbedding(nn.Module):
    """A sentence-transformers embedding model as one module for the graph: its transformer (eager attention), its
    pooling (cls / mean / max over the real tokens, as 1_Pooling/config.json says) and its Normalize module; the
    output is `sentence_embedding`, what SentenceTransformer.encode returns. `load_embedding_for_export` checks
    that the folder holds nothing else (a Dense layer, a prompt left out of pooling)."""

    def __init__(self, transformer: nn.Module, pooling: str, normalize: bool):
        super().__init__()
        self.transformer, self.pooling, self.normalize = transformer, pooling, normalize
        self.config = transformer.config
        self.types = takes_token_types(transformer)

    def forward(self, input_ids, attention_mask, token_type_ids=None, **_):
        types = {"token_type_ids": token_type_ids} if self.types and token_type_ids is not None else {}
        hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask, **types).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        if self.pooling == "cls":
            pooled = hidden[:, 0]  # (B, H)
        elif self.pooling == "max":
            pooled = hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).amax(1)  # (B, H)
        else:
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (B, H)
        if self.normalize:
            pooled = nn.functional.normalize(pooled, p=2, dim=1)
        return EmbeddingOutput(sentence_embedding=pooled)


@dataclasses.dataclass
class EmbeddingOutput(transformers.utils.ModelOutput):
    sentence_embedding: torch.Tensor | None = None


EMBED_HEAD = Head(SentenceEmbedding, "embed", ("sentence_embedding",))
POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max"}


def load_embedding_for_export(run_dir: str):
    """An embedding folder's model as SentenceEmbedding in fp32 on CPU, and the SentenceTransformer it came from
    (the reference the export is checked against)."""
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(run_dir, device="cpu", local_files_only=True).eval()
    names = [type(module).__name__ for module in reference]
    extra = [name for name in names[1:] if name not in ("Pooling", "Normalize")]
    if names[0] != "Transformer" or "Pooling" not in names or extra:
        raise BertkitError(f"{run_dir} is a sentence-transformers model of {' -> '.join(names)}; export puts a "
                           "Transformer, Pooling and Normalize in the graph, nothing else — serve the folder itself")
    pooling = reference[names.index("Pooling")].get_config_dict()
    mode = pooling.get("pooling_mode") or next((m for k, m in POOLING_KEYS.items() if pooling.get(k)), None)
    if mode not in ("cls", "mean", "max") or pooling.get("include_prompt") is False:
        without = " without the prompt" if pooling.get("include_prompt") is False else ""
        raise BertkitError(f"{run_dir}: pooling {mode}{without} is not one export puts in the graph (cls, mean, max "
                           "over every token) — serve the folder itself")
    transformer = reference[0].auto_model.float()
    transformer.set_attn_implementation("eager")
    return SentenceEmbedding(transformer, mode, "Normalize" in names).eval(), reference


def embedding_settings(reference, model: SentenceEmbedding) -> dict:
    """What the export's runner (onnx_model.OnnxEmbedder) needs besides the graph and tokenizer."""
    return {"max_seq_length": int(reference.max_seq_length), "prompts": dict(reference.prompts or {}),
            "default_prompt_name": reference.default_prompt_name, "dimension": int(reference.get_embedding_dimension()),
            "pooling": model.pooling, "normalize": model.normalize}


def check_embedding_parity(reference, export_dir: Path) -> float:
    """Max abs difference between the export (tokenizer and graph, as predict / serve run it) and
    SentenceTransformer.encode on texts of several lengths; a BertkitError above PARITY_TOLERANCE."""
    from bertkit.onnx_model import load_onnx_embedder

    texts = ["a", "How far is the glacier from the town?", "The river bends twice before the bridge; " * 12]
    got = load_onnx_embedder(str(export_dir)).encode(texts, batch_size=2)
    worst = float(np.abs(got - reference.encode(texts, batch_size=2, show_progress_bar=False)).max())
    if worst > PARITY_TOLERANCE:
        raise BertkitError(f"the ONNX export differs from SentenceTransformer.encode by {worst:.2e} (more than "
                           f"{PARITY_TOLERANCE:g}) — please report it with the model's modules.json")
    return worst


__all__ = ["onnx_graph", "SentenceEmbedding", "load_embedding_for_export", "embedding_settings",
           "check_embedding_parity", "EMBED_HEAD"]
