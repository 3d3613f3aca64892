#!/usr/bin/env bash
# integration/run.sh: the real-servers suite (integration/doc.go): nginx,
# redis, postgres and memcached from Debian's packages under the real
# procfleet binary. Linux only. As root it installs the packages that are
# missing (apt-get, with a policy-rc.d that keeps their services from
# starting) and runs every scenario; as another user the packages must be
# installed and the scenarios that need root are skipped (listed below).
#
#   integration/run.sh                                  # the whole suite
#   INTEGRATION_RUN='TestNginx/kill' integration/run.sh # a go test -run pattern
#   INTEGRATION_FLAGS='-integration.procfleet=/tmp/procfleet' integration/run.sh
#
# Prints the full verbose log (every scenario logs the process tree it saw),
# then a summary. Exit status: go test's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(uname -s)" != Linux ]; then
  echo "integration: Linux only (it reads /proc and runs Debian's packages); skipped" >&2
  exit 0
fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH="/usr/local/go/bin:$PATH"
fi

started=$SECONDS
log="$(mktemp "${TMPDIR:-/tmp}/procfleet-integration.XXXXXX")"
trap 'rm -f "$log"' EXIT
set +e
# shellcheck disable=SC2086 # INTEGRATION_FLAGS is a list of flags
go test -tags integration -count=1 -v -timeout 20m -run "${INTEGRATION_RUN:-.}" ./integration ${INTEGRATION_FLAGS:-} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

echo
echo "=== integration summary"
grep -E '^\s*--- (PASS|FAIL|SKIP)' "$log" || true
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
echo "integration: $passed passed, $failed failed, $skipped skipped (tests and scenarios); go test exit status $status; $((SECONDS - started))s"
exit "$status"
