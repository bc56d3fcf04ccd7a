"""Two processes under torchrun (gloo, CPU) give the run one process gives with the same global batch: the same
final weights and metrics, outputs written once, and dev examples counted once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import run_in_process
from safetensors.torch import load_file
from test_classify import sentiment, write_csv  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def no_dropout_model_dir(tmp_path_factory, tiny_model_dir):
    """The tiny model without dropout: dropout masks differ between one process and two by design."""
    import transformers

    path = tmp_path_factory.mktemp("tiny-no-dropout")
    model = transformers.BertModel.from_pretrained(tiny_model_dir, hidden_dropout_prob=0.0,
                                                   attention_probs_dropout_prob=0.0)
    model.save_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(path)
    return str(path)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(processes: int, args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """`bertkit ARGS` under torchrun on a free port (a fixed port fails while another torchrun run, or a killed one's
    socket, holds it); `env` adds to the environment. One process is the reference the distributed runs must match:
    it runs in this process (the same code as the command, without a second interpreter's imports)."""
    if processes == 1:
        return run_in_process(*args, cwd=ROOT, env=env)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes), "--master_port",
               str(free_port()), "-m", "bertkit", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={**ENV, **(env or {})}, timeout=600)


def common(model_dir, out, *extra):
    return [f"model={model_dir}", f"output_dir={out}", "precision=fp32", "data.max_length=32", "seed=3",
            "train.num_train_epochs=2", "train.learning_rate=1.0e-3", "train.warmup_steps=0",
            "train.dataloader_drop_last=false", *extra]


def assert_same_weights(a: Path, b: Path, atol=1e-5):
    first, second = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert first.keys() == second.keys()
    for name in first:
        assert torch.allclose(first[name], second[name], atol=atol), name


@pytest.mark.slow
def test_classify_two_processes_match_one(no_dropout_model_dir, sentiment, tmp_path):  # noqa: F811
    data = [f"data.train={sentiment['train']}", f"data.eval={sentiment['dev']}"]
    single = launch(1, ["run", "classify", *common(no_dropout_model_dir, tmp_path / "one", *data,
                                                  "train.per_device_train_batch_size=8")])
    assert single.returncode == 0, single.stderr[-3000:]
    double = launch(2, ["run", "classify", *common(no_dropout_model_dir, tmp_path / "two", *data,
                                                  "train.per_device_train_batch_size=4")])
    assert double.returncode == 0, double.stderr[-3000:]
    assert_same_weights(tmp_path / "one", tmp_path / "two")
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())["eval"]
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())["eval"]
    assert one["accuracy"] == pytest.approx(two["accuracy"])
    # written once: one summary table, one model card
    assert double.stderr.count("dev metrics") == 1, double.stderr[-2000:]


@pytest.mark.slow
def test_mlm_two_processes_match_one(no_dropout_model_dir, tmp_path):
    """Masks are drawn per example from (seed, epoch, row), so 2 processes x 4 mask exactly as 1 process x 8 does:
    the same weights after 2 epochs (fresh masks in epoch 2) and the same held-out perplexity."""
    from bertkit.tasks.mlm.corpus import documents_from_lines

    lines = (ROOT / "data" / "corpus" / "en_medical.txt").read_text(encoding="utf-8").split("\n")
    paragraphs = [p for doc in documents_from_lines(lines) for p in doc]
    (tmp_path / "train.txt").write_text("\n".join(paragraphs[:39]) + "\n", encoding="utf-8")
    (tmp_path / "eval.txt").write_text("\n".join(paragraphs[39:47]) + "\n", encoding="utf-8")
    data = [f"data.train={tmp_path / 'train.txt'}", f"data.eval={tmp_path / 'eval.txt'}", "data.mode=group",
            "masking.whole_word=wordpiece", "train.logging_steps=5"]

    single = launch(1, ["run", "mlm", *common(no_dropout_model_dir, tmp_path / "one", *data),
                       "train.per_device_train_batch_size=8"])
    assert single.returncode == 0, single.stderr[-3000:]
    # 19 full global batches of 8: no ragged last step, which 2 processes would pad with repeated examples
    assert "152 train" in single.stderr
    double = launch(2, ["run", "mlm", *common(no_dropout_model_dir, tmp_path / "two", *data),
                       "train.per_device_train_batch_size=4"])
    assert double.returncode == 0, double.stderr[-3000:]

    assert_same_weights(tmp_path / "one", tmp_path / "two")
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert two["eval"]["perplexity_before"] == one["eval"]["perplexity_before"]  # fixed held-out masks
    assert two["eval"]["perplexity"] == pytest.approx(one["eval"]["perplexity"], rel=1e-5)
    assert one["eval"]["perplexity"] < one["eval"]["perplexity_before"]  # it trained
    # written once: one summary table, one "before" line, one model card
    assert double.stderr.count("mlm: held-out perplexity") == 1, double.stderr[-2000:]
    assert double.stderr.count("perplexity before training") == 1, double.stderr[-2000:]
    assert (tmp_path / "two" / "README.md").is_file()


