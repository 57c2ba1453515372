#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) and runs each for a
# while on its seed corpus; fails if any target finds a crash.
#
#   tools/fuzz/run_fuzzers.sh [SECONDS_PER_TARGET=60] [TARGET...]
#
# TARGET is import, rules or timing_cache (default: all three). Corpora and
# crash reproducers go to ${FUZZ_DIR:-$HOME/.cache/rlflow-fuzz}/<target>/;
# a crash reproduces with the replay build:
#   ./bazelw run //tools/fuzz:<target>_fuzzer -- CRASH_FILE
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(import rules timing_cache)
work=${FUZZ_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rlflow-fuzz}
mkdir -p "$work"

./bazelw build --config=fuzz $(printf ' //tools/fuzz:%s_fuzzer' "${targets[@]}") </dev/null || exit 1
bin=$(./bazelw info --config=fuzz bazel-bin 2>/dev/null)

# Seed corpora.
seeds() {
  local t=$1 dir=$2
  mkdir -p "$dir"
  case $t in
    import) /usr/bin/python3 tools/fuzz/make_corpus.py --out="$work/corpus.bin" --dir="$dir" 2>/dev/null ;;
    rules) cp rules/default.rules.pb "$dir/default.rules.pb" ;;
    timing_cache)
      printf 'rlflow-timing-cache 1\n0.5\tcpu-1t|Relu#0 float32[1,4]\n' >"$dir/one"
      printf 'rlflow-timing-cache 1\n' >"$dir/empty" ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  dir="$work/$t"
  seeds "$t" "$dir/seeds"
  mkdir -p "$dir/corpus" "$dir/crashes"
  log="$dir/fuzz.log"
  echo "fuzz: $t for ${seconds} s (log: $log)"
  ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0:detect_odr_violation=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14 \
    "$bin/tools/fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$dir/crashes/" "$dir/corpus" "$dir/seeds" </dev/null >"$log" 2>&1
  rc=$?
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  echo "fuzz: $t: exit $rc, ${runs:-0} executions in ${seconds} s ($(( ${runs:-0} / seconds )) per second), corpus $(ls "$dir/corpus" | wc -l) files"
  if [[ $rc -ne 0 ]]; then
    echo "fuzz: $t FOUND A CRASH:"; grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -5
    status=1
  fi
done
exit $status
