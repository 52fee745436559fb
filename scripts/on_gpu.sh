#!/usr/bin/env bash
# The GPU run (copied to gpu-bundle/run.sh by scripts/gpu_bundle.sh): unpacks the bundle's
# libraries and programs, runs the CUDA tests, `kiln bench gpu`, PyTorch's side
# (bench/torch/bench_torch.py) and `kiln demo --device cuda`, and merges kiln's and PyTorch's
# numbers into h200-DATE.json and its table. Every step's output goes to RESULTS_DIR.
# KILN_GPU_STEPS picks steps (default tests,kiln,torch,demo; also sweep: the row schedule's
# tunables on softmax and layer_norm; real: `kiln bench gpu --size real` and
# bench/torch/bench_real.py side by side, with the PyTorch check of GPT-2's first step, merged
# into h200-real-DATE.json and its table; ddp: `kiln bench ddp` and bench/torch/ddp.py over every
# GPU, merged into ddp-DATE.json and its table); KILN_TORCH_ARGS passes options to bench_torch.py
# (e.g. --skip-max-autotune), KILN_REAL_ARGS to both real-size benches (e.g. --filter gpt2 is
# kiln's, so give bench_real.py's --models through KILN_TORCH_REAL_ARGS). The tests step runs
# tests/cuda/test_compile.cpp's fuzzer on KILN_FUZZ_PROGRAMS programs (default here 60, of which
# 12 are compiled; its own default of 300 compiles 60, cold, and with the real-size tests took
# past a 10-minute device call on 2026-12-05).
set -uo pipefail
export KILN_FUZZ_PROGRAMS=${KILN_FUZZ_PROGRAMS:-60}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
out=${1:-${OUT:-$root/gpu-results}}
mkdir -p "$out"
deps=${TMPDIR:-/tmp}/kiln-gpu-deps
if [ ! -e "$deps/.done" ]; then
  mkdir -p "$deps"
  for f in "$here"/debs/*.deb; do dpkg -x "$f" "$deps"; done
  touch "$deps/.done"
fi
bin=$deps/bin
mkdir -p "$bin"
xz -dc "$here/bin/programs.tar.xz" | tar -C "$bin" -xf -
# The kernel summary library (for CUDA_INJECTION64_PATH): $deps/usr/lib/x86_64-linux-gnu/libkiln_kernel_summary.so.
for f in "$here"/lib/*.xz; do [ -e "$f" ] || continue; xz -dc "$f" > "$deps/usr/lib/x86_64-linux-gnu/$(basename "$f" .xz)"; done
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu:$deps/lib/x86_64-linux-gnu:$deps/usr/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KILN_CACHE_DIR=${TMPDIR:-/tmp}/kiln-gpu-cache
date=$(date +%Y-%m-%d)
step() { echo "== $*"; "$@"; local rc=$?; [ $rc -eq 0 ] || echo "== failed ($rc): $*"; return 0; }

steps=${KILN_GPU_STEPS:-tests,kiln,torch,demo}
want() { [[ ",$steps," == *",$1,"* ]]; }

want tests && {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  for t in "$bin"/test_cuda_*; do step "$t" --log_level=test_suite --report_level=short; done
} 2>&1 | tee "$out/h200-tests-$date.txt"
log=$out/gpu-run-$date.log
want kiln && step "$bin/kiln" bench gpu --json "$out/kiln-gpu.json" 2>&1 | tee -a "$log"
# The row schedule's tunables (schedules/gpu_schedule.h) on softmax and layer_norm rows.
want sweep && for threads in 128 256 512 1024; do for stage in 0 1; do for vector in 0 1; do
  echo "== sweep threads=$threads stage=$stage vector=$vector"
  KILN_GPU_ROW_THREADS=$threads KILN_GPU_ROW_STAGE=$stage KILN_GPU_ROW_VECTOR=$vector \
    "$bin/kiln" bench gpu --filter _rows 2>&1 | grep -E "_rows|error"
done; done; done 2>&1 | tee -a "$log"
want torch && (cd "$root" && step python3 bench/torch/bench_torch.py --json "$out/torch-gpu.json" ${KILN_TORCH_ARGS:-}) 2>&1 | tee -a "$log"
[ -e "$out/kiln-gpu.json" ] && [ -e "$out/torch-gpu.json" ] && (cd "$root" && step python3 bench/torch/merge_h200.py --kiln "$out/kiln-gpu.json" --torch "$out/torch-gpu.json" \
  --out "$out/h200-$date.json" --table "$out/h200-$date.md") 2>&1 | tail -40
if want real; then
  check=${TMPDIR:-/tmp}/kiln-real-check
  rm -rf "$check"
  step "$bin/kiln" bench gpu --size real --json "$out/kiln-real.json" --check-dir "$check" ${KILN_REAL_ARGS:-} 2>&1 | tee -a "$log"
  (cd "$root" && step python3 bench/torch/bench_real.py --json "$out/torch-real.json" --check-dir "$check" ${KILN_TORCH_REAL_ARGS:-}) 2>&1 | tee -a "$log"
  [ -e "$out/kiln-real.json" ] && [ -e "$out/torch-real.json" ] && (cd "$root" && step python3 bench/torch/merge_real.py \
    --kiln "$out/kiln-real.json" --torch "$out/torch-real.json" --out "$out/h200-real-$date.json" --table "$out/h200-real-$date.md") 2>&1 | tail -60
fi
# Data-parallel training over every GPU of the machine (NVLink multicast off): kiln bench ddp and
# bench/torch/ddp.py on 1 and N processes, merged into ddp-DATE.json and its table.
if want ddp; then
  export NCCL_NVLS_ENABLE=0
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  [ "$gpus" -ge 1 ] || gpus=1
  step "$bin/kiln" bench ddp --nproc "$gpus" --device cuda --json "$out/kiln-ddp.json" 2>&1 | tee -a "$log"
  (cd "$root" && step python3 bench/torch/ddp.py --nproc "$gpus" --json "$out/torch-ddp.json") 2>&1 | tee -a "$log"
  [ -e "$out/kiln-ddp.json" ] && [ -e "$out/torch-ddp.json" ] && (cd "$root" && step python3 bench/torch/merge_ddp.py \
    --kiln "$out/kiln-ddp.json" --torch "$out/torch-ddp.json" --out "$out/ddp-$date.json" --table "$out/ddp-$date.md") 2>&1 | tail -40
fi
want demo && step "$bin/kiln" demo --device cuda --steps 200 --json "$out/demo-cuda.json" 2>&1 | tee -a "$log" | tail -30
# The run fails when a step did.
! grep -h "^== failed" "$out"/*.txt "$out"/*.log
