# agentkb: `make run` serves the embedded default, `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PORT ?= 8000
MILVUS_PORT ?= 19530

.PHONY: install run test lint format clean-var mutate milvus-standalone

# The venv is rebuilt only when pyproject.toml changes.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# torch first, as the CPU build: anything that pulls torch later would otherwise fetch a multi-GB CUDA build.
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

# mysqlclient only when the machine can build it or DATABASE_URL names MySQL (then it must):
# checked on every install, since DATABASE_URL can change without pyproject.toml changing.
install: $(STAMP)
	@$(BIN)/python scripts/mysql_driver.py

# Web + Celery worker + a loopback milvus-lite server, run together by honcho (Procfile).
# Ctrl-C stops all three. Safe to run again.
run: install
	@mkdir -p var
	$(BIN)/python manage.py migrate --noinput
	@MILVUS_URI=http://127.0.0.1:$(MILVUS_PORT) $(BIN)/python manage.py setup_demo
	@echo ""
	@echo "  home       http://127.0.0.1:$(PORT)/"
	@echo "  admin      http://127.0.0.1:$(PORT)/admin/"
	@echo "  API docs   http://127.0.0.1:$(PORT)/api/docs/"
	@echo "  health     http://127.0.0.1:$(PORT)/healthz"
	@echo "  MCP        http://127.0.0.1:$(PORT)/mcp/  (streamable HTTP; stdio: .venv/bin/python manage.py mcp_server)"
	@MILVUS_URI=http://127.0.0.1:$(MILVUS_PORT) $(BIN)/python manage.py shell --no-imports -c \
		"from config.debug import debug_banner, services_banner; print(services_banner()); print(debug_banner())"
	@# var/run.json names what starts here; `manage.py` in another shell reads it (config/runfile.py).
	@# $$$$ is this shell's pid, which honcho keeps through exec: the file is stale once it is gone.
	@$(BIN)/python config/runfile.py --pid $$$$ --port $(PORT) --milvus-uri http://127.0.0.1:$(MILVUS_PORT) && \
		echo "" && \
		AGENTKB_PORT=$(PORT) MILVUS_PORT=$(MILVUS_PORT) MILVUS_URI=http://127.0.0.1:$(MILVUS_PORT) \
		exec $(BIN)/honcho start -f Procfile

# Milvus 2.3.5 standalone (PyPI `milvus`, the milvus-server extra) on 127.0.0.1:$(MILVUS_PORT) and
# the next eleven ports, data in a temporary folder removed on Ctrl-C. Then, in another shell:
# MILVUS_URI=http://127.0.0.1:$(MILVUS_PORT) make test (or make run's processes).
milvus-standalone: install
	@$(BIN)/python -c 'import milvus' 2>/dev/null || $(BIN)/pip install --quiet --disable-pip-version-check 'milvus==2.3.5'
	$(BIN)/python scripts/milvus_standalone.py --port $(MILVUS_PORT)

# The whole suite. With DATABASE_URL (MySQL/MariaDB) and REDIS_URL set it also runs the
# service-backed tests (real Celery worker included); without them those are skipped with a reason.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Mutation testing of the decision code with cosmic-ray (slow, so not part of CI): every mutant is
# run against its target's tests, one at a time. MUTATE_ARGS picks targets of mutation/targets.toml
# and options (e.g. MUTATE_ARGS="tracker --report-only"); see docs/development.md.
mutate: install
	$(BIN)/python -m mutation.run $(MUTATE_ARGS)

# ruff, the import contracts (.importlinter: app directions, retrieval's layers, the lookup's stage
# order) and mypy over the lookup and the call record ([tool.mypy] in pyproject.toml).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
