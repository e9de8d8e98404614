#!/usr/bin/env bash
# The GPU run, on a machine with an NVIDIA GPU, PyTorch and cuda-python but no
# package registry. Run from the repository root after preparing the wheels on
# a machine with network access:
#
#   ../shared/device/wheels.sh           # builds .device/wheels (project + deps)
#   ... copy the repository with .device/ to the GPU machine, then there:
#   tools/device_run.sh [STAGE] [TOOL OPTIONS...]
#
# STAGE: install | test | check | search | bench | all (default: all = install, test,
# check with both backends, bench; all of it takes more than one 10-minute device call)
# TOOL OPTIONS go to tools/gpu_check.py (check) or tools/bench.py (search, bench).
#
# search and bench keep what the searches found (their picks, the Triton choices and
# the cubins) in one archive, $OUT/bench-cache.tar.gz, and start from the archive
# named by BENCH_CACHE when there is one. So the searches can span several device
# calls, and a last call times every form with all of them served from the cache
# (a search its --search-cap stopped is served to a run with the same cap or less):
#
#   tools/device_run.sh search --batches 1 8 --stop-after 450
#   BENCH_CACHE=path/to/bench-cache.tar.gz tools/device_run.sh search --batches 1 8
#   BENCH_CACHE=path/to/bench-cache.tar.gz tools/device_run.sh bench --batches 1 8
# Results go to $OUT (default ./device-out): device_run.log, gpu_check.{json,md},
# gpu_check_triton.{json,md}, bench.{json,md,png}. Exit status: 0 when every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."

stage=${1:-all}
[[ $# -gt 0 ]] && shift
export OUT=${OUT:-$PWD/device-out}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
PY=${PYTHON:-python3}
LIMIT=${DEVICE_RUN_SECONDS:-570}   # the whole 'all' run stays inside this
status=0

install() {
  local wheels=.device/wheels
  if ! ls "$wheels"/*.whl >/dev/null 2>&1; then
    echo "device_run: no wheels in $wheels; build them first (shared/device/wheels.sh)"
    return 1
  fi
  # --force-reinstall: a machine kept warm between runs already has an older build
  # of the same version, which pip would otherwise keep.
  "$PY" -m pip install -q --no-index --find-links "$wheels" --no-deps --force-reinstall \
    "$wheels"/*.whl || return 1
  "$PY" -P - <<'PY' || return 1
import importlib, sys
import mirage_xdsl.runtime
from mirage_xdsl.runtime.driver import gpu_unavailable_reason
from mirage_xdsl.runtime.compile import nvrtc_version
missing = [m for m in ("torch", "cuda.bindings", "xdsl", "z3") if importlib.util.find_spec(m) is None]
print("device_run: installed", mirage_xdsl.__file__)
print("device_run: nvrtc %d.%d" % nvrtc_version(), "| missing:", missing or "nothing")
reason = gpu_unavailable_reason()
print("device_run: gpu", "OK" if reason is None else reason)
sys.exit(1 if missing or reason else 0)
PY
}

run_tests() {
  # -P: keep the source tree's mirage_xdsl/ (not importable as is) off sys.path;
  # -o addopts=: serially, without pytest-xdist (not on the GPU machine)
  local rc=0
  "$PY" -P -m pytest -o addopts= -v -p no:cacheprovider -m gpu tests/test_runtime_gpu.py \
    tests/test_torch_gpu.py -rs --durations=5 || rc=1
  # the documentation's GPU examples (the rest runs in CI)
  "$PY" -P -m pytest -o addopts= -q -p no:cacheprovider tests/test_docs.py -rs || rc=1
  return $rc
}

run_check() { "$PY" tools/gpu_check.py --out "$OUT" "$@"; }

CACHE=$PWD/.bench-cache

with_cache() {
  # unpack BENCH_CACHE, run, and pack the cache into one file under $OUT (a folder
  # of many small files does not travel well between machines)
  mkdir -p "$CACHE"
  if [[ -n "${BENCH_CACHE:-}" ]]; then
    tar xzf "$BENCH_CACHE" -C "$CACHE" || return 1
  fi
  local rc=0
  MIRAGE_CACHE_DIR=$CACHE "$@" --search-cache "$CACHE/search" || rc=$?
  tar czf "$OUT/bench-cache.tar.gz" -C "$CACHE" . || rc=1
  return $rc
}

run_search() { with_cache "$PY" tools/bench.py --out "$OUT" --search-only "$@"; }

run_bench() {
  local budget=${BENCH_BUDGET:-}
  if [[ -z "$budget" && "$stage" == all ]]; then
    # what is left of the limit, less the timing that follows the last compilation
    budget=$(( LIMIT - SECONDS - 60 ))
    (( budget < 60 )) && budget=60
  fi
  with_cache "$PY" tools/bench.py --out "$OUT" ${budget:+--budget "$budget"} "$@"
}

step() {
  local name=$1; shift
  echo "=== device_run: $name ($(date +%T), ${SECONDS}s)"
  "$@"
  local rc=$?
  echo "=== device_run: $name exit $rc"
  (( rc != 0 )) && status=1
  return $rc
}

main() {
  case "$stage" in
    install) step install install ;;
    test) step test run_tests ;;
    check) step check run_check "$@" ;;
    search) step search run_search "$@" ;;
    bench) step bench run_bench "$@" ;;
    all)
      step install install || return 1
      step test run_tests
      step check run_check
      step check-triton run_check --backend triton --random 200
      step bench run_bench
      ;;
    *) echo "device_run: unknown stage '$stage' (install|test|check|search|bench|all)"; return 2 ;;
  esac
  return $status
}

main "$@" 2>&1 | tee -a "$OUT/device_run.log"
rc=${PIPESTATUS[0]}
exit "$rc"
