"""bertkit's BERT against transformers' BERT on identical weights: every head, eager and sdpa, padded and not,
on a tiny random config and on the real all-MiniLM-L6-v2 checkpoint.

bertkit runs padded batches unpadded by default and returns zeros at the padding positions of per-token outputs,
where transformers returns values computed for the pad tokens; those positions are compared only on the padded path
(`unpad=False`). The QA loss is the cross-entropy of the returned logits over all positions, pad tokens included
(see BertkitForQuestionAnswering), so on the unpadded path its reference is recomputed from transformers' logits
with the pad tokens' logits set to 0."""

import pytest
import torch
import torch.nn.functional as F
import transformers
from helpers import HEAD_PAIRS, output_tensors, random_batch, tiny_config_kwargs

import bertkit

ATOL = 1e-5
PROBLEM_TYPES = {"sequence": ["single_label_classification", "multi_label_classification", "regression"]}


def problem_overrides(problem_type) -> dict:
    if problem_type is None:
        return {}
    return {"problem_type": problem_type, "num_labels": 1 if problem_type == "regression" else 3}


def head_cases():
    for head in HEAD_PAIRS:
        for problem_type in PROBLEM_TYPES.get(head, [None]):
            yield pytest.param(head, problem_type, id=f"{head}-{problem_type}" if problem_type else head)


def stock_and_bertkit(head, checkpoint_dir, tmp_path, attn, **config_overrides):
    """A stock model (random heads, seeded) saved to disk, and the same checkpoint loaded into bertkit."""
    stock_class, bertkit_class = HEAD_PAIRS[head]
    torch.manual_seed(0)
    if head == "qa":
        config_overrides["num_labels"] = 2  # start and end
    if checkpoint_dir is None:
        stock = stock_class(transformers.BertConfig(**tiny_config_kwargs(**config_overrides)))
    else:
        stock = stock_class.from_pretrained(checkpoint_dir, **config_overrides)
    stock.save_pretrained(tmp_path / head)
    stock = stock_class.from_pretrained(tmp_path / head, attn_implementation=attn).eval()
    ours = bertkit_class.from_pretrained(tmp_path / head, attn_implementation=attn).eval()
    return stock, ours


# Per-token outputs, by name, with their number of dimensions: (B, T, ...) tensors indexed like the attention mask.
PER_TOKEN = {"last_hidden_state": 3, "logits": 3, "prediction_logits": 3, "start_logits": 2, "end_logits": 2}


def assert_same_outputs(stock, ours, batch, padding_positions=False, **call_kwargs):
    """Every output tensor within ATOL of transformers'; per-token tensors at the real tokens only, unless
    `padding_positions` (then everywhere: for the padded path)."""
    with torch.no_grad():
        expected = output_tensors(stock(**batch))
        actual = output_tensors(ours(**batch, **call_kwargs))
    assert expected.keys() == actual.keys()
    mask = batch.get("attention_mask")
    if "start_logits" in expected and "loss" in expected and not padding_positions:
        expected["loss"] = qa_loss_with_zero_padding(expected, batch)
    for name, tensor in expected.items():
        if not padding_positions and is_per_token(name, tensor, mask):
            tensor, actual[name] = tensor[mask.bool()], actual[name][mask.bool()]  # (B, T, ...) -> (N, ...)
        assert tensor.shape == actual[name].shape, name
        diff = (tensor - actual[name]).abs().max().item()
        assert diff <= ATOL, f"{name}: max abs difference {diff}"


def is_per_token(name, tensor, mask) -> bool:
    return mask is not None and PER_TOKEN.get(name) == tensor.dim() and tensor.shape[:2] == mask.shape


def qa_loss_with_zero_padding(stock_outputs, batch):
    """transformers' QA loss with the pad tokens' logits set to 0, as bertkit's unpadded path returns them."""
    padding = ~batch["attention_mask"].bool()
    losses = [F.cross_entropy(stock_outputs[f"{end}_logits"].masked_fill(padding, 0.0), batch[f"{end}_positions"])
              for end in ("start", "end")]
    return (losses[0] + losses[1]) / 2


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("head,problem_type", list(head_cases()))
def test_tiny_parity(head, problem_type, padded, attn, tmp_path):
    overrides = problem_overrides(problem_type)
    stock, ours = stock_and_bertkit(head, None, tmp_path, attn, **overrides)
    batch = random_batch(head, padded=padded, problem_type=problem_type)
    assert_same_outputs(stock, ours, batch)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("head,problem_type", list(head_cases()))
