#!/usr/bin/env bash
# Start a local Redis on 127.0.0.1:${1:-6379} unless one already answers there (keeps nothing on disk).
set -euo pipefail
port="${1:-6379}"
if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then exit 0; fi
echo "Starting Redis on 127.0.0.1:$port"
redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
  --dir /tmp --logfile "/tmp/bulksign-redis-$port.log"
for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && exit 0; sleep 0.1; done
echo "Redis did not start; see /tmp/bulksign-redis-$port.log" >&2; exit 1
