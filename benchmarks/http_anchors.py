"""The servers a user would write instead of `bertkit serve`, for benchmarks/bench_http.py to measure against:

  pipeline   a FastAPI app around `transformers.pipeline("text-classification")`, a plain `def` endpoint (FastAPI
             runs it in its thread pool, one request per call), as the FastAPI and transformers docs show it
  onnx       the same app around ONNX Runtime running `bertkit export --quantize int8`'s int8 graph (--precision
             fp32: the export's fp32 graph; --graph FILE: another graph, e.g. the user's own
             `onnxruntime.quantization.quantize_dynamic` of the export's model.onnx)

    python benchmarks/http_anchors.py pipeline MODEL_DIR --port 8001
    python benchmarks/http_anchors.py onnx EXPORT_DIR --port 8002 [--graph FILE]

Both answer POST /predict {"inputs": text or [texts]} with a list of {label, score}, and GET /health.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from pydantic import BaseModel  # noqa: E402


class Body(BaseModel):
    inputs: str | list[str]


def app_around(classify) -> FastAPI:
    """The app a user writes around a `classify(texts) -> [{label, score}]` function: /health and a plain `def`
    /predict (FastAPI runs it in its thread pool, one request per call)."""
    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.post("/predict")
    def predict(body: Body):
        return classify([body.inputs] if isinstance(body.inputs, str) else body.inputs)

    return app


def pipeline_app(model_dir: str) -> FastAPI:
    import transformers

    pipe = transformers.pipeline("text-classification", model=model_dir, device="cpu")
    return app_around(lambda texts: pipe(texts, truncation=True, max_length=128))


def onnx_app(export_dir: str, precision: str = "int8", graph: str | None = None) -> FastAPI:
    import onnxruntime
    import transformers

    export = json.loads((Path(export_dir) / "onnx_export.json").read_text())
    session = onnxruntime.InferenceSession(graph or str(Path(export_dir) / export["files"][precision]),
                                           providers=["CPUExecutionProvider"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(export_dir)
    id2label = json.loads((Path(export_dir) / "config.json").read_text())["id2label"]
    names = {i.name for i in session.get_inputs()}

    def classify(texts: list[str]) -> list[dict]:
        encoded = tokenizer(texts, truncation=True, max_length=128, padding=True, return_tensors="np")
        logits = session.run(None, {k: v.astype(np.int64) for k, v in encoded.items() if k in names})[0]
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        return [{"label": id2label[str(int(p.argmax()))], "score": float(p.max())} for p in probs]

    return app_around(classify)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=("pipeline", "onnx"))
    parser.add_argument("model_dir")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--precision", choices=("int8", "fp32"), default="int8", help="onnx: which graph")
    parser.add_argument("--graph", default=None, help="onnx: this graph file instead of the export's")
    args = parser.parse_args()
    app = (pipeline_app(args.model_dir) if args.kind == "pipeline"
           else onnx_app(args.model_dir, args.precision, args.graph))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
