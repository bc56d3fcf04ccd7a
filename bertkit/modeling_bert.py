"""BERT, written out in one file: the encoder and every head people fine-tune.

Token + segment + learned position embeddings, summed and layer-normed; a stack of post-LayerNorm encoder layers
(self-attention, then a GELU feed-forward, each wrapped in residual + LayerNorm); a tanh pooler over [CLS]; and the
heads: pretraining (MLM + NSP), masked LM, sequence classification, token classification, question answering and
multiple choice, each returning transformers' output dataclass with a loss that stays exact under gradient
accumulation. Parameter names are transformers' own (`bert.encoder.layer.0.attention.self.query`, ...), so stock BERT
checkpoints load with no conversion and checkpoints saved here load in stock transformers as plain BERT.

Attention dispatches through transformers' attention registry (eager / sdpa / flash where installed), and the
padding mask is built once per forward. A batch with padding runs on its real tokens only (`config.unpad`, or
`unpad=` per call; see `bertkit.padding`), packed once per forward and padded once for the output. With
`config.sparse_prediction` (or `sparse_prediction=` per call) and labels, the MLM heads score only the labelled
positions. bertkit is an encoder: decoder settings and inputs are refused, not ignored.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import BertForPreTrainingOutput
from transformers.utils import is_tracing

from .configuration_bert import BertkitConfig
from .losses import IGNORE_INDEX, infer_problem_type, normalise, sequence_loss, token_cross_entropy
from .padding import Dropout, Encoded, Unpadding, attend_buckets, attend_varlen, fast_dropout
from . import speed

# Unpadded attention under sdpa / eager groups rows whose lengths round up to the same multiple of this many tokens
# and pads each group to its own longest row: attention then costs about sum(L^2) instead of B * T^2.
ATTENTION_BUCKET_TOKENS = 64


# ---------------------------------------- Encoder


class BertkitEmbeddings(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None) -> torch.Tensor:
        """Ids (B, T) -> (B, T, D). Unpadded: ids (N,) with their position_ids (N,) -> (N, D)."""
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, T, D) or (N, D)
        if position_ids is None:  # (T,): the same positions for every row, broadcast over the batch
            position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)
        if token_type_ids is None:  # segment A everywhere: add row 0 without materialising a (B, T) index tensor
            embeddings = inputs_embeds + self.token_type_embeddings.weight[0]
        else:
            embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


def eager_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Plain softmax attention. q, k, v: (B, H, T, hd); mask broadcastable to (B, 1, T, T): additive, or boolean
    (True = attend, as sdpa takes it), or None. Returns the context (B, T, H, hd) and the probabilities."""
    scores = torch.matmul(query * scaling, key.transpose(2, 3))  # (B, H, T, T); scaling q costs T / hd times less
    if attention_mask is not None and attention_mask.dtype == torch.bool:  # an additive mask's backward is free
        attention_mask = _additive_mask(attention_mask, scores.dtype)
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = fast_dropout(scores.softmax(dim=-1), dropout, module.training)
    return torch.matmul(probs, value).transpose(1, 2), probs


# Rows per block of `blockwise_attention`: as many as keep a block's (b * H, T, T) scores near this many elements
# (2 MB in bf16), so they stay in cache between the matmul, the softmax and the second matmul.
SCORES_PER_BLOCK = 1 << 20
# Below this many scores (B * H * T * T) sdpa's single pass costs less than blockwise's three calls: one sentence of
# 32 tokens ran 0.03 ms in sdpa against 0.05 (MiniLM's heads, bf16); the two met at 32-48 thousand.
BLOCKWISE_FROM_SCORES = 1 << 15


