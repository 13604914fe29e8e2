# A training image on a CUDA base with the shapes the newer kinds take: ENV, builds, binary and .deb
# downloads, symlinks, alternatives, locales, held and removed Debian packages, a signed extra apt source,
# git submodules, build settings, named indexes and find-links, and a pin torch declares replaced.
ARG CUDA_VERSION=13.0.2
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04

ARG TOOL_VERSION=2.5.1
ARG MIRROR
ARG NCCL_VERSION=2.28.9-1

ENV CUDA_HOME=/usr/local/cuda \
    TOOL_HOME=/usr/src/tool-${TOOL_VERSION}/
ENV PATH="${PATH}:/usr/local/nvidia/bin"

RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv gcc-10 g++-10 \
    libnccl2=${NCCL_VERSION}+cuda13.0 \
    && apt-mark hold libnccl2 \
    && update-alternatives --install /usr/bin/gcc gcc /usr/bin/gcc-10 110 --slave /usr/bin/g++ g++ /usr/bin/g++-10 \
    && rm -rf /var/lib/apt/lists/*
RUN apt-get remove -y --purge libcudnn9-cuda-13
RUN curl -fsSL https://example.invalid/keys/tools.asc -o /usr/share/keyrings/tools.asc && \
    echo "deb [signed-by=/usr/share/keyrings/tools.asc] https://example.invalid/apt stable main" \
      > /etc/apt/sources.list.d/tools.list && \
    apt-get update && apt-get install -y tools-cli=1.2-1
RUN locale-gen en_US.UTF-8
RUN if [ -n "${MIRROR}" ]; then sed -i "s|http://archive|${MIRROR}|g" /etc/apt/sources.list; fi
RUN mkdir -p /tmp/tool && cd /tmp \
    && curl --retry 3 -fsSL -o v${TOOL_VERSION}.tar.gz https://example.invalid/tool/archive/v${TOOL_VERSION}.tar.gz \
    && tar -xzf v${TOOL_VERSION}.tar.gz && cd tool-${TOOL_VERSION} && make -j$(nproc) && make install \
    && cd / && rm -rf /tmp/tool
RUN git clone https://example.invalid/org/bench.git /tmp/bench && cd /tmp/bench && \
    git checkout ae98985f5599617be94042f4aa3637d10014ce89 && make -j$(nproc) CUDA_HOME=/usr/local/cuda && \
    cp /tmp/bench/build/*_perf /usr/local/bin/ && rm -rf /tmp/bench
RUN wget https://example.invalid/tools/profiler_2025.6.1-1_amd64.deb && \
    apt-get install -y ./profiler_2025.6.1-1_amd64.deb && \
    ln -sf /opt/profiler/bin/prof /usr/local/bin/prof && \
    rm profiler_2025.6.1-1_amd64.deb
RUN ln -sf /usr/lib/$(uname -m)-linux-gnu/libmlx5.so.1 /usr/lib/$(uname -m)-linux-gnu/libmlx5.so
RUN python3 -m venv /opt/venv
RUN pip install torchcodec==0.8.0 --index-url https://example.invalid/whl/cu130
RUN pip install --no-deps --extra-index-url https://example.invalid/flashinfer/whl flashinfer-jit-cache==0.6.15
RUN pip install tilelang==0.1.8 -f https://example.invalid/tile/whl/cu128/
RUN MAX_JOBS=64 pip install --no-build-isolation --config-settings "--build-option=--cpp_ext" \
    -C "--build-option=--cuda_ext" \
    git+https://example.invalid/org/fused.git@89eb10887887bc74853f89a4de258c0702932a1c
RUN git clone --recursive https://example.invalid/org/mla.git /opt/mla && cd /opt/mla && \
    git checkout 7f0fb3456f8ffe47599b5fd167b454605d85f932 && pip install --no-build-isolation .
RUN git clone https://example.invalid/org/attn.git /opt/attn && cd /opt/attn && \
    git checkout e7706faf8d1c3b9f241e36860640ad1dac644ede && git submodule update --init --recursive && \
    pip install .
# NCCL newer than torch's pin, for suspend/resume
RUN pip install --no-deps --upgrade "nvidia-nccl-cu13==2.29.7"
