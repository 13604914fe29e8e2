FROM example.invalid/base:24.04 AS builder
RUN echo building > /tmp/x

FROM nvidia/cuda:13.0.2-devel-ubuntu24.04 AS runtime
ARG ENABLE_CUDA_13=1
RUN <<EOF
set -e
pip install numpy==2.1.0
pip install "torch>=2.13"
EOF
RUN <<EOF
pip install "gates-evil==1.0" "x==1
gates:
  EVIL: {when: 'cuda >= 0', why: x}"
python -c "import numpy; assert numpy.__version__ == '2.1.0'"
EOF
ENV A=1 B=2
CMD ["bash"]
