"""Beyond one process: the settings that hand training to a distributed engine (train.fsdp / train.fsdp_config,
train.deepspeed), checked so that none is silently ignored. Each one either runs, verified in the run itself, or is
refused in one line before training:

    check_launcher()                               `bertkit run`'s start: accelerate launch's MULTI_CPU without
                                                   mpirun (one unranked process per machine) refused
    check_distributed_config(train, precision)     config time (`bertkit validate`, `bertkit run`): the forms
                                                   transformers reads, the files they name, DeepSpeed's `auto` values
                                                   and batch sizes against the recipe
    check_launch(train)                            run time, before TrainingArguments: a launcher, a backend that can
                                                   do it (FSDP: CUDA; DeepSpeed: installed, CUDA or its CPU accelerator)
    engine_arguments(train)                        what TrainingArguments needs beside train: (DeepSpeed on CPU: the
                                                   process group set up by bertkit, see below)
    ShardingCheck                                  a Trainer callback: at the start of training, one line with the
                                                   wrapped units and this rank's parameter bytes, or a refusal when
                                                   FSDP was asked for and nothing was sharded

What was measured here (transformers 5.25, accelerate 1.16, torch 2.13 CPU, DeepSpeed 0.19.8):
- FSDP: Trainer hands it to accelerate, which turns it on only for accelerators (MULTI_GPU, ...): under torchrun on
  CPU the run is plain DDP whatever `fsdp` / `fsdp_config` say (torch's own fully_shard does shard on CPU with gloo,
  but Trainer does not call it there). So fsdp on CPU is refused.
- DeepSpeed: its CPU accelerator runs ZeRO-2 and ZeRO-3 with gloo, but accelerate gives it no backend on CPU and
  counts one process (each rank then reads the whole dataset, and DeepSpeed refuses the batch size). bertkit sets
  the process state up first (gloo, DeepSpeed) and hands it to TrainingArguments (`use_configured_state`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .console import say
from .errors import BertkitError, ConfigValueError
from .training_arguments import training_fields

if TYPE_CHECKING:
    import torch

# torch is imported by the functions that run in a launched run: the config checks here and check_launcher run before
# `bertkit run` imports the model stack

# fsdp_config keys transformers 5.x reads for FSDP2 (version 2, its default); the "fsdp_" prefix is accepted too.
FSDP2_KEYS = {"version", "transformer_layer_cls_to_wrap", "auto_wrap_policy", "min_num_params", "cpu_offload",
              "reshard_after_forward", "cpu_ram_efficient_loading", "state_dict_type", "activation_checkpointing"}
# keys only FSDP1 reads: under FSDP2 transformers drops them without a word
FSDP1_ONLY_KEYS = {"backward_prefetch", "forward_prefetch", "use_orig_params", "sync_module_states",
                   "limit_all_gathers"}
# DeepSpeed keys that transformers fills from TrainingArguments when they say "auto", and where from
_DS_AUTO = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "gradient_clipping",
            "fp16.enabled", "bf16.enabled", "zero_optimization.reduce_bucket_size",
            "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.stage3_param_persistence_threshold"}


def launched() -> bool:
    """Under torchrun / accelerate launch / the deepspeed launcher (each sets LOCAL_RANK for its processes)."""
    return "LOCAL_RANK" in os.environ


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


# what a process started by torchrun or by MPI (mpirun, accelerate launch --mpirun_hostfile) has: its rank
_RANK_VARIABLES = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")


def check_launcher() -> None:
    """accelerate launch with `distributed_type: MULTI_CPU` and several processes or machines starts each machine's
    script itself, once and with no rank, unless it goes through mpirun (--mpirun_hostfile): accelerate 1.16's
    simple launcher sets MASTER_ADDR and ACCELERATE_USE_CPU and nothing else, so each machine would train alone on
    the whole data set and write the same output_dir. Refused in one line before anything runs."""
    if "ACCELERATE_USE_CPU" in os.environ and "MASTER_ADDR" in os.environ and \
            not any(name in os.environ for name in _RANK_VARIABLES):
        raise BertkitError("accelerate launch started this process alone, with no rank: distributed_type MULTI_CPU "
                           "runs several processes or machines only through mpirun (--mpirun_hostfile), and without "
                           "it each machine would train on its own — use --config_file "
                           "recipes/configs/accelerate/multi_node.json (MULTI_GPU: torchrun, gloo on CPU) or torchrun")


# ---------------------------------------------------------------------------------------------- config time


def _json_file(path, key: str) -> dict:
    """A JSON file a train: key names (or an inline mapping), as a dict; one line where it cannot be read."""
    if isinstance(path, dict):
        return dict(path)
    if not isinstance(path, str) or not Path(path).is_file():
        raise ConfigValueError(key, f"config key '{key}': no such file {path} — give a JSON file, e.g. "
                                    f"recipes/configs/accelerate/{'fsdp' if 'fsdp' in key else 'ds_zero2'}.json")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise ConfigValueError(key, f"config key '{key}': {path} is not valid JSON ({error}) — fix the file") from None
    if not isinstance(data, dict):
        raise ConfigValueError(key, f"config key '{key}': {path} must hold a JSON object — fix the file")
    return data


def check_fsdp_config(train: dict) -> dict | None:
    """train.fsdp in its current form (true; transformers' strings are deprecated), and train.fsdp_config with
    FSDP2 keys only (FSDP1's are dropped without a word under FSDP2). The fsdp_config as a dict, None without fsdp."""
    fsdp, config_path = train.get("fsdp"), train.get("fsdp_config")
    if isinstance(fsdp, str) and fsdp.strip():
        raise ConfigValueError("train.fsdp", f"config key 'train.fsdp' is {fsdp!r}: transformers deprecates the "
                                             "string form — set train.fsdp=true and put the sharding in fsdp_config "
                                             "(reshard_after_forward: true = full_shard, false = shard_grad_op)")
    if fsdp not in (None, False, True, ""):
        raise ConfigValueError("train.fsdp", f"config key 'train.fsdp' must be true or false, got {fsdp!r} — set "
                                             "train.fsdp=true")
    if not fsdp:
        if config_path:
            raise ConfigValueError("train.fsdp_config", "config key 'train.fsdp_config' does nothing without "
                                                        "train.fsdp=true — set train.fsdp=true, or remove fsdp_config")
        return None
    if train.get("deepspeed"):
        raise ConfigValueError("train.fsdp", "config keys 'train.fsdp' and 'train.deepspeed' both shard the model: "
                                             "choose one — remove train.fsdp or train.deepspeed")
    config = {k.removeprefix("fsdp_"): v for k, v in _json_file(config_path or {}, "train.fsdp_config").items()}
    version = config.get("version", 2)
    if version != 2:
        raise ConfigValueError("train.fsdp_config", f"config key 'train.fsdp_config': version {version!r} — "
                                                    "transformers deprecates FSDP1: set \"version\": 2 (FSDP2)")
    for key in config:
        if key in FSDP1_ONLY_KEYS or key not in FSDP2_KEYS:
            what = "is FSDP1-only, and FSDP2 ignores it" if key in FSDP1_ONLY_KEYS else "is not an FSDP2 setting"
            raise ConfigValueError("train.fsdp_config", f"config key 'train.fsdp_config': \"{key}\" {what} — remove "
                                                        f"it (FSDP2 keys: {', '.join(sorted(FSDP2_KEYS))})")
    return config


def _get(config: dict, dotted: str):
    for part in dotted.split("."):
        config = config.get(part) if isinstance(config, dict) else None
    return config


def _auto_keys(config, prefix: str = "") -> list[str]:
    if isinstance(config, dict):
        return [k for key, value in config.items() for k in _auto_keys(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")] if config == "auto" else []


def deepspeed_values(config: dict, train: dict, flags: dict, world: int) -> dict:
    """The values transformers fills into DeepSpeed's `auto` keys from the recipe (batch sizes, clipping,
    precision), as it will at run time; `world` processes."""
    defaults = training_fields()
    micro = train.get("per_device_train_batch_size", defaults["per_device_train_batch_size"].default)
    accumulation = train.get("gradient_accumulation_steps", defaults["gradient_accumulation_steps"].default)
    return {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": accumulation,
            "train_batch_size": micro * accumulation * world,
            "gradient_clipping": train.get("max_grad_norm", defaults["max_grad_norm"].default),
            "fp16.enabled": bool(flags.get("fp16")), "bf16.enabled": bool(flags.get("bf16"))}


def check_deepspeed_config(train: dict, flags: dict, world: int | None = None) -> dict | None:
    """train.deepspeed: a DeepSpeed JSON whose `auto` values transformers can fill, whose explicit values agree with
    the recipe (batch sizes, clipping, precision; train_batch_size = micro x accumulation x processes), that leaves
    the optimizer and schedule to bertkit (LLRD), and whose ZeRO-3 saves a whole model. `world`: the processes, when
    known (at run time); else train_batch_size need only divide by micro x accumulation. The config, filled."""
    path = train.get("deepspeed")
    if not path:
        return None
    key = "train.deepspeed"
    config = _json_file(path, key)
    for section in ("optimizer", "scheduler"):
        if section in config:
            raise ConfigValueError(key, f"config key '{key}': the DeepSpeed config has an \"{section}\" section, "
                                        f"which would replace bertkit's (layer-wise decay, train.* schedule) — "
                                        f"remove \"{section}\" from {path}")
    unknown = [k for k in _auto_keys(config) if k not in _DS_AUTO]
    if unknown:
        raise ConfigValueError(key, f"config key '{key}': \"{unknown[0]}\" is \"auto\", which transformers does not "
                                    f"fill — give a number in {path}")
    stage = _get(config, "zero_optimization.stage") or 0
    if stage not in (0, 1, 2, 3):
        raise ConfigValueError(key, f"config key '{key}': zero_optimization.stage must be 0-3, got {stage!r} — fix "
                                    f"{path}")
    if stage == 3 and _get(config, "zero_optimization.stage3_gather_16bit_weights_on_model_save") is not True:
        raise ConfigValueError(key, f"config key '{key}': ZeRO-3 saves a model only with zero_optimization."
                                    f"stage3_gather_16bit_weights_on_model_save=true (else the saved weights are "
                                    f"empty shards) — set it in {path}")
    values = deepspeed_values(config, train, flags, world or 1)
    recipe_key = {"train_micro_batch_size_per_gpu": "train.per_device_train_batch_size",
                  "gradient_accumulation_steps": "train.gradient_accumulation_steps",
                  "gradient_clipping": "train.max_grad_norm", "fp16.enabled": "precision",
                  "bf16.enabled": "precision"}
    for name, wanted in values.items():
        given = _get(config, name)
        if given in (None, "auto") or (name == "train_batch_size" and world is None):
            continue
        if given != wanted:
            where = recipe_key.get(name, "micro x accumulation x processes")
            raise ConfigValueError(key, f"config key '{key}': {name} is {given} in {path}, but the recipe gives "
                                        f"{wanted} ({where}) — set \"{name}\": \"auto\", or make them agree")
    given_total = config.get("train_batch_size")
    per_process = values["train_micro_batch_size_per_gpu"] * values["gradient_accumulation_steps"]
    if world is None and isinstance(given_total, int) and given_total % per_process:
        raise ConfigValueError(key, f"config key '{key}': train_batch_size {given_total} in {path} is not micro x "
                                    f"accumulation ({per_process}) x processes for any number of processes — set "
                                    f"\"train_batch_size\": \"auto\"")
    return config


def check_distributed_config(train: dict, precision: str) -> None:
    """Config time (a recipe's Config.__post_init__, so `bertkit validate` and `bertkit run`)."""
    from .precision import resolve_precision

    check_fsdp_config(train)
    if train.get("deepspeed"):
        try:
            flags, _ = resolve_precision(precision)
        except BertkitError:
            return  # the precision's own check says it
        check_deepspeed_config(train, flags, world_size() if launched() else None)


# ---------------------------------------------------------------------------------------------- run time


def check_launch(train: dict, cuda: bool | None = None) -> None:
    """Before TrainingArguments is built: each engine asked for can run here, or one line saying why not."""
    import torch

    cuda = torch.cuda.is_available() if cuda is None else cuda
    if train.get("fsdp"):
        if not launched():
            raise BertkitError("train.fsdp needs a launcher: one plain `bertkit run` is a single process, where "
                               "Trainer ignores fsdp — launch with torchrun --nproc_per_node N -m bertkit run ..., "
                               "or drop train.fsdp")
        if not cuda:
            raise BertkitError("train.fsdp needs CUDA GPUs: Trainer hands FSDP to accelerate, which shards only on "
                               "GPUs and on this CPU-only machine (gloo) would run plain DDP — run on CUDA GPUs, or "
                               "drop train.fsdp (DDP is what runs without it)")
        if world_size() == 1:
            say("warning: train.fsdp with one process shards nothing (every unit stays whole on the one rank); "
                "it runs FSDP's code path only")
    if train.get("deepspeed"):
        try:
            import deepspeed  # noqa: F401
        except ImportError:
            raise BertkitError('train.deepspeed needs the deepspeed package, which is not installed — pip install '
                               '"bertkit[deepspeed]", or drop train.deepspeed') from None
        if not launched():
            raise BertkitError("train.deepspeed needs a launcher: one plain `bertkit run` is a single process, "
                               "where Trainer does not start DeepSpeed — launch with torchrun --nproc_per_node N -m "
                               "bertkit run ... (or deepspeed / accelerate launch), or drop train.deepspeed")
        if not cuda:
            _check_deepspeed_cpu()


def _check_deepspeed_cpu() -> None:
    from deepspeed.accelerator import get_accelerator

    accelerator = get_accelerator()
    if accelerator.device_name() != "cpu" or accelerator.communication_backend_name() not in ("gloo", "ccl"):
        raise BertkitError(f"train.deepspeed: no CUDA GPU here and DeepSpeed's accelerator is "
                           f"{accelerator.device_name()} ({accelerator.communication_backend_name()}) — run on CUDA "
                           f"GPUs, set DS_ACCELERATOR=cpu, or drop train.deepspeed")


def engine_arguments(train: dict, cuda: bool | None = None) -> dict:
    """TrainingArguments keywords beside train: for the engine asked for. DeepSpeed on CPU: accelerate starts
    DeepSpeed with no backend there and counts one process, so the process state is set up here (gloo, DeepSpeed)
    and handed over with `use_configured_state`."""
    import torch

    cuda = torch.cuda.is_available() if cuda is None else cuda
    if not train.get("deepspeed") or cuda or not launched():
        return {}
    import deepspeed.ops
    from accelerate import PartialState

    # DeepSpeed's CPU backend JIT-compiles a shared-memory all-reduce op as it starts (about 2 minutes on 2 cores, on
    # every new machine or environment, and only with a C++ compiler) that only its tensor-parallel inference calls
    # (inference_all_reduce); ZeRO training all-reduces through torch.distributed either way
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    try:
        PartialState(backend="gloo")
    finally:
        del os.environ["ACCELERATE_USE_DEEPSPEED"]
    return {"accelerator_config": {**(train.get("accelerator_config") or {}), "use_configured_state": True}}


# ---------------------------------------------------------------------------------------------- in the run


def sharding(model: torch.nn.Module) -> dict:
    """How the model's parameters lie on this rank: FSDP2 wrapped units, this rank's parameter bytes and the
    whole model's."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor

    units = [name or "(root)" for name, module in model.named_modules() if isinstance(module, FSDPModule)]
    local = full = 0
    for parameter in model.parameters():
        size = parameter.element_size()
        full += parameter.numel() * size
        local += (parameter.to_local() if isinstance(parameter, DTensor) else parameter).numel() * size
    return {"units": units, "local_bytes": local, "full_bytes": full}


def sharding_line(model: torch.nn.Module, rank: int, world: int) -> str:
    """One line: the wrapped units and this rank's share of the parameter bytes."""
    found = sharding(model)
    units = found["units"]
    shown = ", ".join(units[:3]) + (f", ... ({len(units)} in all)" if len(units) > 3 else "")
    return (f"fsdp: {len(units)} wrapped units ({shown}); rank {rank} of {world} holds "
            f"{found['local_bytes'] / 2**20:.2f} MiB of {found['full_bytes'] / 2**20:.2f} MiB of parameters")


def deepspeed_line(model: torch.nn.Module, args) -> str:
    """One line: the ZeRO stage DeepSpeed runs, on which accelerator, and this rank's parameter bytes (ZeRO-3
    partitions the parameters themselves: `ds_tensor` is this rank's part, `ds_numel` the whole)."""
    from deepspeed.accelerator import get_accelerator

    stage = (getattr(args, "hf_deepspeed_config", None).config.get("zero_optimization", {}).get("stage", 0)
             if getattr(args, "hf_deepspeed_config", None) else "?")
    local = full = 0
    for parameter in model.parameters():
        size = parameter.element_size()
        local += (parameter.ds_tensor.numel() if hasattr(parameter, "ds_tensor") else parameter.numel()) * size
        full += getattr(parameter, "ds_numel", parameter.numel()) * size
    accelerator = get_accelerator()
    return (f"deepspeed: ZeRO-{stage} on {args.world_size} processes ({accelerator.device_name()}, "
            f"{accelerator.communication_backend_name()}); rank {args.process_index} holds {local / 2**20:.2f} MiB "
            f"of {full / 2**20:.2f} MiB of parameters")


def end_process_group() -> None:
    """End a finished distributed run's process: the process group torn down, the streams flushed, then out without
    the interpreter's teardown. Left to that teardown, a C++ thread of the CPU communication backend could be
    destroyed while still joinable: a ZeRO-3 run on CPU that had trained and saved ended one rank in "terminate called
    without an active exception" (exit -6), and torchrun reported the finished run FAILED. Tearing the group down
    first made it rarer, not gone (CI, 2026-12-06). Everything of the run is written by now; a failed run never gets
    here (its other ranks may still be in a collective)."""
    import logging
    import sys

    import torch.distributed as dist

    if not (launched() and dist.is_available() and dist.is_initialized()):
        return
    dist.destroy_process_group()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


__all__ = ["launched", "world_size", "check_launcher", "check_fsdp_config", "check_deepspeed_config",
           "deepspeed_values", "check_distributed_config", "check_launch", "engine_arguments", "sharding",
           "sharding_line", "deepspeed_line", "end_process_group"]