def test_tiny_parity_padded_path_everywhere(head, problem_type, attn, tmp_path):
    """With unpad=False, padding positions too equal transformers'."""
    overrides = problem_overrides(problem_type)
    stock, ours = stock_and_bertkit(head, None, tmp_path, attn, **overrides)
    batch = random_batch(head, padded=True, problem_type=problem_type)
    assert_same_outputs(stock, ours, batch, padding_positions=True, unpad=False)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("head,problem_type", list(head_cases()))
def test_minilm_parity(head, problem_type, attn, minilm_dir, tmp_path):
    overrides = problem_overrides(problem_type)
    if head == "token":
        overrides["num_labels"] = 3
    stock, ours = stock_and_bertkit(head, minilm_dir, tmp_path, attn, **overrides)
    batch = random_batch(head, vocab_size=30522, seq_len=24, problem_type=problem_type)
    assert_same_outputs(stock, ours, batch)


def test_minilm_real_sentences(minilm_dir):
    """Real text through the real tokenizer: hidden states and pooler match BertModel."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    batch = tokenizer(["A quiet, well-run hotel near the station.", "Terrible."], ["Great value.", "No."],
                      padding=True, return_tensors="pt")
    stock = transformers.BertModel.from_pretrained(minilm_dir).eval()
    ours = bertkit.BertkitModel.from_pretrained(minilm_dir).eval()
    assert_same_outputs(stock, ours, dict(batch))


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_hidden_states_and_attentions(attn, tmp_path):
    stock, ours = stock_and_bertkit("base", None, tmp_path, attn)
    batch = random_batch("base", with_labels=False)
    with torch.no_grad():
        expected = stock(**batch, output_hidden_states=True, output_attentions=True)
        actual = ours(**batch, output_hidden_states=True, output_attentions=True)
    assert len(actual.hidden_states) == 3 and len(actual.attentions) == 2
    for e, a in zip(expected.hidden_states + expected.attentions, actual.hidden_states + actual.attentions):
        assert (e - a).abs().max().item() <= ATOL
    # attention rows are distributions over the real tokens only
    probs = actual.attentions[0]
    assert torch.allclose(probs.sum(-1), torch.ones_like(probs.sum(-1)), atol=1e-5)
    padding = ~batch["attention_mask"].bool()[:, None, None, :].expand_as(probs)
    assert probs[padding].abs().max().item() == 0.0


def test_return_dict_false_gives_tuple(tmp_path):
    _, ours = stock_and_bertkit("sequence", None, tmp_path, "sdpa")
    batch = random_batch("sequence")
    loss, logits = ours(**batch, return_dict=False)[:2]
    assert torch.allclose(logits, ours(**batch).logits) and loss.ndim == 0


def test_padding_does_not_change_real_tokens(tmp_path):
    """The same sentence alone and padded inside a batch gives the same vectors for its real tokens."""
    _, ours = stock_and_bertkit("base", None, tmp_path, "sdpa")
    batch = random_batch("base", with_labels=False, padded=True, seed=3)
    row, length = 1, int(batch["attention_mask"][1].sum())
    alone = {k: v[row:row + 1, :length] for k, v in batch.items()}
    with torch.no_grad():
        together = ours(**batch).last_hidden_state[row, :length]
        single = ours(**alone).last_hidden_state[0]
    assert (together - single).abs().max().item() <= ATOL


def test_gradient_checkpointing_gives_same_gradients(tmp_path):
    _, ours = stock_and_bertkit("sequence", None, tmp_path, "sdpa")
    batch = random_batch("sequence")
    ours.train()  # dropout is 0.1 in the tiny config: seed both passes identically
    grads = []
    for checkpointing in (False, True):
        if checkpointing:
            ours.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        ours.zero_grad()
        torch.manual_seed(1)
        ours(**batch).loss.backward()
        grads.append(ours.bert.encoder.layer[0].attention.self.query.weight.grad.clone())
    assert ours.bert.encoder.gradient_checkpointing
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_mean_pooling_ignores_padding():
    config = bertkit.BertkitConfig(**tiny_config_kwargs(classifier_pooling="mean"))
    model = bertkit.BertkitForSequenceClassification(config).eval()
    assert model.bert.pooler is None
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    pooled = bertkit.modeling_bert.mean_pool(hidden, torch.tensor([[1, 1, 0]]))
    assert torch.equal(pooled, torch.tensor([[2.0, 3.0]]))
    batch = random_batch("sequence", padded=True)
    with torch.no_grad():
        logits = model(**batch).logits
        row, length = 1, int(batch["attention_mask"][1].sum())
        alone = model(**{k: v[row:row + 1, :length] for k, v in batch.items() if k != "labels"}).logits
    assert (logits[row] - alone[0]).abs().max().item() <= ATOL


def test_bad_pooling_is_rejected():
    with pytest.raises(ValueError, match="classifier_pooling"):
        bertkit.BertkitConfig(classifier_pooling="max")
