#!/usr/bin/env bash
# Fleets at scale, on the local PostgreSQL: N tenant schemas × M migrations.
#
#   bash bench/fleet.sh [BIN] [N] [M] [BIG]
#
# BIN defaults to target/release/dirthara, N to 1000 schemas, M to 20 migrations, BIG to 10000
# schemas (BIG=0 skips that row). Each row runs on a database of its own, created under a
# unique name and dropped at the end:
#
#   a. a shell loop running `dirthara migrate` once per schema, against one fleet run
#      (`--schemas 'tenant_*' --jobs 8`): target 0.3x;
#   b. the fleet again, every schema up to date (a no-op): target 3 s for 1,000 schemas;
#   c. two fleet runners started together on fresh schemas, against one runner alone: every
#      migration of every schema exactly once (each counts itself in public.effects), and the
#      pair done in 0.7x the time of one; 
#   d. BIG schemas with one migration each: the fleet's peak RSS (target 64 MiB).
#
# Compare the rows of one run (ratios), not with figures from another machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-target/release/dirthara}
n=${2:-1000}
m=${3:-20}
big=${4:-10000}
admin=${DIRTHARA_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}
prefix="dirthara_fleet_$$"
dir=$(mktemp -d)
databases=()

cleanup() {
  for db in "${databases[@]}"; do
    psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.2f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }

# A database with $2 schemas tenant_1 .. tenant_$2 and public.effects; prints its URL.
tenants() {
  local db="${prefix}_$1" count=$2
  databases+=("$db")
  psql "$admin" -qc "CREATE DATABASE $db" >/dev/null
  psql "${admin%/*}/$db" -q >/dev/null <<SQL
CREATE TABLE public.effects (schema_name text, version int);
DO \$\$ BEGIN
  FOR i IN 1..$count LOOP EXECUTE format('CREATE SCHEMA tenant_%s', i); END LOOP;
END \$\$;
SQL
  echo "${admin%/*}/$db"
}

# Migrations 1 .. $2 in directory $1, each creating a table and counting itself.
migrations() {
  mkdir -p "$1"
  for v in $(seq 1 "$2"); do
    printf 'CREATE TABLE t%s (id INT);\nINSERT INTO public.effects VALUES (current_schema(), %s);\n' \
      "$v" "$v" > "$1/${v}_t$v.up.sql"
  done
}

# Fails unless every schema of $1 has every one of $2 migrations exactly once.
exactly_once() {
  local url=$1 want=$2 found
  found=$(psql "$url" -Atc "SELECT count(*), count(DISTINCT (schema_name, version)), \
    coalesce(max(c), 0) FROM (SELECT schema_name, version, count(*) c FROM public.effects \
    GROUP BY 1, 2) x")
  IFS='|' read -r rows distinct most <<< "$found"
  if [ "$distinct" != "$want" ] || [ "$most" != 1 ]; then
    echo "FAILED: expected $want migrations once each, found $distinct distinct, most $most times" >&2
    exit 1
  fi
}

migrations "$dir/m" "$m"
echo "fleet benchmark: $n schemas x $m migrations, $(nproc) CPU(s), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $bin"

# a. The loop and the fleet.
loop_url=$(tenants loop "$n")
start=$(now)
for i in $(seq 1 "$n"); do
  "$bin" -d "$loop_url" --dir "$dir/m" --init-sql "SET search_path TO tenant_$i" -q migrate
done
loop=$(elapsed "$start" "$(now)")
exactly_once "$loop_url" $((n * m))

fleet_url=$(tenants fleet "$n")
start=$(now)
"$bin" -d "$fleet_url" --dir "$dir/m" --schemas 'tenant_*' --jobs 8 -q migrate
fleet=$(elapsed "$start" "$(now)")
exactly_once "$fleet_url" $((n * m))
echo "a. $n schemas x $m migrations: shell loop ${loop} s, fleet --jobs 8 ${fleet} s: $(ratio "$fleet" "$loop")x (target 0.3x)"

# b. The no-op.
start=$(now)
"$bin" -d "$fleet_url" --dir "$dir/m" --schemas 'tenant_*' --jobs 8 -q migrate
noop=$(elapsed "$start" "$(now)")
echo "b. no-op over $n up-to-date schemas: ${noop} s (target 3 s for 1,000)"

# c. Two runners at once, against the one runner of (a).
pair_url=$(tenants pair "$n")
start=$(now)
"$bin" -d "$pair_url" --dir "$dir/m" --schemas 'tenant_*' --jobs 8 -q migrate &
first=$!
"$bin" -d "$pair_url" --dir "$dir/m" --schemas 'tenant_*' --jobs 8 -q migrate &
second=$!
wait "$first"
wait "$second"
pair=$(elapsed "$start" "$(now)")
exactly_once "$pair_url" $((n * m))
echo "c. two runners together: ${pair} s against one runner's ${fleet} s: $(ratio "$pair" "$fleet")x (target 0.7x); every migration exactly once"

# d. Memory over many targets.
if [ "$big" -gt 0 ]; then
  big_url=$(tenants big "$big")
  migrations "$dir/one" 1
  rss=$( { /usr/bin/time -f '%M' "$bin" -d "$big_url" --dir "$dir/one" --schemas 'tenant_*' --jobs 8 -q migrate; } 2>&1 | tail -n1)
  exactly_once "$big_url" "$big"
  echo "d. $big schemas: peak RSS $((rss / 1024)) MiB (target 64 MiB)"
fi
