#!/usr/bin/env bash
# The real-servers example: nginx, redis, postgres and memcached from
# Debian's packages, and a small Go app that needs the last three, under
# procfleet. Builds the app and procfleet into bin/, applies the fleet
# (postgres, redis and memcached first, then the app; nginx beside them),
# checks the app through nginx, shows status and postgres's log, and takes
# the fleet down again (also when a step fails; KEEP=1 leaves it running).
#
# Needs Go and the packages: apt-get install nginx-light redis-server
# memcached postgresql (their system services are not needed: stop or
# disable them if the install started them). Run as root or as yourself;
# as root postgres runs as the user postgres and memcached and nginx's
# workers as nobody.
#
# Ports on 127.0.0.1: nginx 22080, app 22090, redis 22379, postgres 22432,
# memcached 22211. Set NGINX_PORT, APP_PORT, REDIS_PORT, POSTGRES_PORT or
# MEMCACHED_PORT to use others: the fleet is then copied to run/fleet/ with
# those ports and run from there (the files here stay as they are).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH="/usr/local/go/bin:$PATH"
fi
step() { printf '\n==> %s\n' "$*"; }

missing=()
for bin in /usr/sbin/nginx /usr/bin/redis-server /usr/bin/memcached; do
  [ -x "$bin" ] || missing+=("$bin")
done
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgres)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "missing: ${missing[*]}; install: apt-get install nginx-light redis-server memcached postgresql" >&2
  exit 1
fi

fleet="$here"
declare -A ports=([22080]="${NGINX_PORT:-22080}" [22090]="${APP_PORT:-22090}" [22379]="${REDIS_PORT:-22379}"
  [22432]="${POSTGRES_PORT:-22432}" [22211]="${MEMCACHED_PORT:-22211}")
custom=""
for p in "${!ports[@]}"; do
  [ "${ports[$p]}" = "$p" ] || custom=1
done
if [ -n "$custom" ]; then
  fleet="$here/run/fleet"
  step "copy the fleet to ${fleet#"$root"/} with your ports"
  mkdir -p "$fleet/run"
  cp "$here"/*.yaml "$here/nginx.conf" "$here/postgres.sh" "$fleet/"
  for p in "${!ports[@]}"; do
    sed -i "s/\b$p\b/${ports[$p]}/g" "$fleet"/*.yaml "$fleet/nginx.conf"
  done
fi
rel="${fleet#"$root"/}"
pf="$fleet/bin/procfleet"

step "build the app and procfleet into $rel/bin/"
go build -o "$fleet/bin/" ./examples/real-servers/app ./cmd/procfleet

step "procfleet validate -f $rel"
"$pf" validate -f "$fleet"

if [ "${KEEP:-}" != 1 ]; then
  trap 'status=$?; trap - EXIT; step "procfleet down -f $rel"; "$pf" down -f "$fleet" || status=1; exit $status' EXIT
fi

step "procfleet apply --wait -f $rel   (postgres, redis, memcached, then app; nginx)"
"$pf" apply --wait --timeout 3m -f "$fleet"

step "procfleet status -f $rel"
"$pf" status -f "$fleet"

step "check: nginx answers, and the app behind it reaches postgres, redis and memcached"
go run ./examples/real-servers/check -nginx "127.0.0.1:${ports[22080]}"

step "procfleet logs postgres --tail 5 --state-dir $rel/.procfleet"
"$pf" logs postgres --tail 5 --state-dir "$fleet/.procfleet"

if [ "${KEEP:-}" = 1 ]; then
  step "fleet left running (KEEP=1): http://127.0.0.1:${ports[22080]}/app/"
  echo "stop it with: $pf down -f $rel"
fi
