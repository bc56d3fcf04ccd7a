# bertkit: `make demo` sets everything up and fine-tunes the embedded default; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
# The CPU build of torch (it lies on disk on the project's machines). GPU users: make setup TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
OFFLINE := HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false

.PHONY: setup demo test test-serial lint bench bench-model bench-e2e bench-families gpu-check clean

setup: $(VENV)/.bertkit-installed

$(VENV)/.bertkit-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

demo: setup
	$(OFFLINE) $(BIN)/bertkit run classify -c classify/en_sentiment
	$(OFFLINE) $(BIN)/bertkit predict runs/en_sentiment data/en_sentiment/dev.csv -o runs/en_sentiment/dev_predictions.jsonl

# The suite includes tests/test_wheel.py: the wheel installed into a fresh venv (with this torch pin), run from /tmp.
# One pytest worker per core (pytest-xdist); `make test-serial` runs them one after another. The 20 slowest steps are
# listed at the end, so that every CI log shows where the suite's time goes.
test: setup
	$(OFFLINE) BERTKIT_TORCH="$(TORCH)" $(BIN)/pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=20

test-serial: setup
	$(OFFLINE) BERTKIT_TORCH="$(TORCH)" $(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check bertkit recipes tests benchmarks

# Speed against transformers: the model on its own (about 3 min), whole fine-tuning runs (about 10 min), then one
# row per encoder family (about 20 min).
bench: bench-model bench-e2e bench-families

bench-model: setup
	$(OFFLINE) $(BIN)/python benchmarks/bench_model.py

bench-e2e: setup
	$(OFFLINE) $(BIN)/python benchmarks/bench_e2e.py

# One row per encoder family: bertkit's classify recipe against a plain Trainer on the same tiny-wide model.
bench-families: setup
	$(OFFLINE) $(BIN)/python benchmarks/bench_families.py

# On a machine with one CUDA GPU, from the repo alone (no setup): finds or installs CUDA torch, runs the gpu-marked
# tests and a short benchmark (bertkit vs transformers sdpa / flash attention 2, bf16 / fp16, FSDP on 1 GPU, ModernBERT
# unpadded) in under 8 minutes, and writes benchmarks/results/gpu.json. Without a GPU it runs its CPU-safe part and
# exits 1.
gpu-check:
	$(OFFLINE) $(PYTHON) benchmarks/gpu_check.py

clean:
	rm -rf runs .pytest_cache
