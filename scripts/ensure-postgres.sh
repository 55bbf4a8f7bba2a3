#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 and lets the tests create databases.
# Uses the running one when there is one; otherwise starts Debian's cluster and gives the
# current OS user a superuser role (trust on loopback is what these machines run with).
set -euo pipefail
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' >/dev/null 2>&1; then
  exit 0
fi
version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
if [ -z "$version" ]; then echo "PostgreSQL is not installed (scripts/install-system-deps.sh --test)" >&2; exit 1; fi
echo "Starting PostgreSQL $version"
hba="/etc/postgresql/$version/main/pg_hba.conf"
# Loopback-only trust for a throw-away test server, as on the CI machines.
if ! grep -q "bulksign-test" "$hba"; then
  sed -i '1i host all all 127.0.0.1/32 trust # bulksign-test\nhost all all ::1/128 trust # bulksign-test' "$hba"
fi
pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || pg_ctlcluster "$version" main start || true
for _ in $(seq 100); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
pg_ctlcluster "$version" main reload >/dev/null 2>&1 || true
psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' >/dev/null
