# Rendered by pinwheel from wheels_manifest.yaml (image demo). Do not edit: run `make render`.
# One file serves every variant (cu130, cu129): build with
# --build-arg VARIANT=<variant> and the gate values `build.py build` passes.
# Secrets (CA bundle, index configuration) arrive only as BuildKit secrets.
# Parent-free layers (image.layers): each wheel set installs in a stage of its own, from the
# venv's skeleton, and the image joins the sets' files with COPY --link. A changed set
# re-runs its own stage only; the other sets' layers keep their digests and need no parent.
ARG BASE=pinwheel/base:bookworm-py311

# ---- preflight: every wheel the manifest requires (if_missing: fail) is in
# wheels/, exactly once, before anything is installed. A stage of its own: the
# image stage reads only its marker, so a changed wheel re-runs this check and
# no layer below it. The build context holds each wheel set's own wheels in
# wheels/<set>/, which that set's step mounts.
FROM ${BASE} AS preflight
RUN --mount=type=bind,source=wheels,target=/tmp/wheels \
    set -eu; \
    missing=0; \
    set -- /tmp/wheels/local/demo_fail-*.whl; \
    if [ ! -e "$1" ]; then echo 'pinwheel: ERROR: wheels/demo_fail-*.whl is missing and demo-fail is required. run `make wheels` in ../demo' >&2; missing=1; \
    elif [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: more than one wheel in wheels/ matches demo_fail-*.whl; keep one:' "$@" >&2; missing=1; fi; \
    if [ "$missing" != 0 ]; then exit 1; fi; \
    mkdir -p /tmp/pinwheel; echo passed > /tmp/pinwheel/preflight

# ---- lock: the variant's lock files, alone in a stage. The stages below copy
# from it, so each COPY is keyed by the bytes it copies, not by the variant's
# name: variants share every layer up to their first differing step.
FROM scratch AS lock
ARG VARIANT=cu130
COPY lock/${VARIANT}/ /

# ---- installer: uv, installed from the variant's lock (installer.txt, hash-checked) in a
# stage of its own. Every wheel set's step bind-mounts its binary, so uv is in no
# layer of the image; this stage stays cached until installer.txt changes. Each step
# unpacks into a uv cache in its own layer and hard-links from it (every file written
# once), and removes that cache before the layer is committed.
FROM ${BASE} AS installer
COPY --from=lock /installer.txt /tmp/pinwheel/lock/installer.txt
# It waits for the preflight too: nothing is installed before every required wheel is there.
RUN --mount=type=bind,from=preflight,source=/tmp/pinwheel/preflight,target=/tmp/pinwheel/preflight \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    --mount=type=secret,id=ca,target=/run/secrets/ca \
    --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \
    set -eu; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    python3 -m venv /opt/pinwheel/uv; /opt/pinwheel/uv/bin/pip install --no-deps --require-hashes -r /tmp/pinwheel/lock/installer.txt

FROM ${BASE} AS venv

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH} \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    PIP_ROOT_USER_ACTION=ignore

# The venv's skeleton holds no setuptools (as a Python 3.12 venv): a wheel set that needs it installs it,
# and a layer joined with COPY --link adds files but cannot replace the skeleton's.
# The first step waits for the preflight; its marker is all it reads from it.
RUN --mount=type=bind,from=preflight,source=/tmp/pinwheel/preflight,target=/tmp/pinwheel/preflight \
    python3 -m venv /opt/venv && /opt/venv/bin/pip uninstall --yes --quiet setuptools

# ---- wheel set 1/3: core. pure-python base
#   six==1.16.0: tiny and stable
FROM venv AS wheel-set-core
COPY --from=lock /01-core.txt /tmp/pinwheel/lock/01-core.txt
RUN --mount=type=bind,from=installer,source=/opt/pinwheel/uv/bin/uv,target=/tmp/pinwheel/bin/uv \
    --mount=type=secret,id=ca,target=/run/secrets/ca \
    --mount=type=secret,id=uvconf,target=/run/secrets/uvconf \
    set -eu; \
    if [ -s /run/secrets/ca ]; then export SSL_CERT_FILE=/run/secrets/ca; fi; \
    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; fi; \
    export UV_CACHE_DIR=/tmp/pinwheel/uv-cache UV_LINK_MODE=hardlink UV_COMPILE_BYTECODE=1 UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1; \
    trap 'rm -rf /tmp/pinwheel/uv-cache' EXIT; \
    mkdir -p /tmp/pinwheel/wheel-set; find /opt/venv | LC_ALL=C sort > /tmp/pinwheel/venv-before; \
    /tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python --no-deps --require-hashes -r /tmp/pinwheel/lock/01-core.txt; \
    find /opt/venv | LC_ALL=C sort > /tmp/pinwheel/venv-after; \
    if LC_ALL=C comm -23 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | grep -q .; then \
      echo 'pinwheel: ERROR: wheel set core removed or replaced files of the venv'"'"'s skeleton (it installs pip?); a layer joined with COPY --link cannot remove them: use image.layers: chained' >&2; LC_ALL=C comm -23 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | head -n 5 >&2; exit 1; \
    fi; \
    LC_ALL=C comm -13 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | \
      awk 'NR == FNR { old[$0] = 1; next } { d = $0; sub("/[^/]*$", "", d); if (d in old) print }' /tmp/pinwheel/venv-before - | \
      while IFS= read -r p; do mkdir -p "/tmp/pinwheel/wheel-set${p%/*}"; mv "$p" "/tmp/pinwheel/wheel-set$p"; done

