#!/usr/bin/env bash
# Make sure the Redis that REDIS_URL names answers (unset: redis://127.0.0.1:6379/0, the app's default). A redis://
# URL on this host (127.x, localhost, ::1) gets a Redis started on its address and port when none answers there
# (its password too, if the URL has one; nothing kept on disk); a Redis elsewhere is only checked, never stood in
# for by a local one; with Sentinel, the sentinels are the app's to ask.
set -euo pipefail
url="${REDIS_URL:-redis://127.0.0.1:6379/0}"
# scheme, host, port, password (and a socket's path) as redis-py reads the URL (its defaults: localhost, 6379).
eval "$(python3 - "$url" <<'PY'
import shlex, sys
from urllib.parse import unquote, urlsplit
u = urlsplit(sys.argv[1])
found = {"scheme": u.scheme, "host": u.hostname or "localhost", "port": u.port or 6379,
         "password": unquote(u.password or ""), "path": u.path}
print(" ".join(f"{k}={shlex.quote(str(v))}" for k, v in found.items()))
PY
)"
if [[ "$scheme" == redis+sentinel ]]; then
  echo "REDIS_URL names Redis Sentinel: the app asks the sentinels for the master; nothing started here"; exit 0
fi
args=(-h "$host" -p "$port"); [[ "$scheme" == rediss ]] && args+=(--tls)
ping() { REDISCLI_AUTH="$password" timeout 5 redis-cli "${args[@]}" ping 2>/dev/null | grep -q PONG; }
where="$host:$port"
if [[ "$scheme" == unix ]]; then
  where="$path"; args=(-s "$path")
fi
if ping; then exit 0; fi
if [[ "$scheme" != redis || ! ( "$host" == localhost || "$host" == ::1 || "$host" == 127.* ) ]]; then
  echo "REDIS_URL names $where, which does not answer: start that Redis, or unset REDIS_URL for a local one" >&2
  exit 1
fi
bind="$host"; [[ "$host" == localhost ]] && bind=127.0.0.1
echo "Starting Redis on $bind:$port"
redis-server --daemonize yes --bind "$bind" --port "$port" --save '' --appendonly no \
  ${password:+--requirepass "$password"} --dir /tmp --logfile "/tmp/bulksign-redis-$port.log"
for _ in $(seq 50); do ping && exit 0; sleep 0.1; done
echo "Redis did not start; see /tmp/bulksign-redis-$port.log" >&2; exit 1
