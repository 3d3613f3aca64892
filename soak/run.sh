#!/usr/bin/env bash
# soak/run.sh: procfleet's chaos soak, bounded in time (default 2 minutes,
# what CI runs). Linux only. See soak/doc.go for the faults and invariants.
#
#   soak/run.sh                 # 2 minutes, seed from the clock
#   SOAK_DURATION=10m soak/run.sh
#   SOAK_SEED=1234 soak/run.sh  # replay a seed
#   SOAK_RUNS=5 soak/run.sh     # 5 runs in a row, stop at the first failure
#   SOAK_FLAGS="-soak.faults=kill,killup -soak.inplace=false" soak/run.sh
#
# Exit status: 0 when every run kept every invariant.
set -euo pipefail
# shellcheck disable=SC2086 # SOAK_FLAGS is a list of flags
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(uname -s)" != Linux ]; then
  echo "soak: Linux only (it scans /proc); skipped" >&2
  exit 0
fi
duration="${SOAK_DURATION:-2m}"
runs="${SOAK_RUNS:-1}"
seed="${SOAK_SEED:-0}"

log_dir="$(mktemp -d "${TMPDIR:-/tmp}/procfleet-soak-logs.XXXXXX")"
echo "soak: full logs in $log_dir"
for i in $(seq 1 "$runs"); do
  echo "=== soak run $i/$runs (duration $duration)"
  log="$log_dir/run-$i.log"
  set +e
  go test -tags soak -run '^TestSoak$' -count=1 -timeout 30m -v ./soak \
    -soak.duration="$duration" -soak.seed="$seed" -soak.report="$log_dir/report-$i.json" ${SOAK_FLAGS:-} >"$log" 2>&1
  status=$?
  set -e
  # The seed, every violation, the one-line figures and the verdict.
  grep -E 'soak seed|VIOLATION|SOAK seed=|soak folder kept|^(--- |ok|FAIL|panic)' "$log" || true
  if [ "$status" -ne 0 ]; then
    echo "soak run $i failed (exit $status); log: $log" >&2
    tail -n 60 "$log" >&2
    exit "$status"
  fi
done