# ---- wheel set 2/3: gated. CUDA 13 only
# Gated by ENABLE_CUDA_13.
#   idna==3.10 --no-deps: its extras would pull more
FROM venv AS wheel-set-gated
ARG ENABLE_CUDA_13=1
COPY --from=lock /02-gated.txt /tmp/pinwheel/lock/02-gated.txt
RUN --mount=type=bind,from=installer,source=/opt/pinwheel/uv/bin/uv,target=/tmp/pinwheel/bin/uv \
    --mount=type=secret,id=ca,target=/run/secrets/ca \
    --mount=type=secret,id=uvconf,target=/run/secrets/uvconf \
    set -eu; \
    if [ -s /run/secrets/ca ]; then export SSL_CERT_FILE=/run/secrets/ca; fi; \
    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; fi; \
    export UV_CACHE_DIR=/tmp/pinwheel/uv-cache UV_LINK_MODE=hardlink UV_COMPILE_BYTECODE=1 UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1; \
    trap 'rm -rf /tmp/pinwheel/uv-cache' EXIT; \
    mkdir -p /tmp/pinwheel/wheel-set; find /opt/venv | LC_ALL=C sort > /tmp/pinwheel/venv-before; \
    if [ "${ENABLE_CUDA_13}" != "1" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping wheel set gated'; exit 0; fi; \
    /tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python --no-deps --require-hashes -r /tmp/pinwheel/lock/02-gated.txt; \
    find /opt/venv | LC_ALL=C sort > /tmp/pinwheel/venv-after; \
    if LC_ALL=C comm -23 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | grep -q .; then \
      echo 'pinwheel: ERROR: wheel set gated removed or replaced files of the venv'"'"'s skeleton (it installs pip?); a layer joined with COPY --link cannot remove them: use image.layers: chained' >&2; LC_ALL=C comm -23 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | head -n 5 >&2; exit 1; \
    fi; \
    LC_ALL=C comm -13 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | \
      awk 'NR == FNR { old[$0] = 1; next } { d = $0; sub("/[^/]*$", "", d); if (d in old) print }' /tmp/pinwheel/venv-before - | \
      while IFS= read -r p; do mkdir -p "/tmp/pinwheel/wheel-set${p%/*}"; mv "$p" "/tmp/pinwheel/wheel-set$p"; done

# ---- wheel set 3/3: local. local wheels under every policy
#   demo-fail==1.0: local wheel wheels/demo_fail-*.whl. must be present
#     if missing: fail.
#   demo-skip==1.0: local wheel wheels/demo_skip-*.whl, gated by ENABLE_CUDA_13. nice to have
#     if missing: skip.
#   demo-fallback==1.0: local wheel wheels/demo_fallback-1.?-*.whl. index build is fine too
#     if missing: certifi==2024.8.30 --no-deps. stand-in from the index
FROM venv AS wheel-set-local
ARG ENABLE_CUDA_13=1
COPY --from=lock /03-local.fallback-demo-fallback.txt /tmp/pinwheel/lock/03-local.fallback-demo-fallback.txt
RUN --mount=type=bind,from=installer,source=/opt/pinwheel/uv/bin/uv,target=/tmp/pinwheel/bin/uv \
    --mount=type=secret,id=ca,target=/run/secrets/ca \
    --mount=type=secret,id=uvconf,target=/run/secrets/uvconf \
    --mount=type=bind,source=wheels/local,target=/tmp/wheels \
    set -eu; \
    if [ -s /run/secrets/ca ]; then export SSL_CERT_FILE=/run/secrets/ca; fi; \
    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; fi; \
    export UV_CACHE_DIR=/tmp/pinwheel/uv-cache UV_LINK_MODE=hardlink UV_COMPILE_BYTECODE=1 UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1; \
    trap 'rm -rf /tmp/pinwheel/uv-cache' EXIT; \
    mkdir -p /tmp/pinwheel/wheel-set; find /opt/venv | LC_ALL=C sort > /tmp/pinwheel/venv-before; \
    set -- /tmp/wheels/demo_fail-*.whl; \
    if [ -e "$1" ]; then \
      if [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: more than one wheel in wheels/ matches demo_fail-*.whl; keep one:' "$@" >&2; exit 1; fi; \
      /tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python --no-deps "$1"; \
    else \
      echo 'pinwheel: ERROR: wheels/demo_fail-*.whl is missing and demo-fail is required. run `make wheels` in ../demo' >&2; \
      exit 1; \
    fi; \
    if [ "${ENABLE_CUDA_13}" = "1" ]; then \
    set -- /tmp/wheels/demo_skip-*.whl; \
    if [ -e "$1" ]; then \
      if [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: more than one wheel in wheels/ matches demo_skip-*.whl; keep one:' "$@" >&2; exit 1; fi; \
      /tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python --no-deps "$1"; \
    else \
      echo 'pinwheel: WARNING: wheels/demo_skip-*.whl is missing; skipping demo-skip. To include it: copy a wheel matching demo_skip-*.whl into wheels/' >&2; \
    fi; \
    fi; \
    set -- /tmp/wheels/demo_fallback-1.?-*.whl; \
    if [ -e "$1" ]; then \
      if [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: more than one wheel in wheels/ matches demo_fallback-1.?-*.whl; keep one:' "$@" >&2; exit 1; fi; \
      /tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python --no-deps "$1"; \
    else \
      echo 'pinwheel: WARNING: wheels/demo_fallback-1.?-*.whl is missing; installing fallback certifi==2024.8.30 --no-deps' >&2; \
      /tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python --no-deps --require-hashes -r /tmp/pinwheel/lock/03-local.fallback-demo-fallback.txt; \
    fi; \
    find /opt/venv | LC_ALL=C sort > /tmp/pinwheel/venv-after; \
    if LC_ALL=C comm -23 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | grep -q .; then \
      echo 'pinwheel: ERROR: wheel set local removed or replaced files of the venv'"'"'s skeleton (it installs pip?); a layer joined with COPY --link cannot remove them: use image.layers: chained' >&2; LC_ALL=C comm -23 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | head -n 5 >&2; exit 1; \
    fi; \
    LC_ALL=C comm -13 /tmp/pinwheel/venv-before /tmp/pinwheel/venv-after | \
      awk 'NR == FNR { old[$0] = 1; next } { d = $0; sub("/[^/]*$", "", d); if (d in old) print }' /tmp/pinwheel/venv-before - | \
      while IFS= read -r p; do mkdir -p "/tmp/pinwheel/wheel-set${p%/*}"; mv "$p" "/tmp/pinwheel/wheel-set$p"; done

# ---- the image: the venv's skeleton, and each wheel set's files joined from its stage.
FROM venv AS image

# ---- wheel set 1/3: core, installed in its stage wheel-set-core.
COPY --link --from=wheel-set-core /tmp/pinwheel/wheel-set/ /

# Gate ENABLE_CUDA_13: on when cuda >= 13. CUDA 13 kernels only
ARG ENABLE_CUDA_13=1

# ---- wheel set 2/3: gated, installed in its stage wheel-set-gated.
COPY --link --from=wheel-set-gated /tmp/pinwheel/wheel-set/ /

# ---- wheel set 3/3: local, installed in its stage wheel-set-local.
COPY --link --from=wheel-set-local /tmp/pinwheel/wheel-set/ /

# Invariants: every pin is still what the lock says after all steps (the build
# fails naming the package, the expected and the found version), and `pip check`
# finds nothing beyond the requirements --no-deps drops on purpose. Every base
# requirement a --no-deps install drops is met, or allowed by the manifest. The
# top-level modules of every installed distribution import on the CPU, except
# those the manifest marks `needs: driver` (the smoke imports them).
# Neither file needs the layers below it: joined with --link, they keep their digests when a set changes.
COPY --link --from=lock /expect.json /opt/pinwheel/expect.json
COPY --link smoke_payload.pyz /opt/pinwheel/smoke_payload.pyz
# A passing `pip check` or import check is reused while every input it read is
# unchanged (the payload's --cache-dir says how that is known); the results live
# in a BuildKit cache mount, in no layer. `build.py build --fresh-checks` sets
# PINWHEEL_FRESH_CHECKS=1: every check runs again.
ARG PINWHEEL_FRESH_CHECKS=0
RUN --mount=type=cache,id=pinwheel-invariant,target=/var/cache/pinwheel,sharing=locked \
    python /opt/pinwheel/smoke_payload.pyz --expect /opt/pinwheel/expect.json --level static --check-pip --check-imports --cache-dir /var/cache/pinwheel

# `docker run --gpus all <image>:...-smoke` on a GPU host: imports and the DSA
# forward, checked against references; a missing GPU fails it rather than passing.
FROM image AS smoke
CMD ["python", "/opt/pinwheel/smoke_payload.pyz", "--expect", "/opt/pinwheel/expect.json", "--level", "gpu", "--require", "gpu"]