def blockwise_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Softmax attention a block of rows at a time, for inference on CPU, where it replaces sdpa: the same numbers as
    `eager_attention`. q, k, v (B, H, T, hd), best contiguous; mask as for `eager_attention` -> context (B, T, H, hd).

    CPU sdpa's flash kernel runs two small matmuls per 32 queries, head and row; with BERT's 32- or 64-wide heads
    their call overhead bounds it. Here each block is three large calls (scaled scores plus mask in one `baddbmm`,
    softmax, `bmm`), and the block is small enough for its scores to stay in cache and out of fresh pages."""
    batch, heads, seqlen, head_dim = query.shape
    bias = _additive_mask(attention_mask, query.dtype)  # (B, 1, 1 or T, T) or None
    context = query.new_empty(batch, heads, seqlen, head_dim)  # (B, H, T, hd)
    rows = max(1, SCORES_PER_BLOCK // (heads * seqlen * seqlen))
    for start in range(0, batch, rows):
        part = slice(start, start + rows)
        q, k, v = (x[part].flatten(0, 1) for x in (query, key, value))  # (b*H, T, hd)
        if bias is None:
            scores = torch.baddbmm(q.new_empty(1, 1, 1), q, k.transpose(1, 2), beta=0, alpha=scaling)  # (b*H, T, T)
        else:
            block_bias = bias[part].expand(-1, heads, -1, -1).flatten(0, 1)  # (b*H, 1 or T, T)
            scores = torch.baddbmm(block_bias, q, k.transpose(1, 2), alpha=scaling)  # (b*H, T, T)
        torch.bmm(scores.softmax(dim=-1), v, out=context[part].flatten(0, 1))  # (b*H, T, hd)
    return context.transpose(1, 2), None


def _additive_mask(attention_mask, dtype):
    """A boolean mask (True = attend) as 0 / the dtype's lowest value; an additive one in `dtype`; None stays None."""
    if attention_mask is None:
        return None
    if attention_mask.dtype == torch.bool:
        return torch.zeros(attention_mask.shape, dtype=dtype, device=attention_mask.device).masked_fill(
            ~attention_mask, torch.finfo(dtype).min)
    return attention_mask.to(dtype)


def _traced() -> bool:
    """Under torch.compile or torch.export, where the CPU-inference shortcuts step aside for the plain ops."""
    return torch.compiler.is_compiling() or torch.compiler.is_exporting()


def stacked(parts: list[torch.Tensor]) -> torch.Tensor:
    """torch.cat(parts) along dim 0, as a view when the parts already lie side by side in one buffer (see
    `BertkitSelfAttention.share_qkv_buffer`) and no gradient is wanted; otherwise a copy."""
    if _traced():  # traced tensors have no storage to compare
        return torch.cat(parts)
    first = parts[0]
    offset, storage, size = first.storage_offset(), first.untyped_storage().data_ptr(), first.numel()
    side_by_side = all(part.is_contiguous() and part.dtype == first.dtype and part.shape[1:] == first.shape[1:]
                       and part.untyped_storage().data_ptr() == storage and part.storage_offset() == offset + i * size
                       for i, part in enumerate(parts))
    if side_by_side and not (torch.is_grad_enabled() and any(part.requires_grad for part in parts)):
        return first.as_strided((sum(len(part) for part in parts), *first.shape[1:]), first.stride())
    return torch.cat(parts)


