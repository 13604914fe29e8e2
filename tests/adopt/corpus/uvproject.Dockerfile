ARG CUDA_VERSION=13.0.2
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS base
ARG CUDA_VERSION
ARG UBUNTU_MIRROR
ENV CUDA_HOME=/usr/local/cuda
RUN --mount=type=cache,target=/var/cache/apt \
    apt-get update && apt-get install -y --no-install-recommends \
        ca-certificates curl git python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
RUN if [ -n "${UBUNTU_MIRROR}" ]; then sed -i "s|http://archive|${UBUNTU_MIRROR}|g" /etc/apt/sources.list; fi
RUN python3 -m pip config --global set global.index-url https://example.invalid/simple || true
COPY --from=example.invalid/uv:0.11 /uv /bin/
FROM base AS deps
WORKDIR /workspace/app
COPY pyproject.toml uv.lock ./
FROM deps AS prefetch
RUN python3 manage.py prefetch -- --frozen
FROM base AS lock
RUN python3 manage.py lock
FROM prefetch AS final
RUN curl -fsSL -o /tmp/tool.tar.gz https://example.invalid/tool-1.0.tar.gz && tar -xzf /tmp/tool.tar.gz -C /usr/local
CMD ["bash"]
