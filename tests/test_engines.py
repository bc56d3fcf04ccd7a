"""FSDP and DeepSpeed (bertkit/distributed.py): no setting silently ignored. On this CPU machine FSDP is refused in
one line (accelerate would run plain DDP), DeepSpeed ZeRO-2 / ZeRO-3 run with its CPU accelerator under torchrun
(gloo) and give the weights of one process; config errors are said at config time."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_classify import sentiment, write_csv  # noqa: F401 - fixture
from test_distributed import (ENV, ROOT, assert_same_weights, common, free_port, launch,  # noqa: F401 - fixtures
                              no_dropout_model_dir, one_epoch, one_epoch_single_run)
from typer.testing import CliRunner

from bertkit import distributed
from bertkit.cli import app, load_recipe_config
from bertkit.errors import BertkitError

runner = CliRunner()
FSDP = "classify/multi_gpu_fsdp"
DEEPSPEED = "classify/multi_gpu_deepspeed"


def write_json(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


# ---------------------------------------------------------------------------------------------- config time


def test_shipped_fsdp_config_is_the_current_form():
    """fsdp=true with an FSDP2 fsdp_config: no deprecated string, no FSDP1 key that FSDP2 drops without a word."""
    _, cfg = load_recipe_config("classify", FSDP, [])
    assert cfg.train["fsdp"] is True
    config = distributed.check_fsdp_config(cfg.train)
    assert config["version"] == 2 and config["transformer_layer_cls_to_wrap"] == ["BertkitLayer"]


@pytest.mark.parametrize("override, said", [
    ("train.fsdp=full_shard auto_wrap", "deprecates the string form"),
    ("train.fsdp=false", "does nothing without train.fsdp=true"),
    ("train.deepspeed=recipes/configs/accelerate/ds_zero2.json", "both shard the model"),
])
def test_fsdp_settings_that_would_be_ignored_are_refused(override, said):
    with pytest.raises(BertkitError, match=said):
        load_recipe_config("classify", FSDP, [override])


@pytest.mark.parametrize("content, said", [
    ({"version": 2, "use_orig_params": True}, '"use_orig_params" is FSDP1-only'),
    ({"version": 1}, "deprecates FSDP1"),
    ({"version": 2, "wrap_everything": True}, "not an FSDP2 setting"),
])
def test_fsdp_config_keys_fsdp2_would_drop_are_refused(tmp_path, content, said):
    path = write_json(tmp_path / "fsdp.json", content)
    with pytest.raises(BertkitError, match=said):
        load_recipe_config("classify", FSDP, [f"train.fsdp_config={path}"])


@pytest.mark.parametrize("name", ["ds_zero2", "ds_zero3"])
def test_shipped_deepspeed_configs_validate(name):
    result = runner.invoke(app, ["validate", "classify", "-c", DEEPSPEED,
                                 f"train.deepspeed=recipes/configs/accelerate/{name}.json"])
    assert result.exit_code == 0, result.output
    _, cfg = load_recipe_config("classify", DEEPSPEED, [f"train.deepspeed=recipes/configs/accelerate/{name}.json"])
    filled = distributed.deepspeed_values({}, cfg.train, {}, world=4)
    assert filled["train_batch_size"] == 32 * 1 * 4  # micro x accumulation x processes


@pytest.mark.parametrize("content, extra, said", [
    ({"train_micro_batch_size_per_gpu": 16}, [], "train_micro_batch_size_per_gpu is 16"),
    ({"train_batch_size": 100}, [], "not micro x accumulation"),
    ({"gradient_clipping": 0.5}, [], "gradient_clipping is 0.5"),
    ({"optimizer": {"type": "AdamW"}}, [], 'has an "optimizer" section'),
    ({"zero_optimization": {"stage": 3}}, [], "stage3_gather_16bit_weights_on_model_save"),
    ({"zero_optimization": {"stage": 2, "sub_group_size": "auto"}}, [], "does not fill"),
    ({"bf16": {"enabled": True}}, ["precision=fp32"], "bf16.enabled is True"),
])
def test_deepspeed_config_values_against_the_recipe(tmp_path, content, extra, said):
    path = write_json(tmp_path / "ds.json", content)
    with pytest.raises(BertkitError, match=said):
        load_recipe_config("classify", DEEPSPEED, [f"train.deepspeed={path}", *extra])


def test_deepspeed_train_batch_size_checked_against_the_processes(tmp_path, monkeypatch):
    """Under a launcher the processes are known: 32 x 1 x 2 = 64, so 128 is refused and 64 passes."""
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    too_many, right = write_json(tmp_path / "a.json", {"train_batch_size": 128}), write_json(tmp_path / "b.json",
                                                                                            {"train_batch_size": 64})
    with pytest.raises(BertkitError, match="train_batch_size is 128"):
        load_recipe_config("classify", DEEPSPEED, [f"train.deepspeed={too_many}"])
    load_recipe_config("classify", DEEPSPEED, [f"train.deepspeed={right}"])


# ---------------------------------------------------------------------------------------------- run time


def run_fsdp(model_dir, sentiment, tmp_path):  # noqa: F811
    return runner.invoke(app, ["run", "classify", "-c", FSDP, f"model={model_dir}", f"output_dir={tmp_path / 'run'}",
                               f"data.train={sentiment['train']}", f"data.eval={sentiment['dev']}", "precision=fp32",
                               "data.max_length=32"])


def test_fsdp_on_cpu_is_refused_before_training(tiny_model_dir, sentiment, tmp_path, monkeypatch):  # noqa: F811
    """Under torchrun (LOCAL_RANK, WORLD_SIZE) on a CPU-only machine: one line, exit 2, no run written — not DDP."""
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = run_fsdp(tiny_model_dir, sentiment, tmp_path)
    assert result.exit_code == 2, result.output
    assert "train.fsdp needs CUDA GPUs" in result.output and "drop train.fsdp" in result.output
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_fsdp_without_a_launcher_is_refused(tiny_model_dir, sentiment, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    result = run_fsdp(tiny_model_dir, sentiment, tmp_path)
    assert result.exit_code == 2, result.output
    assert "train.fsdp needs a launcher" in result.output


def test_fsdp_with_one_process_says_it_shards_nothing(monkeypatch, capsys):
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    distributed.check_launch({"fsdp": True}, cuda=True)
    assert "shards nothing" in capsys.readouterr().err


def test_deepspeed_missing_is_refused_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # import deepspeed -> ImportError
    with pytest.raises(BertkitError, match=r'needs the deepspeed package.*bertkit\[deepspeed\]'):
        distributed.check_launch({"deepspeed": "ds.json"})


SHARD_SCRIPT = """
import sys, torch, torch.distributed as dist, transformers
from torch.distributed.fsdp import fully_shard
from bertkit.distributed import sharding_line
dist.init_process_group("gloo")
model = transformers.BertForSequenceClassification.from_pretrained(sys.argv[1], num_labels=2)
for layer in model.bert.encoder.layer:
    fully_shard(layer)