class BertkitSelfAttention(nn.Module):
    is_causal = False  # read by transformers' sdpa / flash kernels

    def __init__(self, config: BertkitConfig):
        super().__init__()
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(f"hidden_size ({config.hidden_size}) must be a multiple of num_attention_heads "
                             f"({config.num_attention_heads}): each head gets hidden_size / num_attention_heads")
        self.config = config
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = Dropout(config.attention_probs_dropout_prob)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:2], -1, self.head_dim).transpose(1, 2)  # (B, T, D) -> (B, H, T, hd)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, unpadding=None):
        if unpadding is not None:
            return self._forward_unpadded(hidden_states, attention_mask, unpadding), None
        q, k, v = (self.split_heads(x) for x in self.project_qkv(hidden_states).chunk(3, dim=-1))
        attention = self._attention_function("eager" if output_attentions else self.config._attn_implementation, q)
        context, probs = attention(self, q, k, v, attention_mask, scaling=self.scaling, dropout=self._dropout_p())
        return context.reshape(*hidden_states.shape[:2], -1), probs  # (B, T, H, hd) -> (B, T, D)

    def project_qkv(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Query, key and value side by side: (..., D) -> (..., 3D). One matmul with the three weights stacked, which
        runs faster than three (and casts the input once under autocast), unless a projection is not a plain
        nn.Linear (a LoRA or quantised wrapper): then each runs as itself."""
        projections = (self.query, self.key, self.value)
        if speed.on("fused_qkv") and all(type(proj) is nn.Linear for proj in projections):
            weight = stacked([proj.weight for proj in projections])  # (3D, D)
            bias = stacked([proj.bias for proj in projections])  # (3D,)
            return F.linear(hidden_states, weight, bias)
        return torch.cat([proj(hidden_states) for proj in projections], dim=-1)

    def share_qkv_buffer(self) -> None:
        """Put the query, key and value weights (and biases) side by side in one buffer, each parameter a view of its
        part, so that `project_qkv` reads the stacked weight without copying it at every call (at inference; the
        parameters keep their names, shapes and values). A later cast or load gives them their own storage again,
        and `project_qkv` then goes back to copying."""
        projections = (self.query, self.key, self.value)
        if not all(type(proj) is nn.Linear for proj in projections):
            return
        with torch.no_grad():
            for name in ("weight", "bias"):
                parts = [getattr(proj, name) for proj in projections]
                buffer = torch.cat([part.detach() for part in parts])
                for part, view in zip(parts, buffer.split([len(part) for part in parts])):
                    part.data = view

    def _dropout_p(self) -> float:
        return self.dropout.p if self.training else 0.0

    def _attention_function(self, implementation: str, query: torch.Tensor):
        """The registry's kernel for `implementation`, but for sdpa on CPU: `eager_attention` with attention dropout
        (CPU sdpa has no fused kernel with dropout and falls back to the same unfused arithmetic as eager, only with
        torch's slower dropout mask, see `fast_dropout`), and `blockwise_attention` at bf16 inference."""
        if implementation == "sdpa" and query.device.type == "cpu":
            if self._dropout_p() > 0:
                if speed.on("eager_dropout"):
                    return eager_attention
            elif self._runs_blockwise(query):
                return blockwise_attention
        return ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention)

    @staticmethod
    def _runs_blockwise(query: torch.Tensor) -> bool:
        """bf16 inference with enough scores to pay for three calls: 1.5-2.7x sdpa's speed here (AMD EPYC, 2 threads;
        32- and 64-wide heads, 64-512 tokens). In fp32 the two ran within 15 % either way, so fp32 keeps sdpa."""
        batch, heads, seqlen, _ = query.shape
        return (query.dtype == torch.bfloat16 and not torch.is_grad_enabled()
                and batch * heads * seqlen * seqlen >= BLOCKWISE_FROM_SCORES and speed.on("blockwise_attention")
                and not _traced())

    def _forward_unpadded(self, hidden_states, attention_mask, unpadding: Unpadding) -> torch.Tensor:
        """hidden_states (N, D), the real tokens only -> context (N, D); each sequence attends to itself only."""
        num_tokens = hidden_states.shape[0]
        qkv = self.project_qkv(hidden_states).view(num_tokens, -1, self.head_dim)  # (N, 3D) -> (N, 3H, hd)
        if self.config._attn_implementation.startswith("flash_attention"):
            return attend_varlen(self._attend, qkv, unpadding).reshape(num_tokens, -1)  # (N, H, hd) -> (N, D)
        return attend_buckets(self._attend, qkv, attention_mask, unpadding).reshape(num_tokens, -1)

    def _attend(self, q, k, v, attention_mask, **boundaries) -> torch.Tensor:
        """The configured kernel with this module's scaling and dropout: q, k, v (B, H, T, hd) -> (B, T, H, hd)."""
        attention = self._attention_function(self.config._attn_implementation, q)
        context, _ = attention(self, q, k, v, attention_mask, scaling=self.scaling, dropout=self._dropout_p(),
                               **boundaries)
        return context


class BertkitSelfOutput(nn.Module):
    """Output projection, dropout, then residual + LayerNorm (BERT is post-LN)."""

    def __init__(self, config: BertkitConfig, in_features: int):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class BertkitAttention(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.self = BertkitSelfAttention(config)
        self.output = BertkitSelfOutput(config, config.hidden_size)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, unpadding=None):
        context, probs = self.self(hidden_states, attention_mask, output_attentions, unpadding)
        return self.output(context, hidden_states), probs


class BertkitIntermediate(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]
        self.exact_gelu = config.hidden_act == "gelu"

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self._fuses_gelu(hidden_states):  # oneDNN applies GELU as the matmul writes its output
            return torch.ops.mkldnn._linear_pointwise(hidden_states, self.dense.weight, self.dense.bias, "gelu", [],
                                                      "none")
        return self.intermediate_act_fn(self.dense(hidden_states))

    def _fuses_gelu(self, hidden_states: torch.Tensor) -> bool:
        """bf16 inference on CPU with BERT's exact GELU: the (N, 4D) output is written once, where a separate GELU
        reads and writes it again (out of cache at thousands of tokens: 32 ms against 14 for a 8,700 x 384 -> 1,536
        bf16 layer here). Only where oneDNN runs bf16 natively (AVX-512 BF16, AMX): on a CPU with AVX2 alone it has no
        such kernel and refuses the call."""
        return (self.exact_gelu and hidden_states.dtype == torch.bfloat16 and hidden_states.device.type == "cpu"
                and type(self.dense) is nn.Linear and self.dense.weight.dtype == torch.bfloat16
                and self.dense.bias is not None
                and not (torch.is_grad_enabled() and self.dense.weight.requires_grad)
                and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
                and speed.on("fused_gelu") and not _traced())


class BertkitLayer(GradientCheckpointingLayer):
    """One encoder layer. As a GradientCheckpointingLayer it checkpoints itself when the model's activation
    checkpointing is on (and in training with gradients): positional arguments go through the checkpoint, keyword
    arguments (`output_attentions`, `unpadding`) are bound as they are."""

    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.attention = BertkitAttention(config)
        self.intermediate = BertkitIntermediate(config)
        self.output = BertkitSelfOutput(config, config.intermediate_size)  # same shape as BERT's "BertOutput"
        self.chunk_size_feed_forward = config.chunk_size_feed_forward  # 0 = the whole feed-forward at once

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, unpadding=None):
        """hidden_states (B, T, D), or (N, D) with `unpadding` saying where those N real tokens sit."""
        attended, probs = self.attention(hidden_states, attention_mask, output_attentions, unpadding)
        if self.chunk_size_feed_forward:
            return self._chunked_feed_forward(attended), probs
        return self.feed_forward(attended), probs

    def feed_forward(self, attended: torch.Tensor) -> torch.Tensor:
        return self.output(self.intermediate(attended), attended)

    def _chunked_feed_forward(self, attended: torch.Tensor) -> torch.Tensor:
        """The feed-forward on `chunk_size_feed_forward` positions at a time (it is position-wise: the same result,
        a smaller (., intermediate_size) activation). Padded (B, T, D) splits along T, as transformers' BERT;
        packed (N, D) along N. A last, shorter chunk takes the remainder."""
        dim = 0 if attended.dim() == 2 else 1
        chunks = attended.split(self.chunk_size_feed_forward, dim=dim)  # (N_c, D) or (B, T_c, D) each
        return torch.cat([self.feed_forward(chunk) for chunk in chunks], dim=dim)


