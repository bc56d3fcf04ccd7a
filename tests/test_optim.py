"""Layer-wise LR decay groups carry the exact per-layer learning rate; precision picks and refuses as documented."""

import pytest
import torch
import transformers
from helpers import tiny_config_kwargs

import bertkit
from bertkit.errors import BertkitError
from bertkit.llrd import build_optimizer, llrd_param_groups, lr_table, optimizer_with_llrd
from bertkit.precision import resolve_precision


def tiny_classifier(layers=3):
    config = bertkit.BertkitConfig(**tiny_config_kwargs(num_hidden_layers=layers))
    return bertkit.BertkitForSequenceClassification(config)


def test_llrd_learning_rates_are_exact():
    model = tiny_classifier(layers=3)
    groups = llrd_param_groups(model, base_lr=1e-3, decay=0.5, head_lr=5e-3, weight_decay=0.01)
    lr = {g["name"]: g["lr"] for g in groups}
    assert lr["layer 2"] == pytest.approx(1e-3)  # top layer: base
    assert lr["layer 1"] == pytest.approx(5e-4)
    assert lr["layer 0"] == pytest.approx(2.5e-4)
    assert lr["embeddings"] == pytest.approx(1.25e-4)  # base * decay ** num_layers
    assert lr["pooler"] == pytest.approx(1e-3)
    assert lr["head"] == pytest.approx(5e-3)
    assert lr["layer 0 (no decay)"] == lr["layer 0"]  # same layer, same rate, only weight decay differs


def test_every_trainable_parameter_in_exactly_one_group_and_no_decay_on_bias_and_layernorm():
    model = tiny_classifier()
    groups = llrd_param_groups(model, 1e-3, decay=0.8, weight_decay=0.01)
    grouped = [id(p) for g in groups for p in g["params"]]
    assert sorted(grouped) == sorted(id(p) for p in model.parameters())
    names = {id(p): n for n, p in model.named_parameters()}
    for group in groups:
        for parameter in group["params"]:
            no_decay = names[id(parameter)].endswith(("bias", "LayerNorm.weight"))
            assert group["weight_decay"] == (0.0 if no_decay else 0.01), names[id(parameter)]


def test_parameter_of_layer_10_is_not_mistaken_for_layer_1():
    model = tiny_classifier(layers=11)
    groups = llrd_param_groups(model, 1.0, decay=0.5)
    layer10 = next(g for g in groups if g["name"] == "layer 10")
    assert layer10["lr"] == 1.0
    assert next(g for g in groups if g["name"] == "layer 1")["lr"] == pytest.approx(0.5**9)


def test_frozen_parameters_are_left_out():
    model = tiny_classifier()
    for parameter in model.bert.embeddings.parameters():
        parameter.requires_grad = False
    assert not any(g["name"].startswith("embeddings") for g in llrd_param_groups(model, 1e-3, 0.9))


def test_optimizer_steps_with_group_rates(tmp_path):
    model = tiny_classifier()
    args = transformers.TrainingArguments(output_dir=str(tmp_path), learning_rate=1e-3, weight_decay=0.0,
                                          report_to="none", use_cpu=True)
    optimizer = build_optimizer(model, args, decay=0.5)
    rows = lr_table(optimizer.param_groups)
    assert sum(count for _, count, _, _ in rows) == sum(p.numel() for p in model.parameters())
    assert {round(lr, 10) for _, _, lr, _ in rows} == {1e-3, 5e-4, 2.5e-4, 1.25e-4}


@pytest.mark.parametrize("optim,fused", [("adamw_torch_fused", True), ("adamw_torch", False)])
def test_optimizer_follows_train_optim(optim, fused, tmp_path):
    """transformers' default, adamw_torch_fused, gets torch's fused AdamW kernel (CPU too); it steps like the
    unfused one."""
    args = transformers.TrainingArguments(output_dir=str(tmp_path), learning_rate=1e-3, report_to="none",
                                          use_cpu=True, optim=optim)
    models = [tiny_classifier().eval(), tiny_classifier().eval()]  # no dropout: the same forward twice
    models[1].load_state_dict(models[0].state_dict())
    optimizers = [build_optimizer(models[0], args, decay=0.8), torch.optim.AdamW(
        llrd_param_groups(models[1], 1e-3, decay=0.8, weight_decay=args.weight_decay), eps=args.adam_epsilon)]
    assert bool(optimizers[0].defaults["fused"]) is fused
    ids = torch.randint(5, 99, (2, 6))
    for model, optimizer in zip(models, optimizers):
        for _ in range(2):
            model(input_ids=ids, labels=torch.tensor([0, 2])).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_other_train_optim_is_left_to_trainer_or_refused_with_llrd(tmp_path):
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True, optim="adafactor")
    assert optimizer_with_llrd(tiny_classifier(), args, decay=1.0, head_lr=None) is None
    with pytest.raises(BertkitError, match="train.optim=adafactor cannot take layer-wise learning rates"):
        optimizer_with_llrd(tiny_classifier(), args, decay=0.9, head_lr=None)


def test_bad_decay_is_rejected():
    with pytest.raises(ValueError, match="decay"):
        llrd_param_groups(tiny_classifier(), 1e-3, decay=1.5)


def test_precision_choices():
    assert resolve_precision("fp32", cuda=False)[0] == {"use_cpu": True}
    assert resolve_precision("bf16", cuda=False)[0] == {"bf16": True, "use_cpu": True}
    flags, message = resolve_precision("auto", cuda=False)
    assert ("bf16" in flags) == torch.cpu._is_avx512_bf16_supported()
    assert message.startswith("precision ")
    with pytest.raises(BertkitError, match="fp16 needs a CUDA GPU"):
        resolve_precision("fp16", cuda=False)


def test_bf16_flags_make_valid_training_arguments_on_cpu(tmp_path):
    flags, _ = resolve_precision("bf16", cuda=False)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to="none", **flags)
    assert args.bf16 and args.use_cpu


def test_drop_last_with_a_dev_split_warns_that_dev_examples_are_dropped(tmp_path, capsys):
    from bertkit.training import training_arguments

    training_arguments({"dataloader_drop_last": True}, str(tmp_path), "fp32", 0, True, "accuracy")
    assert "drops the dev set's last incomplete batch" in capsys.readouterr().err.replace("\n", "")
    training_arguments({"dataloader_drop_last": True}, str(tmp_path), "fp32", 0, False, None)
    assert "dev set" not in capsys.readouterr().err


@pytest.mark.gpu
def test_auto_precision_on_cuda_is_half_precision():
    flags, _ = resolve_precision("auto")
    assert flags.get("bf16") or flags.get("fp16")
