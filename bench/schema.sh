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
#   c. what the snapshot adds to a `migrate` that applies one migration on a 100-table
#      schema: BIN with `--schema-snapshot off` and on, alternated ROUNDS times on fresh
#      databases, for a database's first migrate and for the next one (OLD_BIN: also a build
#      from before snapshots): target 10 % or less.
#
# PARTS (default abc) picks the parts to run: PARTS=c bash bench/schema.sh.
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
parts=${PARTS:-abc}
if [[ $parts == *a* ]]; then
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

fi

# --- b. drift over a fleet ------------------------------------------------------------------
if [[ $parts == *b* ]]; then
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

fi

# --- c. what the snapshot adds to a migrate -------------------------------------------------
if [[ $parts == *c* ]]; then
# The same binary with `--schema-snapshot off` (no catalog read at the end) and with snapshots
# on, alternated on fresh copies of a 100-table schema: (1) the first migrate of a database,
# which also creates the history; (2) the next one, on a database whose history and snapshot
# an earlier migrate made. With OLD_BIN set (a build from before snapshots), a third column
# runs it for (1).
mkdir "$dir/one" "$dir/two"
python3 -c "print(''.join(f'CREATE TABLE t{i} (id INT PRIMARY KEY, name TEXT);' for i in range(1, 101)))" > "$dir/base.sql"
echo "CREATE TABLE added (id INT)" > "$dir/one/1_added.up.sql"
cp "$dir/one/1_added.up.sql" "$dir/two/"
echo "CREATE TABLE added_next (id INT)" > "$dir/two/2_added_next.up.sql"
declare -A took
arms=(off on)
[ -n "${OLD_BIN:-}" ] && arms+=(old)
for round in $(seq 1 "$rounds"); do
  for arm in "${arms[@]}"; do
    b=$bin flag=(--schema-snapshot "$arm")
    [ "$arm" = old ] && b=$OLD_BIN flag=()
    url=$(create_db "${prefix}_c_${arm}_$round")
    psql "$url" -q -f "$dir/base.sql"
    took[first_$arm]+="$(ms "$b" -d "$url" --dir "$dir/one" "${flag[@]}" -q migrate) "
    if [ "$arm" != old ]; then
      took[next_$arm]+="$(ms "$b" -d "$url" --dir "$dir/two" "${flag[@]}" -q migrate) "
    fi
    psql "$admin" -qc "DROP DATABASE ${prefix}_c_${arm}_$round WITH (FORCE)"
  done
done
for case in first next; do
  off=$(echo "${took[${case}_off]}" | median)
  on=$(echo "${took[${case}_on]}" | median)
  echo "c. the $case migrate of a 100-table database, applying one migration: snapshots off ${off} ms, on ${on} ms: $(ratio "$on" "$off")x"
done
if [ -n "${OLD_BIN:-}" ]; then
  old=$(echo "${took[first_old]}" | median)
  echo "   a build from before snapshots, the first migrate: ${old} ms"
fi
fi
