# Every target makes and fills its own environment (.venv) first; when pyproject.toml has not changed,
# that step is a no-op.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The real Sequences CLI, in a venv apart (sequence-base, which it pulls in, carries no licence: no code of ours
# imports it); the tests drive our server with it.
SEQ_VENV := .venv-seq
SEQ_STAMP := $(SEQ_VENV)/.installed
# Each published positronic-platform-client users install today, in a venv of its own: the tests drive one
# server with both (tests/test_positronic_clients.py).
POSITRONIC_CLIENTS := 0.41.2 0.37.1
CLIENT_STAMPS := $(foreach v,$(POSITRONIC_CLIENTS),.venv-positronic-$(v)/.installed)
# The suite runs on this many pytest-xdist processes, each test file whole on one of them (its module
# fixtures, a real server or simulator, are built once). Two keep both cores busy: a test spends most of
# its time waiting on the servers, workers and simulators it starts. `make test TEST_WORKERS=0` runs it in
# this one process.
TEST_WORKERS ?= 2
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: demo test test-loaded bench lint env clean browser sandbox containers wrk three

env: $(STAMP) $(SEQ_STAMP) $(CLIENT_STAMPS)

$(STAMP): pyproject.toml setup.py src/yardstick/replay3d/_columns.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[sim,libero,pusht,aloha,cluster,test,bench]'
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps openpi-client==0.1.2
	@touch $(STAMP)

$(SEQ_STAMP):
	@test -x $(SEQ_VENV)/bin/python || $(PYTHON) -m venv $(SEQ_VENV)
	$(SEQ_VENV)/bin/python -m pip install --quiet --disable-pip-version-check "sequence-ai[data]==0.51.5"
	@touch $(SEQ_STAMP)

.venv-positronic-%/.installed:
	@test -x .venv-positronic-$*/bin/python || $(PYTHON) -m venv .venv-positronic-$*
	.venv-positronic-$*/bin/python -m pip install --quiet --disable-pip-version-check "positronic-platform-client==$*"
	@touch $@

demo: $(STAMP)
	$(VENV)/bin/yardstick eval run --benchmark mt10 --policy expert --trials 10 --out runs/demo --overwrite \
		--record video --param 'benchmark.cameras=["corner"]' --param benchmark.image_size=128 \
		--param benchmark.reflections=false

# The pages' tests run in Debian's chromium; Playwright drives it (no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the pages' tests"; \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# Uploaded code runs boxed in Debian's bubblewrap (yardstick.hosted.sandbox); its tests make real boxes.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
		echo "installing Debian's bubblewrap for boxing uploaded code"; \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap; }

# Policy images run in Debian's podman with runc (yardstick.worker.boxes.containers); their tests push to
# Debian's docker-registry on loopback.
containers:
	@{ command -v podman && command -v runc && command -v docker-registry && command -v mmdebstrap; } >/dev/null 2>&1 || { \
		echo "installing Debian's podman, runc, docker-registry and mmdebstrap for images"; \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
			podman runc docker-registry mmdebstrap; }

# bench/gateway.py loads the gateway with Debian's wrk (it skips that part, saying why, without it).
wrk:
	@command -v wrk >/dev/null 2>&1 || { \
		echo "installing Debian's wrk for the gateway's bench"; \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq wrk; }

test: $(STAMP) $(SEQ_STAMP) $(CLIENT_STAMPS) browser sandbox containers
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -q --durations=15 --numprocesses=$(TEST_WORKERS) --dist=loadfile

# The suite as a shared lab machine runs it: beside two busy processes per core (bench/beside_busy.py starts
# and reaps them). Waits scale with the load (tests/deadlines.py); nothing in it measures speed.
test-loaded: $(STAMP)
	$(PY) bench/beside_busy.py --per-core 2 -- $(MAKE) test

bench: $(STAMP) $(SEQ_STAMP) wrk sandbox containers
	$(PY) bench/engine.py
	$(PY) bench/wire.py
	$(PY) bench/gateway.py
	$(PY) bench/benchmarks.py
	$(PY) bench/replay.py
	$(PY) bench/replay_viewer.py
	$(PY) bench/render.py
	$(PY) bench/sandbox.py
	$(PY) bench/images.py
	$(PY) bench/coverage.py
	$(PY) bench/sequential.py
	$(PY) bench/rig_stop.py
	$(PY) bench/connect.py
	$(PY) bench/cluster.py
	$(PY) bench/quickly.py

# The 3D replay viewer's three.js (the module build, its glTF loader and orbit controls, and the MIT licence),
# vendored from npm into the package's static files so no page loads it from a CDN. `make three` refreshes
# them (THREE_VERSION=...); it needs npm, so it is no part of `make test`, which uses the files committed.
THREE_VERSION ?= 0.187.0
THREE_DIR := src/yardstick/web/static/three
THREE_FILES := LICENSE build/three.core.js build/three.module.js examples/jsm/loaders/GLTFLoader.js \
	examples/jsm/controls/OrbitControls.js examples/jsm/utils/BufferGeometryUtils.js \
	examples/jsm/utils/SkeletonUtils.js

three:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	( cd "$$tmp" && npm pack --silent three@$(THREE_VERSION) >/dev/null && tar xzf three-$(THREE_VERSION).tgz ); \
	rm -rf $(THREE_DIR); \
	for f in $(THREE_FILES); do mkdir -p $(THREE_DIR)/$$(dirname $$f); cp "$$tmp/package/$$f" $(THREE_DIR)/$$f; done; \
	echo $(THREE_VERSION) > $(THREE_DIR)/VERSION; \
	echo "three $(THREE_VERSION) vendored into $(THREE_DIR)"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) $(SEQ_VENV) runs .pytest_cache .mypy_cache .ruff_cache