class BertkitEncoder(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.layer = nn.ModuleList([BertkitLayer(config) for _ in range(config.num_hidden_layers)])
        # Set, with each layer's own flag, by PreTrainedModel.activation_checkpointing_enable(); the layers
        # checkpoint themselves (see BertkitLayer), this says whether it is on for the encoder.
        self.gradient_checkpointing = False

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, output_hidden_states=None,
                unpadding=None):
        """`output_hidden_states`: None, or the indices of the hidden states to return (0: the embeddings), each
        (B, T, D), re-padded when running unpadded; the others are None, as in transformers."""
        repad, keep = unpadding.unpack if unpadding is not None else (lambda hidden: hidden), output_hidden_states
        all_hidden = None if keep is None else [repad(hidden_states) if 0 in keep else None]
        all_attentions = [] if output_attentions else None
        for index, layer in enumerate(self.layer, start=1):  # hidden_states positional: a reentrant checkpoint
            hidden_states, probs = layer(hidden_states, attention_mask, output_attentions=output_attentions,
                                         unpadding=unpadding)  # ... passes gradients through it
            if keep is not None:
                all_hidden.append(repad(hidden_states) if index in keep else None)
            if output_attentions:
                all_attentions.append(probs)
        return hidden_states, _tuple_or_none(all_hidden), _tuple_or_none(all_attentions)


def _hidden_state_selection(value, num_layers: int) -> set[int] | None:
    """`output_hidden_states` as transformers 5 reads it (utils/output_capturing.py): a flag, or the index / indices
    of the num_layers + 1 hidden states to keep (negative: from the end; out of range or falsy: none)."""
    if isinstance(value, bool) or not value:
        return set(range(num_layers + 1)) if value else None
    count, selected = num_layers + 1, [value] if isinstance(value, int) else list(value)
    return {index % count for index in selected if -count <= index < count}


def _tuple_or_none(items):
    return tuple(items) if items is not None else None


class BertkitPooler(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(hidden_states[:, 0]))  # (B, T, D) -> [CLS] -> (B, D)


# ---------------------------------------- Base classes


