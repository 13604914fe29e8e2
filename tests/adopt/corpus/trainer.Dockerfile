# A training image on a framework base, in the shape such files have.
ARG FRAMEWORK_TAG=v1.2.3
FROM example.invalid/framework:${FRAMEWORK_TAG} AS framework

ARG ENABLE_CUDA_13=1
ARG KERNELS_COMMIT
ARG TOOLS_BRANCH=main
ARG ROUTER_USE_WHEELS=1
ARG PLUGIN_VERSION=0.4.1

WORKDIR /root/
RUN apt-get update && apt-get install -y rsync tmux=3.3a-3 && rm -rf /var/lib/apt/lists/*
COPY wheel[s]/ /tmp/wheels/
RUN pip install /tmp/wheels/attn_kernels-*.whl
RUN if ls /tmp/wheels/hadamard-*.whl 2>/dev/null | grep -q .; then \
      pip install /tmp/wheels/hadamard-*.whl; \
    else \
      pip install hadamard==1.0.1 --no-build-isolation; \
    fi
RUN if [ "${ENABLE_CUDA_13}" = "1" ]; then \
      pip install nvidia-cudnn-cu13==9.22.0.52; \
    else \
      pip install nvidia-cudnn-cu12==9.22.0.52; \
    fi
RUN pip uninstall -y old-engine old-engine-torch
RUN pip -v install --no-deps plugin==${PLUGIN_VERSION}
RUN pip install --resume-retries 999 --no-build-isolation git+https://example.invalid/org/bridge.git@0123456789abcdef0123456789abcdef01234567
RUN pip install -U git+https://example.invalid/org/tools.git@${TOOLS_BRANCH}
RUN git clone https://example.invalid/org/app.git /opt/app && cd /opt/app && \
    git checkout ${KERNELS_COMMIT} && pip install -e "python[all]" --no-deps
RUN git clone -b nv_dev https://example.invalid/org/mla.git mla && cd mla && pip install -v -no-build-isolation .
COPY patches/ /tmp/patches/
RUN for p in /tmp/patches/*.patch; do \
      patch -d /opt/app -p1 < "$p" || { \
        echo "patch $(basename $p) did not apply" >&2; \
        exit 1; \
      }; \
    done
RUN pip install --force-reinstall --no-deps "apache-tvm-ffi==0.1.11" && \
    python3 -c "from importlib.metadata import version as v; assert v('apache-tvm-ffi') == '0.1.11', v('apache-tvm-ffi')"
RUN pip install flash-linear-attention || true
RUN for i in 1 2 3; do pip install einops==0.8.1 && break; sleep 5; done
RUN curl -fsSL https://example.invalid/install.sh | sh
RUN wget https://example.invalid/releases/kern-1.0.0+cu130-cp312-cp312-linux_x86_64.whl && \
    pip install kern-1.0.0+cu130-cp312-cp312-linux_x86_64.whl
COPY requirements.txt /tmp/requirements.txt
RUN pip install -r /tmp/requirements.txt
RUN if [ "${ROUTER_USE_WHEELS}" = "1" ]; then \
      pip install /tmp/wheels/router-*.whl; \
    else \
      cargo build --release; \
    fi
ENV FLASH_VERSION=0.6.15
RUN rm -rf /tmp/wheels
