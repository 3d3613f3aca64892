#!/bin/sh
# postgres.sh [POSTGRES-ARG]...: postgres in the foreground (it never
# daemonizes; only pg_ctl does), listening on 127.0.0.1 only (TCP, no Unix
# socket), its cluster in run/postgres of this folder (or $PGDATA), made by
# initdb on the first start (trust authentication: a development database).
# The arguments go to postgres (postgres.yaml passes the port).
#
# postgres refuses to run as root. When procfleet runs as root this script
# drops to the user PGOSUSER (default postgres, the user Debian's package
# creates) with setpriv, which execs: postgres keeps this script's pid,
# session and process group, and procfleet's token in its environment. As
# any other user it runs as that user. Environment: PGDATA, PGOSUSER,
# PGBINDIR (default: the newest /usr/lib/postgresql/*/bin, else the folder
# of postgres on PATH).
set -eu

bindir="${PGBINDIR:-}"
if [ -z "$bindir" ]; then
  bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
fi
if [ -z "$bindir" ]; then
  bindir="$(dirname "$(command -v postgres)")"
fi
data="${PGDATA:-$PWD/run/postgres}"

if [ "$(id -u)" = 0 ]; then
  user="${PGOSUSER:-postgres}"
  drop="setpriv --reuid=$user --regid=$user --init-groups --"
  mkdir -p "$data"
  chown "$user:" "$data"
  chmod 0700 "$data"
  if ! $drop test -x "$data"; then
    echo "postgres.sh: the user $user cannot reach $data: let it through every folder above (chmod o+x), or set PGDATA to a folder it can reach" >&2
    exit 1
  fi
else
  drop=""
fi

if [ ! -s "$data/PG_VERSION" ]; then
  # --no-sync: a development cluster; a crash during initdb means running it again.
  $drop "$bindir/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --no-sync >&2
fi

exec $drop "$bindir/postgres" -D "$data" -c listen_addresses=127.0.0.1 -c unix_socket_directories= "$@"