class BertkitPreTrainedModel(PreTrainedModel):
    config_class = BertkitConfig
    config: BertkitConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_attention_backend = True
    _no_split_modules = ["BertkitEmbeddings", "BertkitLayer"]
    # Checkpoints written by transformers carry these buffers; they are recomputed here, so loading skips them.
    _keys_to_ignore_on_load_unexpected = [r"position_ids", r"embeddings\.token_type_ids"]

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, BertkitLMPredictionHead):
            nn.init.zeros_(module.bias)

    def unpadding(self, attention_mask, unpad=None, output_attentions=None, **kwargs) -> Unpadding | None:
        """Where the real tokens are, if this call runs unpadded; None if it takes the padded path.

        Unpadded when unpadding is enabled (`unpad=` in the call, else `config.unpad`), the mask is a (B, T) mask
        with at least one padding position, attention probabilities are not requested, and the call is not being
        traced into a graph (export / compile / jit / fx: the padded path needs no branch on the mask's values)."""
        if attention_mask is None or attention_mask.dim() != 2 or not _call_or_config(unpad, "unpad", self.config):
            return None
        if _call_or_config(output_attentions, "output_attentions", self.config) or is_tracing(attention_mask):
            return None
        if bool(attention_mask.all()) or not speed.on("unpadding"):
            return None
        return Unpadding.from_mask(attention_mask)


def _call_or_config(value, name, config):
    """A per-call setting, or the config's when the call leaves it None."""
    return getattr(config, name, True) if value is None else value


def _maybe_tuple(output, return_dict, config):
    """A tuple (the non-None fields, in order) when `return_dict=False` is asked for in the call or, if the call
    leaves it None, in the config: as transformers models do."""
    return output if _call_or_config(return_dict, "return_dict", config) else output.to_tuple()


# What only a decoder reads. An encoder given one would compute something else than the caller asked for.
DECODER_INPUTS = ("encoder_hidden_states", "encoder_attention_mask", "past_key_values", "cache")


def _refuse_decoder_inputs(kwargs) -> None:
    """bertkit is an encoder: decoder inputs are refused by name, never dropped."""
    for name in DECODER_INPUTS:
        if kwargs.get(name) is not None:
            raise ValueError(f"{name} is a decoder input: bertkit's BERT is an encoder without cross-attention "
                             "or a cache")
    if kwargs.get("use_cache"):
        raise ValueError("use_cache=True: bertkit's BERT is an encoder and keeps no cache (pass nothing, or False)")


def _refuse_decoder_config(config) -> None:
    """Stock BertConfig can describe a decoder (causal self-attention, cross-attention); bertkit builds encoders."""
    for flag in ("is_decoder", "add_cross_attention"):
        if getattr(config, flag, False):
            raise ValueError(f"config.{flag}=True: bertkit's BERT is an encoder (bidirectional self-attention, "
                             "no cross-attention); use transformers' BertLMHeadModel for a decoder")