@pytest.mark.slow
def test_chunked_evaluation_counts_each_document_once_across_processes(no_dropout_model_dir, tmp_path):
    docs = [json.loads(line) for line in (ROOT / "data" / "long_docs" / "dev.jsonl").read_text().splitlines()]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(d) for d in docs[:12]) + "\n")
    (tmp_path / "dev.jsonl").write_text("\n".join(json.dumps(d) for d in docs[12:19]) + "\n")  # 7: odd on purpose
    args = ["run", "classify", *common(no_dropout_model_dir, tmp_path / "two", f"data.train={tmp_path / 'train.jsonl'}",
                                       f"data.eval={tmp_path / 'dev.jsonl'}", "long_doc.strategy=chunk",
                                       "long_doc.stride=8", "long_doc.max_windows=3",
                                       "train.per_device_train_batch_size=4", "train.num_train_epochs=1")]
    double = launch(2, args)
    assert double.returncode == 0, double.stderr[-3000:]
    metrics = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert metrics["eval"]["documents"] == 7 == metrics["rows"]["dev_documents"]
    single = launch(1, [a.replace(str(tmp_path / "two"), str(tmp_path / "one")) for a in args])
    assert single.returncode == 0, single.stderr[-3000:]
    assert json.loads((tmp_path / "one" / "metrics.json").read_text())["eval"]["documents"] == 7


# ---------------------------------------------------------------------------------------------- several nodes


ACCELERATE_MULTI_NODE = ROOT / "recipes" / "configs" / "accelerate" / "multi_node.json"


def start_nodes(args: list[str], cwds: list[Path], logs: Path,
                accelerate_config: Path | None = None) -> list[subprocess.Popen]:
    """`bertkit ARGS` as 2 "nodes" of 1 process on 127.0.0.1: one torchrun agent per node (--nnodes 2 --node_rank K),
    or `accelerate launch --config_file ACCELERATE_CONFIG --machine_rank K` (the README's command), each in its own
    working directory, as on two machines sharing only the output_dir's filesystem."""
    port, nodes = free_port(), []
    for rank, cwd in enumerate(cwds):
        cwd.mkdir(exist_ok=True)
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
                   "--node_rank", str(rank), "--master_addr", "127.0.0.1", "--master_port", str(port),
                   "-m", "bertkit", *args]
        if accelerate_config:
            command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config),
                       "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1", "--main_process_port",
                       str(port), "-m", "bertkit", *args]
        nodes.append(subprocess.Popen(command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL,
                                      stderr=open(logs / f"node{rank}.log", "w")))
    return nodes


def one_epoch(sentiment) -> list[str]:  # noqa: F811
    return [f"data.train={sentiment['train']}", f"data.eval={sentiment['dev']}", "train.num_train_epochs=1"]


