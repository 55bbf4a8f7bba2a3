# Two set-up commands (see README): `make run` and `make test`. Everything they need is installed here.
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
export FLASK_APP := wsgi
BIND ?= 127.0.0.1:5000
# Signing links in mail point at the address the app listens on, unless APP_URL says otherwise (config.py).
export BIND

.PHONY: run test lint docs docs-build screenshots api-fuzz bench system-deps system-deps-test venv clean

$(BIN)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed

system-deps:
	scripts/install-system-deps.sh

system-deps-test:
	scripts/install-system-deps.sh --test

## The whole app on embedded defaults (SQLite, local Redis, local SMTP catcher).
run: system-deps venv
	mkdir -p var
	scripts/ensure-redis.sh
	$(BIN)/flask db upgrade
	$(BIN)/flask demo
	@echo
	@echo "  Bulksign is starting on http://$(BIND)/  (caught mail: http://$(BIND)/admin/mailbox)"
	@echo
	$(BIN)/honcho start -f Procfile.dev

## The whole suite against real PostgreSQL, Redis, wkhtmltopdf, SMTP and Chromium.
# TEST_WORKERS pytest processes share the tests (pytest-xdist), each on its own database, Redis, PgBouncer and
# SMTP server. Two on 2 cores: three finished sooner (16 min against 18.8) but two browser tests' 5 s waits then
# failed in one run of two. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: lint docs-build system-deps-test
	scripts/ensure-postgres.sh
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

## ruff (lint and format), the architecture's import contracts (import-linter) and the type check (mypy), all
## configured in pyproject.toml.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

## The documentation site (MkDocs, mkdocs.yml): `make docs` serves it on DOCS_BIND, `make test` builds it with --strict
## (a broken link or a page missing from the nav fails). The two variables quiet the banner mkdocs-material and its
## plugins print about MkDocs 2.
DOCS_BIND ?= 127.0.0.1:8001
docs: venv
	$(BIN)/python scripts/docs_reference.py
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs serve -a $(DOCS_BIND)

docs-build: venv
	$(BIN)/python scripts/docs_reference.py
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict -d var/site

## The guides' pictures, taken again by the browser tests that show those screens (scripts/screenshots.py).
screenshots: system-deps-test venv
	$(BIN)/python scripts/screenshots.py

## The API fuzzer for longer than `make test` runs it (API_FUZZ_SECONDS of fuzzing and stateful sequences).
API_FUZZ_SECONDS ?= 600
api-fuzz: system-deps-test venv
	scripts/ensure-postgres.sh
	API_FUZZ_SECONDS=$(API_FUZZ_SECONDS) API_FUZZ_EXAMPLES=200 $(BIN)/python -m pytest -q tests/views/api/test_api_contract.py -k schemathesis

## Every benchmark under bench/, one table of figures (on demand; CI runs a small version in tests).
bench: system-deps-test venv
	scripts/ensure-postgres.sh
	scripts/ensure-redis.sh
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) var/storage var/mailbox .pytest_cache