class BertkitModel(BertkitPreTrainedModel):
    def __init__(self, config: BertkitConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        _refuse_decoder_config(config)
        self.embeddings = BertkitEmbeddings(config)
        self.encoder = BertkitEncoder(config)
        self.pooler = BertkitPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                output_attentions=None, output_hidden_states=None, return_dict=None,
                **kwargs) -> BaseModelOutputWithPoolingAndCrossAttentions:
        """`unpad=` (bool) in kwargs overrides `config.unpad` for this call; loss kwargs are ignored here."""
        encoded = self.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                              output_attentions, output_hidden_states, **kwargs)
        hidden = encoded.padded()  # (B, T, D)
        output = BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=hidden,
            pooler_output=self.pooler(hidden) if self.pooler is not None else None,
            hidden_states=encoded.hidden_states,
            attentions=encoded.attentions,
        )
        return _maybe_tuple(output, return_dict, self.config)

    def encode(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
               inputs_embeds=None, output_attentions=None, output_hidden_states=None, **kwargs) -> Encoded:
        """The encoder's output before re-padding: packed (N, D) with its Unpadding when the call runs unpadded (see
        `unpadding`), else (B, T, D). The heads that work per token read it, so a forward packs and pads once."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        _refuse_decoder_inputs(kwargs)
        options = {  # from the call, else from the config
            "output_attentions": bool(_call_or_config(output_attentions, "output_attentions", self.config)),
            "output_hidden_states": _hidden_state_selection(_call_or_config(  # the indices to keep, or None
                output_hidden_states, "output_hidden_states", self.config), self.config.num_hidden_layers),
        }
        unpadding = self.unpadding(attention_mask, output_attentions=options["output_attentions"], **kwargs)
        if unpadding is None:
            embedded = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)  # (B, T, D)
            mask = self._attention_mask(attention_mask, embedded, options["output_attentions"])
        else:
            if self.config._attn_implementation in ("sdpa", "eager") and speed.on("buckets"):  # masks are tensors
                unpadding = unpadding.with_length_buckets(ATTENTION_BUCKET_TOKENS)
            embedded = self._embed_unpadded(unpadding, input_ids, token_type_ids, position_ids, inputs_embeds)
            shape_only = embedded.new_empty((unpadding.batch, unpadding.seqlen, 0))  # (B, T, 0): the mask's metadata
            mask = self._attention_mask(attention_mask, shape_only, output_attentions=False)
        hidden, all_hidden, all_attentions = self.encoder(embedded, mask, unpadding=unpadding, **options)
        return Encoded(hidden, unpadding, all_hidden, all_attentions)

    def _embed_unpadded(self, unpadding, input_ids, token_type_ids, position_ids, inputs_embeds) -> torch.Tensor:
        """Embeddings of the real tokens only: (N, D)."""
        if position_ids is None:
            position_ids = unpadding.position_index  # (N,): the column each token sits in, as the padded path
        else:
            position_ids = unpadding.pack(position_ids.expand(unpadding.batch, -1))  # (B, T) or (1, T) -> (N,)
        packed = [unpadding.pack(tensor) for tensor in (input_ids, token_type_ids, inputs_embeds)]
        return self.embeddings(packed[0], packed[1], position_ids, packed[2])

    def _attention_mask(self, attention_mask, embedded, output_attentions):
        """The padding mask in the form the attention backend wants, built once for all layers (None if no padding).

        A (B, T) padding mask masks the same keys for every query, so a 4-D result is cut to (B, 1, 1, T) and
        broadcast: the same numbers, and the CPU sdpa kernel runs faster than with a materialised (B, 1, T, T)."""
        config = self.config
        if output_attentions and config._attn_implementation != "eager":
            config = _with_attn_implementation(config, "eager")
        mask = create_bidirectional_mask(config=config, inputs_embeds=embedded, attention_mask=attention_mask)
        if torch.is_tensor(mask) and mask.dim() == 4 and attention_mask is not None and attention_mask.dim() == 2:
            mask = mask[:, :, :1]  # (B, 1, T, T) -> (B, 1, 1, T)
        return mask


def _with_attn_implementation(config, implementation):
    """A shallow copy of the config that asks for another attention backend (for output_attentions under sdpa)."""
    clone = type(config).__new__(type(config))
    clone.__dict__.update(config.__dict__)
    clone._attn_implementation_internal = implementation
    return clone


# ---------------------------------------- Heads


class BertkitPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class BertkitLMPredictionHead(nn.Module):
    """Transform, then a decoder whose weight is tied to the word embeddings; its bias is `cls.predictions.bias`."""

    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.transform = BertkitPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=True)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(hidden_states))


class BertkitOnlyMLMHead(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.predictions = BertkitLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return self.predictions(sequence_output)


class BertkitPreTrainingHeads(nn.Module):
    def __init__(self, config: BertkitConfig):
        super().__init__()
        self.predictions = BertkitLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, sequence_output, pooled_output):
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


_TIED_MLM_WEIGHTS = {
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}


class _MLMOutputEmbeddingsMixin:
    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias


class BertkitForPreTraining(_MLMOutputEmbeddingsMixin, BertkitPreTrainedModel):
    _tied_weights_keys = _TIED_MLM_WEIGHTS

    def __init__(self, config: BertkitConfig):
        super().__init__(config)
        self.bert = BertkitModel(config)
        self.cls = BertkitPreTrainingHeads(config)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, next_sentence_label=None, output_attentions=None,
                output_hidden_states=None, return_dict=None, **kwargs) -> BertForPreTrainingOutput:
        encoded = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                                   output_attentions, output_hidden_states, **kwargs)
        prediction_logits, loss = _mlm_logits_and_loss(self, encoded, labels, kwargs)
        nsp_logits = self.cls.seq_relationship(self.bert.pooler(encoded.first_tokens()))  # (B, 2)
        if labels is not None and next_sentence_label is not None:
            loss = loss + self._nsp_loss(nsp_logits, next_sentence_label, labels, kwargs.get("num_items_in_batch"))
        output = BertForPreTrainingOutput(loss=loss, prediction_logits=prediction_logits,
                                          seq_relationship_logits=nsp_logits,
                                          hidden_states=encoded.hidden_states, attentions=encoded.attentions)
        return _maybe_tuple(output, return_dict, self.config)

    @staticmethod
    def _nsp_loss(nsp_logits, nsp_labels, mlm_labels, num_items_in_batch):
        """NSP mean for this micro-batch. Under accumulation Trainer stops dividing by the step count, so the mean is
        weighted by this micro-batch's share of the step's masked tokens (exact when the shares are equal)."""
        loss = F.cross_entropy(nsp_logits.float(), nsp_labels.view(-1))
        if num_items_in_batch is None:
            return loss
        return loss * normalise(mlm_labels.ne(IGNORE_INDEX).sum().float(), None, num_items_in_batch)


def _mlm_logits_and_loss(model, encoded: Encoded, labels, kwargs):
    """Vocabulary logits and the MLM loss. Sparse prediction (`config.sparse_prediction`, or `sparse_prediction=` in
    the call) with labels scores the labelled positions only: logits are then (M, V) for the M positions with
    labels != -100, in row-major order (`labels[labels != -100]`), which skips most of the largest matmul. Otherwise
    (B, T, V), as in stock BERT, computed on the real tokens only when unpadded."""
    if labels is None:
        return encoded.per_token(model.cls.predictions), None
    labels = labels.to(encoded.hidden.device)
    if _call_or_config(kwargs.get("sparse_prediction"), "sparse_prediction", model.config):
        selected = labels.ne(IGNORE_INDEX)  # (B, T)
        logits = model.cls.predictions(encoded.select(selected))  # (M, D) -> (M, V)
        labels = labels[selected]  # (M,)
    else:
        logits = encoded.per_token(model.cls.predictions)  # (B, T, V)
    return logits, token_cross_entropy(logits, labels, kwargs.get("num_items_in_batch"))


class BertkitForMaskedLM(_MLMOutputEmbeddingsMixin, BertkitPreTrainedModel):
    """Masked language modelling. `logits` is (B, T, V); with sparse prediction and `labels`, (M, V) for the
    labelled positions only (see `_mlm_logits_and_loss`), in training and evaluation alike."""

    _tied_weights_keys = _TIED_MLM_WEIGHTS

    def __init__(self, config: BertkitConfig):
        super().__init__(config)
        self.bert = BertkitModel(config, add_pooling_layer=False)
        self.cls = BertkitOnlyMLMHead(config)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs) -> MaskedLMOutput:
        encoded = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                                   output_attentions, output_hidden_states, **kwargs)
        logits, loss = _mlm_logits_and_loss(self, encoded, labels, kwargs)
        output = MaskedLMOutput(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                attentions=encoded.attentions)
        return _maybe_tuple(output, return_dict, self.config)


def _classifier_dropout(config: BertkitConfig) -> Dropout:
    rate = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
    return Dropout(rate)


def mean_pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Average of the real tokens' vectors. (B, T, D), (B, T) -> (B, D)."""
    if attention_mask is None:
        return last_hidden_state.mean(dim=1)
    weights = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)  # (B, T, 1)
    return (last_hidden_state * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


class BertkitForSequenceClassification(BertkitPreTrainedModel):
    """Single-label, multi-label or regression, chosen by `config.problem_type` (or inferred from the labels as
    transformers does). Pools with BERT's [CLS] pooler or, with `classifier_pooling="mean"`, a masked mean."""

    def __init__(self, config: BertkitConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertkitModel(config, add_pooling_layer=config.classifier_pooling == "cls")
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs) -> SequenceClassifierOutput:
        encoded = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                                   output_attentions, output_hidden_states, **kwargs)
        if self.config.classifier_pooling == "mean":
            pooled = mean_pool(encoded.padded(), attention_mask)
        else:
            pooled = self.bert.pooler(encoded.first_tokens())  # (B, D)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        loss = None
        if labels is not None:
            self.config.problem_type = infer_problem_type(self.config, labels)
            loss = sequence_loss(logits, labels, self.config.problem_type, kwargs.get("num_items_in_batch"))
        output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                          attentions=encoded.attentions)
        return _maybe_tuple(output, return_dict, self.config)


