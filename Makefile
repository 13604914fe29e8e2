# Front door. `make image CUDA=13` builds the cu130 image; `make test` runs every test.
# Everything a target needs (venv, Docker engine, buildx, registry, shellcheck) it installs itself.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CUDA ?= 13
TORCH ?=
PKG ?=
# which image: train (the root's wheels_manifest.yaml) or an example under images/ (images/IMAGE/wheels_manifest.yaml)
IMAGE ?= train
# the image reference `make smoke` runs in (default: the variant's newest build)
REF ?=
PYTEST_ARGS ?=
# `make test`'s pytest workers (each module whole on one, see tests/support/scheduling.py); 0: one process
TEST_WORKERS ?= 2
PUBLISH_ARGS ?=
# e.g. linux/amd64,linux/arm64: build (and lock) each of the variant's platforms
PLATFORMS ?=
PW := $(PY) build.py$(if $(filter train,$(IMAGE)),, --manifest images/$(IMAGE)/wheels_manifest.yaml)
# the main engine: 20.10 (bookworm's docker.io) or modern (Docker >= 26, containerd image store)
PINWHEEL_ENGINE ?= 20.10
# where the modern engine runs beside the main one, as a second engine (`make engine-modern`)
MODERN_ENGINE_ENV := PINWHEEL_ENGINE2=modern PINWHEEL_ENGINE2_ROOT=/var/lib/pinwheel-engine-modern \
	PINWHEEL_ENGINE2_SOCK=/run/pinwheel-engine-modern.sock PINWHEEL_ENGINE2_BRIDGE=pw-modern \
	PINWHEEL_ENGINE2_BIP=10.214.0.1/24
comma := ,
platform_list = $(subst $(comma), ,$(PLATFORMS))

.PHONY: help standins deps engine engine2 engine-modern qemu registry tools render check-render report lock image smoke publish bump base e2e test bench bench-cache bench-scale clean

help:
	@echo "make image CUDA=13     build the CUDA 13 image (installs the engine if needed)"
	@echo "make test              run all tests (unit, local index, real engine, registry, end to end)"
	@echo "make report            explain the package set and its conflicts"
	@echo "make lock              regenerate hashed locks under images/"
	@echo "make render            regenerate images/*/Dockerfile"
	@echo "make bump TORCH=2.14.1 what breaks if torch is bumped"
	@echo "make image IMAGE=sglang-base   an example image of images/ (each target takes IMAGE=)"
	@echo "make engine-modern     start Docker 26 (containerd image store) beside the main engine"
	@echo "make smoke | publish | e2e | bench | bench-scale"

$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==25.3
	$(PY) -m pip install -q -e '.[test]'
	touch $@

deps: $(VENV)/.deps

engine:
	PINWHEEL_ENGINE=$(PINWHEEL_ENGINE) scripts/engine-up

# a second, independent engine on this machine: the remote build node of the remote-builder and cache tests
engine2: engine
	scripts/engine2-up >/dev/null

# the modern engine (Docker >= 26, containerd image store) as a second engine beside the main one:
# the tests of what only a modern engine renders (COPY --link) build on it
engine-modern: engine
	$(MODERN_ENGINE_ENV) scripts/engine2-up >/dev/null

# linux/arm64 builds on an x86_64 host: qemu-aarch64 registered with binfmt_misc
qemu:
	scripts/qemu-up

registry:
	scripts/registry-up

tools:
	@command -v shellcheck >/dev/null || { apt-get update -qq && apt-get install -y -qq shellcheck >/dev/null; }

# an example's stand-in wheels (images/IMAGE/standins.yaml) for what this machine cannot download: into wheels/
standins: deps
	$(PY) scripts/standin-wheels images/$(IMAGE)

render: deps
	$(PW) render

check-render: deps
	$(PW) render --check

# report and bump judge each of the variant's platforms; PLATFORMS naming one judges that one
one_platform = $(if $(filter 1,$(words $(platform_list))), --platform $(PLATFORMS),)

report: deps standins
	$(PW) report --cuda $(CUDA)$(one_platform)

lock: deps standins
	$(if $(PLATFORMS),$(foreach p,$(platform_list),$(PW) lock --cuda $(CUDA) --platform $(p) $(if $(ENGINE),--resolver $(ENGINE),) && ) true,$(PW) lock --cuda $(CUDA) $(if $(ENGINE),--resolver $(ENGINE),))

base: deps engine standins
	$(PW) base --cuda $(CUDA)

image: deps engine $(if $(PLATFORMS),qemu,) standins
	$(if $(PLATFORMS),$(foreach p,$(platform_list),$(PW) build --cuda $(CUDA) --platform $(p) && ) true,$(PW) build --cuda $(CUDA))

smoke: deps engine
	$(PW) smoke --cuda $(CUDA) $(REF)

publish: deps engine registry
	$(PW) publish --cuda $(CUDA) $(PUBLISH_ARGS)

bump: deps
	$(PW) bump $(if $(TORCH),torch==$(TORCH),$(PKG)) --cuda $(CUDA)$(one_platform)

e2e: deps engine registry tools
	$(PY) -m pytest -m e2e tests/e2e $(PYTEST_ARGS)

# every test, the end-to-end ones included (they build the real images: most of the run's time)
test: deps engine engine2 engine-modern qemu registry tools
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --e2e $(PYTEST_ARGS)

bench: deps engine
	$(PY) bench/run.py

# the layer cache across engines; empties the second engine's store (it is the bench's own)
bench-cache: deps engine engine2 registry
	$(PY) bench/cache_bench.py --json bench/results/cache_bench.json

# report, lock and render time against manifest size (10, 50, 200 packages), uv as the peer:
# bench/results/scale.json and docs/scale.png (matplotlib, from the bench extra)
$(VENV)/.bench-deps: $(VENV)/.deps
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

bench-scale: $(VENV)/.bench-deps
	$(PY) bench/scale_bench.py

clean:
	rm -rf $(VENV) .pytest_cache
