"""HTTP serving under load: `bertkit serve` against the servers a user would write (benchmarks/http_anchors.py: a
FastAPI app around `transformers.pipeline`, and the same around ONNX Runtime's int8 export), same MiniLM classifier.

Variants: `bertkit` (serve's defaults: precision auto, bf16 on a CPU with native bf16 matmul; engine auto, which
times PyTorch and ONNX Runtime at start and gives each kind of call to the faster), `bertkit-torch` (engine torch:
PyTorch alone, as serve ran before the engine), `bertkit-onnx` (engine onnx: ONNX Runtime alone), `bertkit-fp32`,
`bertkit-int8` (the run directory at --precision int8), `bertkit-int8-onnx` (the same, engine onnx),
`bertkit-onnx-int8` (`bertkit serve` of the int8 export), `pipeline`, and the plain ONNX Runtime apps: `onnx-int8`
(around `onnxruntime.quantization.quantize_dynamic` of the export's fp32 model.onnx, as ONNX Runtime's documentation
shows it: the graph issue 43 measured), `onnx-int8-fused` (around the export's own int8 graph, quantized after ONNX
Runtime's BERT fusions) and `onnx-fp32`. The engine's exported graph is cached (BERTKIT_CACHE, here under --workdir),
so only the first start exports.

A bounded local load generator (asyncio, loopback only): at each concurrency level, that many clients each
send one request at a time (one text per request, drawn in turn from the texts) for `--seconds`, and the run
reports requests/s, p50 / p95 / p99 latency and errors, with requests/s and p99 as ratios to the pipeline server at
the same level. Each server runs alone in its own process (started, warmed up, measured, stopped); with `--repeats R`
the whole cycle runs R times, interleaved (A, B, C, A, B, C), and each cell prints min / median / max.

The clients speak HTTP/1.1 over asyncio streams, one keep-alive connection each, because the load generator shares
the 2 cores with the server: httpx's AsyncClient spent 9.4 s of CPU in a 10.3 s run at 150 req/s (a whole core taken
from the server it measured); these connections spend about 0.03 s. The client's own CPU time is printed per level.

`--soak S`: S seconds of `bertkit serve` at concurrency 64 with one request in ten bad (malformed JSON, too many
inputs, an unknown field), reporting errors on the good ones, the server's RSS at start (warmed up, idle), every 30 s
and at the end, and /health after.

    python benchmarks/bench_http.py [--seconds 20] [--concurrency 1,8,64] [--repeats 1] [--texts FILE.tsv]
    python benchmarks/bench_http.py --variants bertkit --concurrency "" --soak 600
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import httpx  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
# bertkit: serve's defaults (precision auto, engine auto); -torch: engine torch (serve before the engine); -fp32 /
# -int8: that precision, engine auto; -onnx-int8: `bertkit serve` of the int8 export; onnx-*: the plain ORT apps
VARIANTS = ("bertkit", "bertkit-torch", "bertkit-onnx", "bertkit-fp32", "bertkit-int8", "bertkit-int8-onnx",
            "bertkit-onnx-int8", "pipeline", "onnx-int8", "onnx-int8-fused", "onnx-fp32")
PLAIN_INT8 = "plain_int8.onnx"  # under --workdir: quantize_dynamic of the export's model.onnx, nothing else


# ------------------------------------------------------------------------------------------------------------ setup


def read_texts(path: str | None) -> list[str]:
    """The texts requests carry: a csv / tsv file's text column (sentence, text or the first), else the sample
    sentiment data."""
    paths = [Path(path)] if path else [ROOT / "data/en_sentiment/train.csv", ROOT / "data/en_sentiment/dev.csv"]
    texts = []
    for file in paths:
        with open(file, newline="", encoding="utf-8") as handle:
            rows = csv.DictReader(handle, delimiter="\t" if file.suffix == ".tsv" else ",")
            column = next((c for c in ("sentence", "text") if c in rows.fieldnames), rows.fieldnames[0])
            texts += [row[column] for row in rows if row[column]]
    return texts


def build_models(workdir: Path, need_onnx: bool) -> tuple[str, str | None]:
    """MiniLM with a 2-label head as a fine-tuned classifier directory (the head's values do not change the speed),
    its `bertkit export --quantize int8` folder, and PLAIN_INT8 beside them."""
    import torch
    import transformers

    from bertkit.checkpoints import embedded_model_path

    model_dir = workdir / "minilm-classifier"
    if not (model_dir / "config.json").exists():
        torch.manual_seed(0)
        model = transformers.BertForSequenceClassification.from_pretrained(
            embedded_model_path(), num_labels=2, id2label={0: "negative", 1: "positive"},
            label2id={"negative": 0, "positive": 1})
        model.save_pretrained(model_dir)
        transformers.AutoTokenizer.from_pretrained(embedded_model_path()).save_pretrained(model_dir)
    export_dir = workdir / "minilm-classifier-onnx"
    if need_onnx and not (export_dir / "onnx_export.json").exists():
        subprocess.run([str(BIN / "bertkit"), "export", str(model_dir), "--quantize", "int8", "-o", str(export_dir)],
                       check=True)
    if need_onnx and not (workdir / PLAIN_INT8).exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(export_dir / "model.onnx"), str(workdir / PLAIN_INT8), weight_type=QuantType.QInt8)
    return str(model_dir), str(export_dir) if need_onnx else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def server(variant: str, model_dir: str, export_dir: str | None, serve_args: tuple = ()):
    """One server process on a free loopback port, up and warmed; stopped (SIGTERM, then kill) on exit."""
    port = free_port()
    if variant.startswith("bertkit"):
        target, options = {"bertkit": (model_dir, ()), "bertkit-torch": (model_dir, ("--engine", "torch")),
                           "bertkit-onnx": (model_dir, ("--engine", "onnx")),
                           "bertkit-int8-onnx": (model_dir, ("--precision", "int8", "--engine", "onnx")),
                           "bertkit-fp32": (model_dir, ("--precision", "fp32")),
                           "bertkit-int8": (model_dir, ("--precision", "int8")),
                           "bertkit-onnx-int8": (export_dir, ("--precision", "int8"))}[variant]
        command = [str(BIN / "bertkit"), "serve", target, "--port", str(port), *options, *serve_args]
    else:
        kind, target = ("pipeline", model_dir) if variant == "pipeline" else ("onnx", export_dir)
        command = [sys.executable, str(HERE / "http_anchors.py"), kind, target, "--port", str(port)]
        if kind == "onnx":
            precision = variant.split("-")[1]
            graph = ["--graph", str(Path(export_dir).parent / PLAIN_INT8)] if variant == "onnx-int8" else []
            command += ["--precision", precision, *graph]
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "BERTKIT_CACHE": str(Path(model_dir).parent / "cache")})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"{variant} server exited: {log.read()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{variant} server did not come up in 180 s")
            time.sleep(0.3)
        for _ in range(10):  # warm-up
            httpx.post(f"{url}/predict", json={"inputs": "a warm-up sentence"}, timeout=60)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ------------------------------------------------------------------------------------------------------------- load


BAD_BODIES = (b'{"inputs": "unclosed', json.dumps({"inputs": ["x"] * 500}).encode(),
              b'{"inputs": "fine", "unknown_field": 1}')


class Connection:
    """One keep-alive HTTP/1.1 connection to the server: send a request, read the status line, the headers and a
    Content-Length body (what uvicorn answers with). Reconnects after the server closes it."""

    def __init__(self, url: str):
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.reader = self.writer = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        try:
            self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            status = int((await self.reader.readuntil(b"\r\n")).split()[1])
            length, close = 0, False
            while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
                name, _, value = line.decode("latin-1").partition(":")
                name, value = name.strip().lower(), value.strip().lower()
                length = int(value) if name == "content-length" else length
                close = close or (name == "connection" and value == "close")
            data = await self.reader.readexactly(length)
        except BaseException:
            self.close()
            raise
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def load(url: str, texts: list[str], concurrency: int, seconds: float, bad_every: int = 0) -> dict:
    """`concurrency` clients, one request at a time each, for `seconds`. Latencies of the good requests; errors are
    good requests that did not get 200 with one answer (bad ones are counted apart: they must get a 4xx)."""
    latencies, errors, bad_answers, statuses = [], 0, 0, {}
    counter = iter(range(10**12))
    stop = time.perf_counter() + seconds
    bodies = [json.dumps({"inputs": text}).encode() for text in texts]

    async def client_loop() -> None:
        nonlocal errors, bad_answers
        connection = Connection(url)
        while time.perf_counter() < stop:
            n = next(counter)
            bad = bad_every and n % bad_every == bad_every - 1
            started = time.perf_counter()
            try:
                status, data = await asyncio.wait_for(
                    connection.post("/predict", BAD_BODIES[n % len(BAD_BODIES)] if bad else bodies[n % len(bodies)]),
                    timeout=120)
                if status == 200 and not bad and len(json.loads(data)) != 1:
                    status = "wrong answer"
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as error:
                status = type(error).__name__
            statuses[status] = statuses.get(status, 0) + 1
            if bad:
                bad_answers += not (isinstance(status, int) and 400 <= status < 500)
            elif status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1
        connection.close()

    began, cpu_began = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(int(q * len(latencies)), len(latencies) - 1)] * 1000 if latencies else float("nan")

    return {"rps": len(latencies) / elapsed, "p50": pct(0.50), "p95": pct(0.95), "p99": pct(0.99),
            "errors": errors, "bad_not_4xx": bad_answers, "requests": sum(statuses.values()), "statuses": statuses,
            "client_cpu_s": time.process_time() - cpu_began}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---------------------------------------------------------------------------------------------------------- report


def spread(values: list[float], fmt: str = "{:,.1f}") -> str:
    values = sorted(values)
    if len(values) == 1:
        return fmt.format(values[0])
    return " / ".join(fmt.format(v) for v in (values[0], statistics.median(values), values[-1]))


def print_table(results: dict, variants: list[str], levels: list[int], reference: str = "pipeline") -> None:
    print(f"\nrequests/s, latency in ms (min / median / max over repeats); ratios to the {reference} server at the "
          "same concurrency, per repeat")
    print(f"{'server':<11} {'conc':>4}  {'req/s':>22}  {'p50':>20}  {'p95':>20}  {'p99':>20}  {'errors':>6}  "
          f"{'x req/s':>18}  {'p99 ratio':>18}")
    for variant in variants:
        for level in levels:
            runs = results[variant][level]
            ref = results.get(reference, {}).get(level)
            ratio = p99_ratio = "-"
            if ref and variant != reference:
                ratio = spread([r["rps"] / b["rps"] for r, b in zip(runs, ref)], "{:.2f}x")
                p99_ratio = spread([r["p99"] / b["p99"] for r, b in zip(runs, ref)], "{:.2f}")
            print(f"{variant:<11} {level:>4}  {spread([r['rps'] for r in runs]):>22}  "
                  f"{spread([r['p50'] for r in runs]):>20}  {spread([r['p95'] for r in runs]):>20}  "
                  f"{spread([r['p99'] for r in runs]):>20}  {sum(r['errors'] for r in runs):>6}  {ratio:>18}  "
                  f"{p99_ratio:>18}")


def machine_line() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "?")
    flags = Path("/proc/cpuinfo").read_text()
    extras = [f for f in ("avx512_bf16", "amx_bf16", "avx512_vnni", "avx2") if f in flags]
    return f"{model}, {os.cpu_count()} cores, {' '.join(extras)}; load average {os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--texts", default=None, help="csv / tsv with the request texts (default: the sample data)")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "bench_http"))
    parser.add_argument("--soak", type=float, default=0, help="seconds of the soak (bertkit only); 0: none")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--serve-args", default="", help="extra options for bertkit serve, e.g. '--threads 1'")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}: use {', '.join(VARIANTS)}")
    levels = [int(c) for c in args.concurrency.split(",") if c]  # --concurrency "": the soak alone
    texts = read_texts(args.texts)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    model_dir, export_dir = build_models(workdir, any("onnx" in v for v in variants))
    print(machine_line())
    print(f"{len(texts)} texts; {args.seconds:g} s per level; concurrency {levels}; repeats {args.repeats}")

    results = {variant: {level: [] for level in levels} for variant in variants}
    engines = {variant: [] for variant in variants if variant.startswith("bertkit")}  # what serve chose, per start
    for repeat in range(args.repeats if levels else 0):
        for variant in variants:
            with server(variant, model_dir, export_dir, tuple(args.serve_args.split())) as (url, _):
                if variant in engines:
                    engines[variant].append(httpx.get(f"{url}/info", timeout=10).json()["engine"])
                    chosen = engines[variant][-1]
                    print(f"  repeat {repeat + 1} {variant}: one input -> {chosen['single']}, batches -> "
                          f"{chosen['batch']}; timed {chosen['ms_per_input']}", flush=True)
                for level in levels:
                    result = asyncio.run(load(url, texts, level, args.seconds))
                    results[variant][level].append(result)
                    print(f"  repeat {repeat + 1} {variant:<10} c={level:<3} {result['rps']:8.1f} req/s  p50 "
                          f"{result['p50']:7.1f}  p99 {result['p99']:7.1f} ms  errors {result['errors']}  client CPU "
                          f"{result['client_cpu_s']:.2f} s", flush=True)
    if levels:
        for reference in ("pipeline", "onnx-int8", "onnx-int8-fused", "onnx-fp32"):
            if reference in variants:
                print_table(results, variants, levels, reference)

    soak = None
    if args.soak:
        with server("bertkit", model_dir, export_dir, tuple(args.serve_args.split())) as (url, process):
            rss = [(0.0, rss_mb(process.pid))]

            async def soak_with_samples() -> dict:
                async def sample() -> None:  # the server's RSS every 30 s while the load runs
                    began = time.perf_counter()
                    while True:
                        await asyncio.sleep(30)
                        rss.append((time.perf_counter() - began, rss_mb(process.pid)))

                sampler = asyncio.create_task(sample())
                try:
                    return await load(url, texts, 64, args.soak, bad_every=10)
                finally:
                    sampler.cancel()

            result = asyncio.run(soak_with_samples())
            rss.append((args.soak, rss_mb(process.pid)))
            health = httpx.get(f"{url}/health", timeout=10).json()
        after_minute = [mb for seconds, mb in rss if seconds >= 60]
        soak = {**result, "rss_start_mb": rss[0][1], "rss_end_mb": rss[-1][1], "rss_mb_every_30_s": rss,
                "rss_from_1_min_mb": [min(after_minute), max(after_minute)] if after_minute else None,
                "health_after": health}
        print(f"\nsoak: {args.soak:g} s at concurrency 64, 1 request in 10 bad: {result['requests']:,} requests, "
              f"{result['rps']:.1f} good req/s, errors on good requests {result['errors']}, bad requests not "
              f"answered 4xx {result['bad_not_4xx']}, statuses {result['statuses']}; RSS {rss[0][1]:,.0f} MB at "
              f"start (warmed up, idle), {rss[-1][1]:,.0f} MB at the end"
              + (f", {min(after_minute):,.0f}-{max(after_minute):,.0f} MB from the first minute on" if after_minute
                 else "") + f"; /health after: {health}")
        print("RSS (s, MB): " + "  ".join(f"{seconds:.0f}:{mb:,.0f}" for seconds, mb in rss))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "engines": engines, "soak": soak}, indent=2,
                                              default=str))


if __name__ == "__main__":
    main()