class BertkitForTokenClassification(BertkitPreTrainedModel):
    def __init__(self, config: BertkitConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertkitModel(config, add_pooling_layer=False)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs) -> TokenClassifierOutput:
        encoded = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                                   output_attentions, output_hidden_states, **kwargs)
        logits = encoded.per_token(self._classify)  # (B, T, num_labels)
        loss = token_cross_entropy(logits, labels, kwargs.get("num_items_in_batch")) if labels is not None else None
        output = TokenClassifierOutput(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                       attentions=encoded.attentions)
        return _maybe_tuple(output, return_dict, self.config)

    def _classify(self, hidden_states):
        return self.classifier(self.dropout(hidden_states))


class BertkitForQuestionAnswering(BertkitPreTrainedModel):
    """Span extraction: start and end logits per token. Positions outside the sequence are ignored in the loss.

    The loss is the cross-entropy of the returned logits over all T positions, as in transformers. Unpadded, the pad
    tokens' logits are 0 (transformers computes values for them), so with padding the loss differs from the padded
    path's; `unpad=False` gives transformers' loss exactly.

    The batch has no `labels` key, so Trainer passes no `num_items_in_batch` and divides by the accumulation steps
    itself; a per-micro-batch mean is then exact for equal micro-batches."""

    def __init__(self, config: BertkitConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertkitModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, start_positions=None, end_positions=None, output_attentions=None,
                output_hidden_states=None, return_dict=None, **kwargs) -> QuestionAnsweringModelOutput:
        encoded = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                                   output_attentions, output_hidden_states, **kwargs)
        logits = encoded.per_token(self.qa_outputs)  # (B, T, 2)
        start_logits, end_logits = (part.squeeze(-1).contiguous() for part in logits.split(1, dim=-1))  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = (self._span_loss(start_logits, start_positions) + self._span_loss(end_logits, end_positions)) / 2
        output = QuestionAnsweringModelOutput(loss=loss, start_logits=start_logits, end_logits=end_logits,
                                              hidden_states=encoded.hidden_states, attentions=encoded.attentions)
        return _maybe_tuple(output, return_dict, self.config)

    @staticmethod
    def _span_loss(logits, positions):
        seq_len = logits.size(1)  # positions clamped here are "outside the window" and ignored, as in BERT
        positions = positions.view(-1).clamp(0, seq_len).to(logits.device)
        return F.cross_entropy(logits.float(), positions, ignore_index=seq_len)


