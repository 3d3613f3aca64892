#!/usr/bin/env bash
# Quick start: build the three example servers and procfleet, bring the fleet
# up, check it answers, show its status, and take it down again.
# Needs only Go. Uses 127.0.0.1 ports 18081 (backend), 18082 (api) and
# 18083 (web). Set KEEP=1 to leave the fleet running at the end; stop it
# later with: examples/quickstart/bin/procfleet down -f examples/quickstart
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH="/usr/local/go/bin:$PATH"
fi

fleet=examples/quickstart
bin="$fleet/bin"
pf="$bin/procfleet"

step() { printf '\n==> %s\n' "$*"; }

step "build the servers and procfleet into $bin/"
mkdir -p "$bin"
go build -o "$bin/" ./examples/quickstart/backend ./examples/quickstart/api ./examples/quickstart/web ./cmd/procfleet

step "procfleet validate -f $fleet"
"$pf" validate -f "$fleet"

stop_fleet() {
  step "procfleet down -f $fleet"
  "$pf" down -f "$fleet"
}
if [ "${KEEP:-}" != 1 ]; then
  # Take the fleet down however this script ends (a failed check included).
  trap 'status=$?; trap - EXIT; stop_fleet || status=1; exit $status' EXIT
fi

step "procfleet apply --wait -f $fleet   (backend, then api, then web)"
"$pf" apply --wait --timeout 2m -f "$fleet"

step "procfleet status -f $fleet"
"$pf" status -f "$fleet"

step "check: every /health answers, and web -> api -> backend works"
go run ./examples/quickstart/check

# logs takes -f for "follow", so it finds the state folder by --state-dir.
step "procfleet logs api --tail 5 --state-dir $fleet/.procfleet"
"$pf" logs api --tail 5 --state-dir "$fleet/.procfleet"

if [ "${KEEP:-}" = 1 ]; then
  step "fleet left running (KEEP=1): open http://127.0.0.1:18083/"
  echo "stop it with: $pf down -f $fleet"
fi