@pytest.fixture(scope="module")
def one_epoch_single_run(no_dropout_model_dir, sentiment, tmp_path_factory) -> Path:  # noqa: F811
    """The one-process run both launchers' two nodes must give (one epoch, batch 8)."""
    out = tmp_path_factory.mktemp("one-process") / "one"
    single = launch(1, ["run", "classify", *common(no_dropout_model_dir, out, *one_epoch(sentiment),
                                                  "train.per_device_train_batch_size=8")])
    assert single.returncode == 0, single.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_nodes_give_the_single_process_run_written_once(no_dropout_model_dir, sentiment, tmp_path,  # noqa: F811
                                                            one_epoch_single_run, launcher):
    """2 "nodes" of 1 process on 127.0.0.1, by torchrun (--nnodes 2 --node_rank K) or by `accelerate launch
    --config_file recipes/configs/accelerate/multi_node.json --machine_rank K --main_process_ip HOST` (the config is
    read, not overridden: its num_machines and num_processes make the two nodes one run): the single-process run's
    weights, written once."""
    data = one_epoch(sentiment)
    cwds = [tmp_path / "machine0", tmp_path / "machine1"]
    nodes = start_nodes(["run", "classify", *common(no_dropout_model_dir, tmp_path / "two", *data,
                                                    "train.per_device_train_batch_size=4")], cwds, tmp_path,
                        accelerate_config=ACCELERATE_MULTI_NODE if launcher == "accelerate" else None)
    codes = [node.wait(timeout=600) for node in nodes]
    logs = [(tmp_path / f"node{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert_same_weights(one_epoch_single_run, tmp_path / "two")
    assert (tmp_path / "two" / "bertkit_run.json").is_file()  # finished: the completion record
    # written once: rank 0 printed the summary; nothing written into either node's working directory
    assert sum(log.count("dev metrics") for log in logs) == 1
    assert [list(cwd.iterdir()) for cwd in cwds] == [[], []]


@pytest.mark.slow
def test_accelerate_multi_cpu_without_mpirun_is_refused(tmp_path):
    """accelerate launch's MULTI_CPU across machines without mpirun starts one process per machine with no rank (each
    would train alone and write the same output_dir): refused in one line before anything runs."""
    config = json.loads(ACCELERATE_MULTI_NODE.read_text())
    path = tmp_path / "multi_cpu.json"
    path.write_text(json.dumps({**config, "distributed_type": "MULTI_CPU", "use_cpu": True}))
    nodes = start_nodes(["run", "classify", f"output_dir={tmp_path / 'out'}"], [tmp_path / "machine0"], tmp_path,
                        accelerate_config=path)
    assert nodes[0].wait(timeout=120) != 0
    log = (tmp_path / "node0.log").read_text()
    assert "accelerate launch started this process alone, with no rank" in log, log[-3000:]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_lost_node_stops_the_survivor_and_resume_continues(no_dropout_model_dir, sentiment, tmp_path):  # noqa: F811
    """Node 1 killed (agent and worker) once a checkpoint is complete: node 0 exits non-zero within seconds with a
    line naming the lost peer (gloo sees the connection reset; a hung peer would wait train.ddp_timeout, 1800 s by
    default); both nodes rerun with resume=true continue from the last complete checkpoint and finish."""
    import time

    import psutil

    out = tmp_path / "run"
    args = ["run", "classify", *common(no_dropout_model_dir, out, f"data.train={sentiment['train']}",
                                       f"data.eval={sentiment['dev']}", "train.per_device_train_batch_size=4",
                                       "train.num_train_epochs=40", "train.save_strategy=steps", "train.save_steps=6",
                                       "train.eval_strategy=steps", "train.eval_steps=6")]
    cwds = [tmp_path / "machine0", tmp_path / "machine1"]
    nodes = start_nodes(args, cwds, tmp_path)
    deadline = time.monotonic() + 300
    while not (out / "checkpoint-12").is_dir() and time.monotonic() < deadline and nodes[0].poll() is None:
        time.sleep(0.2)
    assert (out / "checkpoint-12").is_dir(), (tmp_path / "node0.log").read_text()[-3000:]
    agent = psutil.Process(nodes[1].pid)
    for process in [*agent.children(recursive=True), agent]:  # the whole node: its agent and its worker
        process.kill()
    lost = time.monotonic()
    code = nodes[0].wait(timeout=120)
    waited = time.monotonic() - lost
    log = (tmp_path / "node0.log").read_text()
    assert code != 0 and waited < 60, (code, waited)
    assert "Connection reset by peer" in log or "Connection closed by peer" in log, log[-3000:]
    assert not (out / "bertkit_run.json").exists()  # unfinished, visibly

    resumed = start_nodes([*args, "resume=true"], cwds, tmp_path)
    codes = [node.wait(timeout=600) for node in resumed]
    log = (tmp_path / "node0.log").read_text()
    assert codes == [0, 0], log[-3000:]
    assert "resuming from" in log and "checkpoint-" in log.split("resuming from")[1][:200]
    assert (out / "bertkit_run.json").is_file()


END_SCRIPT = """
import atexit, os, sys
import torch.distributed as dist
from bertkit.distributed import end_process_group
end_process_group()  # no process group yet: nothing happens
print("no group: went on", flush=True)
dist.init_process_group("gloo", rank=0, world_size=1)
atexit.register(lambda: print("interpreter teardown ran", flush=True))
print("finished run", end="")  # unflushed: end_process_group flushes it
end_process_group()
print("after end_process_group")
"""


def test_a_finished_distributed_process_leaves_without_the_interpreters_teardown(tmp_path):
    """The teardown could destroy a joinable C++ thread of the CPU backend (std::terminate, exit -6, torchrun: FAILED)
    after a run had trained and saved: a finished rank flushes and leaves with 0 instead."""
    script = tmp_path / "end.py"
    script.write_text(END_SCRIPT)
    env = {**ENV, "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("no group: went on\nfinished run"), done.stdout
    assert "after end_process_group" not in done.stdout and "teardown ran" not in done.stdout, done.stdout
