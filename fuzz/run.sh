#!/usr/bin/env bash
# Builds the libFuzzer targets (clang++-14, ASan+UBSan) in build-fuzz and runs each for a
# bounded time, starting from the small checked-in corpus in fuzz/corpus/<target>/.
#   usage: fuzz/run.sh [SECONDS per target, default 30] [TARGET...]
#   CKPROF_FUZZ_BUILD_DIR  build directory (default build-fuzz)
#   CKPROF_FUZZ_CXX        compiler (default clang++-14)
# Prints one summary line per target; exits 1 when a target found a crash (its input is kept
# under BUILD/artifacts/ and can be replayed with BUILD/bin/TARGET FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
[ $# -gt 0 ] && shift
targets=("$@")
((${#targets[@]})) || targets=(fuzz_protocol fuzz_convert fuzz_ck_output)
build=${CKPROF_FUZZ_BUILD_DIR:-build-fuzz}
cxx=${CKPROF_FUZZ_CXX:-clang++-14}

echo "fuzz: building ${targets[*]} with $cxx in $build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DCKPROF_FUZZ=ON -DCKPROF_BUILD_TESTS=OFF -DCKPROF_SANITIZE=address,undefined >/dev/null
set +e
ninja -C "$build" "${targets[@]}" 2>&1 | grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "fuzz: the build in $build failed (see the errors above)" >&2
  exit 1
fi

mkdir -p "$build/artifacts"
failed=0
summary=()
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  work="$build/corpus/$name"  # grows here; the checked-in corpus stays small
  mkdir -p "$work"
  log="$build/$t.log"
  dict=()
  [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
  echo "fuzz: $t for ${seconds} s"
  set +e
  "$build/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "${dict[@]}" \
    "$work" "fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$( (grep -oE 'cov: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
  units=$(find "$work" -type f | wc -l)
  if [ "$rc" -ne 0 ]; then
    failed=1
    crash=$( (grep -oE "$build/artifacts/$t-[^ ]+" "$log" || true) | tail -1)
    summary+=("$(printf '%-15s CRASH (exit %d): %s; see %s' "$t" "$rc" "${crash:-no input saved}" "$log")")
    grep -E 'ERROR|SUMMARY|runtime error|deadly signal' "$log" | head -5 || true
  else
    summary+=("$(printf '%-15s ok: %s runs, %s/s, coverage %s, corpus %s' "$t" "${execs:-?}" \
      "${rate:-?}" "${cov:-?}" "$units")")
  fi
done
echo "fuzz summary (${seconds} s per target):"
printf '  %s\n' "${summary[@]}"
exit "$failed"
