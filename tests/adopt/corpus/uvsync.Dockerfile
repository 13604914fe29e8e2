# A project installed from its own uv.lock, copied in from the build context.
FROM nvidia/cuda:13.0.2-devel-ubuntu24.04
ENV UV_LINK_MODE=copy
COPY --from=example.invalid/uv:0.11 /uv /bin/
WORKDIR /workspace/app
COPY . /workspace/app
RUN uv sync --frozen --no-dev
ENV VIRTUAL_ENV="/workspace/app/.venv" \
    PATH="/workspace/app/.venv/bin:${PATH}"