class BertkitForMultipleChoice(BertkitPreTrainedModel):
    """Scores each (context, option) pair with one logit; softmax across the N options."""

    def __init__(self, config: BertkitConfig):
        super().__init__(config)
        self.bert = BertkitModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs) -> MultipleChoiceModelOutput:
        reference = input_ids if input_ids is not None else inputs_embeds
        num_choices = reference.shape[1]
        flat = [_flatten_choices(t) for t in (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)]
        encoded = self.bert.encode(*flat, output_attentions, output_hidden_states, **kwargs)
        pooled = self.bert.pooler(encoded.first_tokens())  # (B*N, D)
        logits = self.classifier(self.dropout(pooled)).view(-1, num_choices)  # (B*N, 1) -> (B, N)
        loss = token_cross_entropy(logits, labels, kwargs.get("num_items_in_batch")) if labels is not None else None
        output = MultipleChoiceModelOutput(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                           attentions=encoded.attentions)
        return _maybe_tuple(output, return_dict, self.config)


def _flatten_choices(tensor):
    """(B, N, T[, D]) -> (B*N, T[, D]); None stays None."""
    if tensor is None:
        return None
    return tensor.reshape(-1, *tensor.shape[2:])


__all__ = [
    "BertkitPreTrainedModel",
    "BertkitModel",
    "BertkitForPreTraining",
    "BertkitForMaskedLM",
    "BertkitForSequenceClassification",
    "BertkitForTokenClassification",
    "BertkitForQuestionAnswering",
    "BertkitForMultipleChoice",
    "mean_pool",
]


def _register_with_auto_classes() -> None:
    """transformers' Auto classes build and load bertkit models for model_type "bertkit" (called as this module
    ends: `import bertkit` sees to it that this module is imported whenever transformers' Auto classes are)."""
    from transformers import (AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForMultipleChoice,
                              AutoModelForPreTraining, AutoModelForQuestionAnswering,
                              AutoModelForSequenceClassification, AutoModelForTokenClassification)

    AutoConfig.register(BertkitConfig.model_type, BertkitConfig, exist_ok=True)
    for auto_class, model_class in {
        AutoModel: BertkitModel,
        AutoModelForPreTraining: BertkitForPreTraining,
        AutoModelForMaskedLM: BertkitForMaskedLM,
        AutoModelForSequenceClassification: BertkitForSequenceClassification,
        AutoModelForTokenClassification: BertkitForTokenClassification,
        AutoModelForQuestionAnswering: BertkitForQuestionAnswering,
        AutoModelForMultipleChoice: BertkitForMultipleChoice,
    }.items():
        auto_class.register(BertkitConfig, model_class, exist_ok=True)


_register_with_auto_classes()
