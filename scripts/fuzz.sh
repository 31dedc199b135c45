#!/usr/bin/env bash
# Long fuzzing run of every pmsim fuzz target: scripts/fuzz.sh [SECONDS_TOTAL] (default 3600).
#
# With a nightly toolchain and cargo-fuzz installed, each target runs under libFuzzer
# (coverage-guided, -timeout=10 s per input, -rss_limit_mb=2048) for its share of the time,
# starting from fuzz/corpus/TARGET. Otherwise the stable seeded harness runs each target for
# its share of the time, batch after batch with fresh seeds. Exit status 0: nothing found.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-3600}
targets=(text_trace binary_trace toml_config set_overrides workload_params checker)
share=$(( total / ${#targets[@]} ))
if cargo +nightly fuzz --version >/dev/null 2>&1; then
  for t in "${targets[@]}"; do
    echo "== $t: libFuzzer for ${share}s"
    # a scratch corpus so the checked-in seeds stay small
    mkdir -p "target/fuzz-corpus/$t"
    cargo +nightly fuzz run -O "$t" "$PWD/target/fuzz-corpus/$t" "$PWD/fuzz/corpus/$t" -- \
      -max_total_time="$share" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
  done
  exit 0
fi
echo "(no nightly cargo-fuzz: running the stable seeded harness instead)"
cargo build --profile ci -p pmsim-fuzz --tests -q
for t in "${targets[@]}"; do
  # cases per batch: the checker crashes every design 8 times per case, so it gets fewer
  size=${PMSIM_FUZZ_BATCH:-5000}; [ "$t" = checker ] && size=$(( size / 25 ))
  end=$(( $(date +%s) + share )); batch=0; n=0
  while [ "$(date +%s)" -lt "$end" ]; do
    batch=$((batch + 1))
    if ! PMSIM_FUZZ_SEED=$((1000 + batch)) PMSIM_FUZZ_CASES=$size \
      cargo test --profile ci -p pmsim-fuzz --test harness -q -- --exact "fuzz_$t" > "target/fuzz-$t.log" 2>&1; then
      echo "== $t: FAILED in batch $batch (seed $((1000 + batch))); see target/fuzz-$t.log"; exit 1
    fi
    n=$((n + size))
  done
  echo "== $t: $n cases in $batch batches (seeds 1001..$((1000 + batch))), nothing found"
done
