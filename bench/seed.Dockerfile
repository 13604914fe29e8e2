# Seed-style CUDA 13 training image, hand-written the way teams write it today.
#
# This is the peer that pinwheel's rendered Dockerfiles replace; it is kept
# only for benchmarks. Its known faults are deliberate and left in place:
#   - flashinfer's layer pulls the newest nvidia-cudnn-frontend and
#     nvidia-cutlass-dsl, which later layers swap for 1.26.0 (--no-deps, so
#     cudnn-frontend's `cutedsl` requirements are never checked) and 4.6.2:
#     churn in lower layers;
#   - cuda-python 13.4.4 (already pulled in through the CUTLASS DSL, before
#     its own line) pins cuda-bindings~=13.4.4 and so moves the
#     cuda-bindings 13.5.0 that torch's layer installed;
#   - sgl-flash-mla 1.0.0 declares torch>=2.14.1, hidden by --no-deps.
#
# Build inputs:
#   --build-arg BASE=...            a base with python3 + venv (pinwheel/base:bookworm-py311)
#   --build-arg PIP_INDEX_URL=...   the package index, from the host's pip configuration
#   --secret id=ca,src=...          CA bundle pip must trust (never stored in a layer)
#   context dir with wheels/        optional local wheels (flash_mla, fast_hadamard_transform)
# BuildKit v0.8 feature set: no syntax line, no heredocs, no COPY --link.

ARG BASE=pinwheel/base:bookworm-py311
FROM ${BASE}

ARG PIP_INDEX_URL
ARG ENABLE_CUDA_13=1

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH} \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python3 -m venv /opt/venv

COPY wheels/ /tmp/wheels/

# torch 2.13.0 on PyPI is the CUDA 13.0 build (cuda-toolkit 13.0.3, cudnn 9.20, nccl 2.29.7)
RUN --mount=type=secret,id=ca,target=/etc/ssl/certs/pinwheel-ca.pem \
    PIP_CERT=/etc/ssl/certs/pinwheel-ca.pem pip install torch==2.13.0

RUN --mount=type=secret,id=ca,target=/etc/ssl/certs/pinwheel-ca.pem \
    PIP_CERT=/etc/ssl/certs/pinwheel-ca.pem pip install flashinfer-python==0.6.15.post1

# torch-c-dlpack-ext: cuDNN DSA's cutedsl feature needs it (the manifest lists it too)
RUN --mount=type=secret,id=ca,target=/etc/ssl/certs/pinwheel-ca.pem \
    PIP_CERT=/etc/ssl/certs/pinwheel-ca.pem pip install "nvidia-cutlass-dsl[cu13]==4.6.2" apache-tvm-ffi==0.1.11 torch-c-dlpack-ext==0.1.5

RUN --mount=type=secret,id=ca,target=/etc/ssl/certs/pinwheel-ca.pem \
    PIP_CERT=/etc/ssl/certs/pinwheel-ca.pem pip install cuda-python==13.4.4

# cudnn-frontend 1.26.0 for the DSA kernels; --no-deps because its cutedsl
# extra pins nvidia-cutlass-dsl==4.5.0
RUN --mount=type=secret,id=ca,target=/etc/ssl/certs/pinwheel-ca.pem \
    if [ "${ENABLE_CUDA_13}" = "1" ]; then \
        PIP_CERT=/etc/ssl/certs/pinwheel-ca.pem pip install --no-deps nvidia-cudnn-frontend==1.26.0; \
    fi

# FlashMLA: prefer a locally built wheel, else the PyPI build (needs torch>=2.14.1, hence --no-deps)
RUN --mount=type=secret,id=ca,target=/etc/ssl/certs/pinwheel-ca.pem \
    if ls /tmp/wheels/flash_mla-*.whl 2>/dev/null | grep -q .; then \
        pip install --no-deps /tmp/wheels/flash_mla-*.whl; \
    else \
        PIP_CERT=/etc/ssl/certs/pinwheel-ca.pem pip install --no-deps sgl-flash-mla==1.0.0; \
    fi

# fast_hadamard_transform has no PyPI wheel: only a local one, when present
RUN if ls /tmp/wheels/fast_hadamard_transform-*.whl 2>/dev/null | grep -q .; then \
        pip install --no-deps /tmp/wheels/fast_hadamard_transform-*.whl; \
    else \
        echo "fast_hadamard_transform wheel not found, skipping"; \
    fi

RUN rm -rf /tmp/wheels
