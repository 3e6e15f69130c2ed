# Every target builds on `install`, which is quick when nothing changed (a stamp tracks pyproject.toml,
# requirements.lock and this file).
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8000
# Django 6 needs Python 3.12+; pyenv's shims may name a version that is not selected, so probe each.
PYTHON ?= $(shell for p in python3.12 python3.13 python3 /root/.pyenv/versions/3.12*/bin/python3.12 /root/.pyenv/versions/3.13*/bin/python3.13 /usr/bin/python3.12 /usr/bin/python3.13; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { echo $$p; break; }; done)

.PHONY: install lock run cluster test test-quick test-js lint format bench screenshots test-packages \
	chromium litellm chroma oidc-provider axe-core clean

# The exact versions in requirements.lock, then the app itself without resolving anything again;
# `pip check` fails when pyproject.toml asks for something the lock lacks (run `make lock`).
$(STAMP): pyproject.toml requirements.lock Makefile
	@test -n "$(PYTHON)" || { echo "Python 3.12 or newer is required (none found)."; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	$(BIN)/python -m pip check
	@touch $(STAMP)

# Mermaid, which draws answers' diagrams, from the exact tarball static_vendor/package-lock.json
# names, its integrity checked (chatapp/static_vendor.py); never copied into the repository and
# needing no Node. An unreachable registry is reported, not fatal: diagrams then show as code.
MERMAID := static/vendor/mermaid/mermaid.min.js

$(MERMAID): static_vendor/package-lock.json | $(STAMP)
	$(BIN)/python -m chatapp.static_vendor

install: $(STAMP) $(MERMAID)

# requirements.lock from pyproject.toml: the app and its dev, redis and postgres extras, pinned
# for every platform on Python 3.12+. Pins already in the file are kept unless UPGRADE=1. uv is
# installed into the venv as a tool only; the app does not need it.
lock:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q 'uv>=0.5'
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra redis --extra postgres \
		--universal --python-version 3.12 --custom-compile-command 'make lock' \
		$(if $(UPGRADE),--upgrade) -q -o requirements.lock

# `prepare`: migrate, the first admin and collectstatic in one Django start, each only if needed.
run: install
	$(BIN)/python manage.py prepare
	$(BIN)/python -m deploy.run --port $(PORT)

# Debian packages the tests drive: Chromium (browser tests), Node (the browser code's unit tests,
# `make test-js`, and the OpenID Connect provider of tests/oidc, installed with npm), and the Redis and PostgreSQL servers and nginx with its brotli_static module
# (tests/multiprocess and `make cluster` start private instances of each; the cluster's
# nginx sends gzip alone without the module). Only what is missing is installed, in one
# apt-get run (needs root, as on CI); with everything present this is a few file checks.
MISSING_PACKAGES = $(strip \
	$(if $(wildcard /usr/bin/chromium),,chromium) \
	$(if $(wildcard /usr/bin/node),,nodejs) \
	$(if $(wildcard /usr/bin/npm),,npm) \
	$(if $(wildcard /usr/bin/redis-server),,redis-server) \
	$(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql) \
	$(if $(wildcard /usr/sbin/nginx),,nginx) \
	$(if $(wildcard /usr/lib/nginx/modules/ngx_http_brotli_static_module.so),,libnginx-mod-http-brotli-static))

# PostgreSQL, Redis, two Daphne processes and nginx on loopback, as on real hosts (deploy/);
# Ctrl-C stops them all. Nothing is kept: each run starts from an empty database.
cluster: install test-packages chroma
	$(BIN)/python -m deploy.cluster --port $(or $(CLUSTER_PORT),8080)

test-packages:
	@test -z "$(MISSING_PACKAGES)" || { apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(MISSING_PACKAGES); }

chromium: test-packages

# LiteLLM's proxy for tests/litellm, in a virtualenv of its own (its pins clash with the app's),
# installed only when its stamp is missing. uv installs it (about 5 s where pip took 2 min 45 s
# on two cores: a fresh clone's `make test` would spend that before the first test). When the
# package index cannot be reached this leaves `.unreachable` in it instead of failing, and those
# tests skip saying so; any other failed install fails.
LITELLM_VERSION := 1.108.7
LITELLM_VENV := .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.installed-$(LITELLM_VERSION)

$(LITELLM_STAMP): | $(STAMP)
	@rm -rf $(LITELLM_VENV)
	@if $(BIN)/python -m pip install -q 'uv>=0.5' && \
			$(BIN)/uv venv -q -p $(BIN)/python $(LITELLM_VENV) && \
			$(BIN)/uv pip install -q --python $(LITELLM_VENV)/bin/python \
				'litellm[proxy]==$(LITELLM_VERSION)'; then touch $(LITELLM_STAMP); \
	elif ! $(BIN)/python -m pip index versions litellm --retries 1 --timeout 20 \
			>/dev/null 2>&1; then \
		mkdir -p $(LITELLM_VENV); \
		echo "The package index could not be reached: tests/litellm will skip." \
			| tee $(LITELLM_VENV)/.unreachable; \
	else exit 1; fi

litellm: $(LITELLM_STAMP)

# Chroma's vector server (`chroma run`), the store `make cluster` and tests/multiprocess use for
# knowledge collections, in a virtualenv of its own like LiteLLM's: the app talks to it over its
# REST API with httpx and never imports the chromadb package (it pulls OpenTelemetry, PostHog
# telemetry and its own pydantic pins). An unreachable package index leaves `.unreachable`
# there, and the tests that need the server skip saying so.
CHROMA_VERSION := 1.5.9
CHROMA_VENV := .venv-chroma
CHROMA_STAMP := $(CHROMA_VENV)/.installed-$(CHROMA_VERSION)

$(CHROMA_STAMP): | $(STAMP)
	@rm -rf $(CHROMA_VENV)
	@if { test -x $(BIN)/uv || $(BIN)/python -m pip install -q 'uv>=0.5'; } && \
			$(BIN)/uv venv -q -p $(BIN)/python $(CHROMA_VENV) && \
			$(BIN)/uv pip install -q --python $(CHROMA_VENV)/bin/python \
				'chromadb==$(CHROMA_VERSION)'; then touch $(CHROMA_STAMP); \
	elif ! $(BIN)/python -m pip index versions chromadb --retries 1 --timeout 20 \
			>/dev/null 2>&1; then \
		mkdir -p $(CHROMA_VENV); \
		echo "The package index could not be reached: the Chroma store's tests will skip." \
			| tee $(CHROMA_VENV)/.unreachable; \
	else exit 1; fi

chroma: $(CHROMA_STAMP)

# The OpenID Connect provider the sign-in tests start (tests/oidc/provider.mjs: panva's
# oidc-provider on Debian's Node), installed from its package-lock.json with `npm ci` into
# tests/oidc/node_modules when the lock changes. As for LiteLLM, an unreachable registry leaves
# `.unreachable` there instead of failing, and those tests skip saying so.
OIDC_DIR := tests/oidc
OIDC_STAMP := $(OIDC_DIR)/node_modules/.installed

$(OIDC_STAMP): $(OIDC_DIR)/package-lock.json | test-packages
	@rm -rf $(OIDC_DIR)/node_modules
	@if npm ci --prefix $(OIDC_DIR) --no-audit --no-fund --loglevel=error; then touch $(OIDC_STAMP); \
	elif ! npm ping >/dev/null 2>&1; then \
		mkdir -p $(OIDC_DIR)/node_modules; \
		echo "The npm registry could not be reached: tests/browser/test_single_sign_on.py will skip." \
			| tee $(OIDC_DIR)/node_modules/.unreachable; \
	else exit 1; fi

oidc-provider: $(OIDC_STAMP)

# axe-core, which tests/browser/test_axe.py injects into the app's pages, installed the same way
# from tests/axe/package-lock.json into tests/axe/node_modules (never copied into the repository).
AXE_DIR := tests/axe
AXE_STAMP := $(AXE_DIR)/node_modules/.installed

$(AXE_STAMP): $(AXE_DIR)/package-lock.json | test-packages
	@rm -rf $(AXE_DIR)/node_modules
	@if npm ci --prefix $(AXE_DIR) --no-audit --no-fund --loglevel=error; then touch $(AXE_STAMP); \
	elif ! npm ping >/dev/null 2>&1; then \
		mkdir -p $(AXE_DIR)/node_modules; \
		echo "The npm registry could not be reached: tests/browser/test_axe.py will skip." \
			| tee $(AXE_DIR)/node_modules/.unreachable; \
	else exit 1; fi

axe-core: $(AXE_STAMP)

# The suite in parallel xdist workers (tests/conftest.py says how it is split). Most of its time
# is spent waiting (paced streams, Chromium, servers starting), so more workers than cores pay:
# on two cores 3 workers take about 8 minutes for 2,400 tests where one process took about 17
# (for 2,280); 4 took longer (Chromium, servers and render processes then compete for the
# CPU). TEST_WORKERS=0
# runs it in one process.
TEST_WORKERS ?= 3
PYTEST = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

test: install test-packages litellm chroma oidc-provider axe-core
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(PYTEST)

# The in-process tests alone: no Chromium, no PostgreSQL, Redis or nginx, no fault injection,
# no server started as a process (a Daphne, an MCP server, LiteLLM's proxy).
test-quick: install
	$(PYTEST) -m "not browser and not multiprocess and not faults and not processes"

# The browser code's unit tests alone (the suite runs them too: tests/js/test_node.py). The shell
# expands the glob: Node 21 and later read --test's arguments as patterns and search no directory.
test-js:
	node --test tests/js/*.test.mjs

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/python -m benchmarks reader
	$(BIN)/python -m benchmarks load
	$(BIN)/python -m benchmarks admin
	$(BIN)/python -m benchmarks markdown
	$(BIN)/python -m benchmarks costs
	$(BIN)/python -m benchmarks knowledge

# docs/screenshot-desktop.png and docs/screenshot-phone.png, from the app as it is (docs/screenshots.py),
# with Debian's Noto fonts for the answer's CJK and emoji (without them Chromium draws boxes).
SCREENSHOT_FONTS = $(strip \
	$(if $(wildcard /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc),,fonts-noto-cjk) \
	$(if $(wildcard /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf),,fonts-noto-color-emoji))

screenshots: install test-packages
	@test -z "$(SCREENSHOT_FONTS)" || { apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SCREENSHOT_FONTS); }
	$(BIN)/python docs/screenshots.py

clean:
	rm -rf $(VENV) $(LITELLM_VENV) $(CHROMA_VENV) $(OIDC_DIR)/node_modules $(AXE_DIR)/node_modules static/vendor/mermaid staticfiles .pytest_cache
