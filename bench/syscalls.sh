#!/usr/bin/env bash
# Counts the system calls of one no-op `dirthara migrate` with N migrations applied on
# PostgreSQL (strace -c -f), and the statements the server saw (log_statement).
#
#   bash bench/syscalls.sh [BIN] [N]
#
# BIN defaults to target/release/dirthara, N to 1000. Needs strace and a local PostgreSQL
# (DIRTHARA_TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres) whose
# log is readable at $PG_LOG (default /var/log/postgresql/postgresql-15-main.log) for the
# statement count; without it only the system calls are counted.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-target/release/dirthara}
n=${2:-1000}
admin=${DIRTHARA_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}
log=${PG_LOG:-/var/log/postgresql/postgresql-15-main.log}
db="dirthara_syscalls_$$"
url="${admin%/*}/$db"

dir=$(mktemp -d)
trap 'psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1; rm -rf "$dir"' EXIT
for i in $(seq 1 "$n"); do
  echo "CREATE TABLE t$i (id INT)" > "$dir/${i}_t$i.up.sql"
  echo "DROP TABLE t$i" > "$dir/${i}_t$i.down.sql"
done
psql "$admin" -qc "CREATE DATABASE $db"
"$bin" -d "$url" --dir "$dir" -q migrate
psql "$admin" -qc "ALTER DATABASE $db SET log_statement = 'all'"

before=0
[ -r "$log" ] && before=$(wc -l < "$log")
strace -c -f -o "$dir/strace.txt" "$bin" -d "$url" --dir "$dir" -q migrate
echo "== system calls of one no-op migrate, $n applied ($((2 * n)) files) =="
grep -E "calls| (openat|statx|newfstatat|fstat|read|close|getdents64|total)$" "$dir/strace.txt" || true
if [ -r "$log" ]; then
  sleep 0.3
  echo "== statements the server logged (one line per message) =="
  tail -n +"$((before + 1))" "$log" | grep -E "\[[0-9]+\] [a-z_]+@$db LOG:  (statement|execute)" \
    | sed -E 's/.*\[([0-9]+)\].*LOG:  (statement|execute[^:]*): (.{0,90}).*/pid \1: \3/'
fi
