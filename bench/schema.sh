#!/usr/bin/env bash
# The schema commands at scale, on the local PostgreSQL (issue 30):
#
#   bash bench/schema.sh [BIN] [ROUNDS] [TENANTS]
#
#   a. `dirthara dump` of a 1,000-table schema (a primary key, an index and a foreign key each,
#      and 100 views) against `pg_dump --schema-only` of the same database, alternated ROUNDS
#      times: target 1.0x or less;
#   b. `dirthara drift` over TENANTS tenant schemas (default 1,000), each with 3 tables, an
#      index and a view, migrated as one fleet first: target 10 s;
#   c. with OLD_BIN set (a build from before snapshots), what the snapshot adds to a `migrate`
#      that applies one migration on a 100-table schema: OLD_BIN and BIN alternated ROUNDS
#      times on fresh databases: target 10 % or less.
#
# BIN defaults to target/debug/dirthara, ROUNDS to 9. Databases are created under unique names
# and dropped at the end (DIRTHARA_TEST_POSTGRES_URL, default
# postgres://postgres@127.0.0.1:5432/postgres). Compare the rows of one run (ratios), not with
# figures from another machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-target/debug/dirthara}
rounds=${2:-9}
tenants=${3:-1000}
prefix="dirthara_schema_$$"
# shellcheck source=pg_scratch.sh
source bench/pg_scratch.sh

# --- a. dump against pg_dump -------------------------------------------------------------
db="${prefix}_dump"
url=$(create_db "$db")
mkdir "$dir/none"
python3 - "$dir/big.sql" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("CREATE TABLE parent (id bigint PRIMARY KEY);\n")
    for i in range(1, 1001):
        f.write(f"CREATE TABLE t{i} (id bigint PRIMARY KEY, parent bigint REFERENCES parent, "
                f"name text NOT NULL DEFAULT '', created timestamptz DEFAULT now());\n")
        f.write(f"CREATE INDEX t{i}_name ON t{i} (name);\n")
    for i in range(1, 101):
        f.write(f"CREATE VIEW v{i} AS SELECT id, name FROM t{i} WHERE name <> '';\n")
PY
psql "$url" -q -f "$dir/big.sql"
ours=() theirs=()
for _ in $(seq 1 "$rounds"); do
  ours+=("$(ms "$bin" -d "$url" --dir "$dir/none" dump)")
  theirs+=("$(ms pg_dump --schema-only "$url")")
done
o=$(echo "${ours[*]}" | median)
t=$(echo "${theirs[*]}" | median)
echo "a. dump of 1,000 tables: dirthara ${o} ms, pg_dump --schema-only ${t} ms: $(ratio "$o" "$t")x"

# --- b. drift over a fleet ------------------------------------------------------------------
db="${prefix}_fleet"
url=$(create_db "$db")
mkdir "$dir/fleet"
echo "CREATE TABLE a (id INT PRIMARY KEY, name TEXT); CREATE INDEX a_name ON a (name);" > "$dir/fleet/1_a.up.sql"
echo "CREATE TABLE b (id INT PRIMARY KEY, a INT REFERENCES a);" > "$dir/fleet/2_b.up.sql"
echo "CREATE TABLE c (id INT); CREATE VIEW named AS SELECT id, name FROM a;" > "$dir/fleet/3_c.up.sql"
python3 -c "print(''.join(f'CREATE SCHEMA tenant_{i};' for i in range(1, $tenants + 1)))" | psql "$url" -q
migrated=$(ms "$bin" -d "$url" --dir "$dir/fleet" --schemas 'tenant_*' --jobs 8 -q migrate)
psql "$url" -qc "ALTER TABLE tenant_7.a ADD COLUMN extra INT"
start=$(date +%s%N)
set +e
"$bin" -d "$url" --dir "$dir/fleet" --schemas 'tenant_*' --jobs 8 drift > "$dir/drift.out" 2>&1
code=$?
set -e
drifted=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$code" = 1 ] && grep -q "1 drifted" "$dir/drift.out" || { cat "$dir/drift.out"; exit 1; }
echo "b. drift over $tenants tenant schemas (one drifted): ${drifted} ms (their migrate, with a snapshot each: ${migrated} ms)"

# --- c. what the snapshot adds to a migrate -------------------------------------------------
if [ -n "${OLD_BIN:-}" ]; then
  mkdir "$dir/one"
  python3 -c "print(''.join(f'CREATE TABLE t{i} (id INT PRIMARY KEY, name TEXT);' for i in range(1, 101)))" > "$dir/base.sql"
  echo "CREATE TABLE added (id INT)" > "$dir/one/1_added.up.sql"
  declare -A took
  for round in $(seq 1 "$rounds"); do
    for which in old new; do
      b=$bin; [ "$which" = old ] && b=$OLD_BIN
      url=$(create_db "${prefix}_c_${which}_$round")
      psql "$url" -q -f "$dir/base.sql"
      took[$which]+="$(ms "$b" -d "$url" --dir "$dir/one" -q migrate) "
      psql "$admin" -qc "DROP DATABASE ${prefix}_c_${which}_$round WITH (FORCE)"
    done
  done
  old=$(echo "${took[old]}" | median)
  new=$(echo "${took[new]}" | median)
  echo "c. migrate applying one migration on 100 tables: before snapshots ${old} ms, with ${new} ms: $(ratio "$new" "$old")x"
fi
