# The whole developer interface. Each target creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Installed before anything that depends on torch: a CPU build (from local disk where there is
# one); left to pip, a dependency on torch pulls a multi-GB CUDA build.
TORCH ?= torch==2.13.0
# KServe's own client, for the serving tests only, without its dependencies: its pins
# (pandas<3, psutil<6) would downgrade the data stack, and its client needs none of what
# they guard (ADR 21). The rest of what `import kserve` needs is listed here.
KSERVE_CLIENT := "kserve==0.21.0" "cloudevents>=1.6.2,<2" "timing-asgi>=0.3,<1" \
	"grpc-interceptor>=0.15.4,<1" "pyjwt>=2.13" "deprecation>=2.1"

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps $(KSERVE_CLIENT)
	touch $(STAMP)

# The flagship: Higgs data -> preprocess (Polars) -> distributed XGBoost (a Dask LocalCluster)
# -> evaluate -> register, with the embedded defaults (SQLite, local artifacts). Cached when re-run.
demo: $(STAMP)
	HEADWATER_HOME=$${HEADWATER_HOME:-$(CURDIR)/.headwater-demo} $(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/pytest -q -n 2

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks examples
	$(BIN)/ruff check --fix src tests benchmarks examples

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_overhead.py
	$(BIN)/python benchmarks/cache.py
	$(BIN)/python benchmarks/metadata_scale.py

clean:
	rm -rf $(VENV) .headwater-demo .pytest_cache .mypy_cache .ruff_cache
