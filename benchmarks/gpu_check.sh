#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): kernels against their references, kernel throughput against the
# device's peaks, a bf16 learner step over NCCL, engine tokens/s, weight sync. Never part of CI.
# Usage: benchmarks/gpu_check.sh [--quick] [--json PATH] [--sections kernels,throughput,...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -x .venv/bin/python ]]; then
    python=.venv/bin/python
else
    python=python3
fi
exec "$python" benchmarks/gpu_check.py "$@"
