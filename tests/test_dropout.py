"""bertkit's CPU dropout (`fast_dropout`): the rate, the scale and the gradient of inverted dropout, seeded by torch's
generator, and used by the model in training (sdpa on CPU then runs the eager arithmetic with it)."""

import pytest
import torch
from helpers import tiny_config_kwargs

import bertkit
from bertkit.padding import RANDOM_BITS, Dropout, fast_dropout

COUNT = 1_000_000


def kept_scale(p: float) -> float:
    dropped = round(p * 2**RANDOM_BITS)
    return 2**RANDOM_BITS / (2**RANDOM_BITS - dropped)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drop_rate_and_scale(p):
    out = fast_dropout(torch.ones(COUNT), p)
    dropped = (out == 0).float().mean().item()
    assert abs(dropped - p) < 5 * (p * (1 - p) / COUNT) ** 0.5  # five standard errors
    assert out.unique().tolist() == [0.0, pytest.approx(kept_scale(p))]
    assert abs(out.mean().item() - 1.0) < 0.01  # the expectation is unchanged


def test_neighbouring_elements_are_independent():
    """Four elements share one 64-bit draw: each pair of neighbours must still be dropped together at rate p^2."""
    p = 0.5
    dropped = fast_dropout(torch.ones(COUNT), p) == 0
    both = (dropped[0::4] & dropped[1::4]).float().mean().item()
    across = (dropped[3:-1:4] & dropped[4::4]).float().mean().item()  # the last of one draw, the first of the next
    assert abs(both - p * p) < 0.005 and abs(across - p * p) < 0.005


def test_seeded_by_torch_generator():
    x = torch.randn(1000)
    torch.manual_seed(3)
    first = fast_dropout(x, 0.3)
    torch.manual_seed(3)
    assert torch.equal(first, fast_dropout(x, 0.3))
    assert not torch.equal(first, fast_dropout(x, 0.3))


def test_gradient_is_the_scaled_mask():
    x = torch.randn(4, 7, 33, requires_grad=True)  # an element count that is not a multiple of 4
    out = fast_dropout(x, 0.2)
    out.backward(torch.ones_like(out))
    mask = (out != 0).float()
    assert out.shape == x.shape
    torch.testing.assert_close(x.grad, mask * kept_scale(0.2))
    torch.testing.assert_close(out, x.detach() * mask * kept_scale(0.2))


def test_identity_when_not_training_or_rate_zero():
    x = torch.randn(10)
    assert fast_dropout(x, 0.5, training=False) is x
    assert fast_dropout(x, 0.0) is x


def test_keeps_dtype_and_falls_back_where_16_bits_cannot_express_the_rate():
    assert fast_dropout(torch.ones(100, dtype=torch.bfloat16), 0.1).dtype == torch.bfloat16
    assert torch.equal(fast_dropout(torch.ones(100), 1.0), torch.zeros(100))  # F.dropout's p=1
    assert fast_dropout(torch.ones(100_000), 1e-7).eq(0).sum() <= 2  # below 2^-17: torch's own dropout


def test_module_is_an_nn_dropout():
    module = Dropout(0.25)
    assert isinstance(module, torch.nn.Dropout) and module.p == 0.25
    assert torch.equal(module.eval()(torch.ones(5)), torch.ones(5))


def model_in_training(model_class, hidden_dropout: float, attention_dropout: float):
    """A tiny model in train mode and a batch of 3 rows of 12 tokens whose second row is padded after 7."""
    config = bertkit.BertkitConfig(**tiny_config_kwargs(hidden_dropout_prob=hidden_dropout,
                                                        attention_probs_dropout_prob=attention_dropout))
    torch.manual_seed(0)
    ids = torch.randint(5, config.vocab_size, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    return model_class(config).train(), {"input_ids": ids, "attention_mask": mask}


def test_model_trains_with_fast_dropout_the_same_under_sdpa_and_eager():
    """On CPU, sdpa with attention dropout runs the eager arithmetic: one seed gives the same training forward."""
    model, batch = model_in_training(bertkit.BertkitModel, 0.1, 0.3)
    outputs = []
    for implementation in ("sdpa", "eager"):
        model.set_attn_implementation(implementation)
        torch.manual_seed(1)
        outputs.append(model(**batch).last_hidden_state)
    torch.testing.assert_close(outputs[0], outputs[1])
    torch.manual_seed(2)
    assert not torch.allclose(outputs[0], model(**batch).last_hidden_state)


def test_gradient_checkpointing_replays_the_same_dropout_masks():
    """Checkpointing recomputes each layer's forward in backward: the restored generator state must give the same
    masks, so gradients equal those without checkpointing."""
    model, batch = model_in_training(bertkit.BertkitForSequenceClassification, 0.2, 0.2)
    grads = []
    for checkpointing in (False, True):
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.zero_grad()
        torch.manual_seed(1)
        model(**batch, labels=torch.tensor([0, 1, 2])).loss.backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1])
    for without, with_checkpointing in zip(*grads):
        torch.testing.assert_close(without, with_checkpointing)