fully_shard(model)
print(sharding_line(model, dist.get_rank(), dist.get_world_size()), flush=True)
dist.destroy_process_group()
"""


def test_sharding_line_counts_units_and_this_ranks_bytes(tiny_model_dir, tmp_path):
    """What ShardingCheck logs, on a model torch's FSDP2 sharded over 2 CPU processes: 3 units (2 layers + root),
    each rank holding half the parameter bytes; an unsharded model has none."""
    script = tmp_path / "shard.py"
    script.write_text(SHARD_SCRIPT)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           str(free_port()), str(script), tiny_model_dir], capture_output=True, text=True, env=ENV,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.findall(r"fsdp: (\d+) wrapped units .*?; rank (\d) of 2 holds ([\d.]+) MiB of ([\d.]+) MiB", done.stdout)
    assert sorted(rank for _, rank, _, _ in found) == ["0", "1"], done.stdout  # the two ranks' lines
    for units, _, local, full in found:
        assert units == "3" and float(local) == pytest.approx(float(full) / 2, rel=0.01)
    import transformers

    plain = transformers.BertForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=2)
    assert distributed.sharding(plain)["units"] == []


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_two_processes_match_one(no_dropout_model_dir, sentiment, one_epoch_single_run, tmp_path,  # noqa: F811
                                           stage):
    """ZeRO-2 / ZeRO-3 on DeepSpeed's CPU accelerator (gloo), 2 processes x 4 = the weights of 1 process x 8; the
    ZeRO-3 save gathers a whole model that stock transformers loads. DeepSpeed's shared-memory inference op is not
    built (it took about 2 minutes on 2 cores on every new machine or environment: training never calls it)."""
    pytest.importorskip("deepspeed")
    data = one_epoch(sentiment)
    double = launch(2, ["run", "classify", "-c", DEEPSPEED,
                        *common(no_dropout_model_dir, tmp_path / "two", *data, "train.per_device_train_batch_size=4",
                                f"train.deepspeed=recipes/configs/accelerate/ds_zero{stage}.json", "llrd=1.0",
                                "train.weight_decay=0.0")], env={"TORCH_EXTENSIONS_DIR": str(tmp_path / "ops")})
    assert double.returncode == 0, double.stderr[-3000:]
    assert not (tmp_path / "ops").exists() and "shm_comm" not in double.stdout + double.stderr
    said = re.search(rf"deepspeed: ZeRO-{stage} on 2 processes \(cpu, gloo\); rank 0 holds ([\d.]+) MiB of ([\d.]+)",
                     double.stderr)
    assert said, double.stderr[-3000:]  # its engine ran, not DDP
    if stage == 3:  # the parameters themselves are partitioned
        assert float(said[1]) == pytest.approx(float(said[2]) / 2, rel=0.01)
    assert "find_unused_parameters" not in double.stderr
    assert_same_weights(one_epoch_single_run, tmp_path / "two", atol=1e-4)
    import transformers

    stock = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "two")
    assert stock.classifier.weight.shape[0] == 2 and stock.bert.encoder.layer[0].attention.self.query.weight.numel()
