#!/usr/bin/env bash
# Building a new database from a squashed baseline against applying every migration, on the
# local PostgreSQL (issue 30):
#
#   bash bench/squash.sh [BIN] [ROUNDS] [MIGRATIONS] [CHURN]
#
# MIGRATIONS (default 500) migrations, each a table with a primary key, an index, a foreign
# key to the table before it and, every tenth, a view; with CHURN=1, each also changes the
# table before it as schemas evolve (a column added and given a default, an index made and
# dropped again), which the baseline folds away. `squash --to` the last of them; then
# ROUNDS times (default 5), alternated on fresh databases: `migrate` of all the files, and
# `migrate` of the baseline alone (the originals archived). Prints the medians and their
# ratio, and checks that both databases dump the same objects.
#
# BIN defaults to target/debug/dirthara. Databases are created under unique names and dropped
# at the end (DIRTHARA_TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres).
# Compare the rows of one run (ratios), not with figures from another machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-target/debug/dirthara}
rounds=${2:-5}
count=${3:-500}
churn=${4:-0}
prefix="dirthara_squash_$$"
# shellcheck source=pg_scratch.sh
source bench/pg_scratch.sh
objects() { "$bin" -d "$1" --dir "$2" dump | sed '/^-- applied versions/,$d'; }

mkdir "$dir/all" "$dir/baseline"
python3 - "$dir/all" "$count" "$churn" <<'PY'
import sys
out, count, churn = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
for v in range(1, count + 1):
    sql = [f"CREATE TABLE t{v} (id bigint PRIMARY KEY, name text NOT NULL, prev bigint);",
           f"CREATE INDEX t{v}_name ON t{v} (name);"]
    if v > 1:
        sql.append(f"ALTER TABLE t{v} ADD CONSTRAINT t{v}_prev FOREIGN KEY (prev) REFERENCES t{v-1} (id);")
    if v > 1 and churn:
        sql += [f"ALTER TABLE t{v-1} ADD COLUMN note text;",
                f"ALTER TABLE t{v-1} ALTER COLUMN note SET DEFAULT '';",
                f"CREATE INDEX t{v-1}_note ON t{v-1} (note);",
                f"DROP INDEX t{v-1}_note;"]
    if v % 10 == 0:
        sql.append(f"CREATE VIEW v{v} AS SELECT id, name FROM t{v} WHERE name <> '';")
    with open(f"{out}/{v}_m{v}.up.sql", "w") as f:
        f.write("\n".join(sql) + "\n")
PY

source_url=$(create_db "${prefix}_source")
"$bin" -d "$source_url" --dir "$dir/all" migrate >/dev/null
"$bin" -d "$source_url" --dir "$dir/all" squash --to "$count"
mv "$dir/all/B${count}__squash.sql" "$dir/baseline/"
echo "baseline: $(wc -c < "$dir/baseline/B${count}__squash.sql") bytes"

all_ms=() baseline_ms=()
for round in $(seq 1 "$rounds"); do
  a=$(create_db "${prefix}_all_$round")
  b=$(create_db "${prefix}_base_$round")
  all_ms+=("$(ms "$bin" -d "$a" --dir "$dir/all" migrate)")
  baseline_ms+=("$(ms "$bin" -d "$b" --dir "$dir/baseline" migrate)")
done
if ! diff <(objects "$a" "$dir/all") <(objects "$b" "$dir/baseline") >/dev/null; then
  echo "FAIL: the database built from the baseline does not dump the same objects" >&2
  exit 1
fi
all=$(echo "${all_ms[*]}" | median)
base=$(echo "${baseline_ms[*]}" | median)
echo "churn: $churn"
echo "migrate of $count migrations: median ${all} ms (${all_ms[*]})"
echo "migrate of their baseline:    median ${base} ms (${baseline_ms[*]})"
echo "baseline / all: $(ratio "$base" "$all") (the same objects dumped)"
