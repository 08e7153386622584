#!/usr/bin/env bash
# `dirthara lint` against squawk (PyPI `squawk-cli`) on bench/lint-corpus, and what the
# rehearsal on the live server costs:
#
# 1. time: per PostgreSQL project, `dirthara lint --offline` on its directory and `squawk` on
#    the same up files, each a fresh process as CI runs them (hyperfine, warm cache);
# 2. findings side by side (bench/lint_vs_squawk.py): every blocking finding squawk makes is
#    made too, or dirthara says why not; the noise a runner makes moot is not made;
# 3. the rehearsal: `lint -d` on 20 statements the server is asked about (a type change each)
#    against 20 it is not (index builds, sized the same way), the difference per statement;
#    and a no-op `migrate` (nothing pending) of those files against trivial ones: nothing is
#    analysed when nothing is pending, so the two take the same time.
#
#   bash bench/lint.sh
#
# Needs hyperfine, squawk (SQUAWK=path, default ~/.cache/squawk-venv/bin/squawk, installed
# with `python3 -m venv ~/.cache/squawk-venv && ~/.cache/squawk-venv/bin/pip install
# squawk-cli`), and PostgreSQL (DIRTHARA_TEST_POSTGRES_URL's server, default
# postgres://postgres@127.0.0.1:5432).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SQUAWK=${SQUAWK:-$HOME/.cache/squawk-venv/bin/squawk}
command -v hyperfine >/dev/null || { echo "FATAL: hyperfine is not installed" >&2; exit 1; }
[ -x "$SQUAWK" ] || { echo "FATAL: no squawk at $SQUAWK" >&2; exit 1; }
cargo build --release -p dirthara-cli
BIN=$PWD/target/release/dirthara
CORPUS=bench/lint-corpus
unset DATABASE_URL
for var in $(env | grep -o '^DIRTHARA_[A-Z_]*' || true); do unset "$var"; done

echo "== squawk $("$SQUAWK" --version | awk '{print $2}') and dirthara $("$BIN" --version | awk '{print $2}')"
echo "== 1. time, per project (mean of each; a fresh process per run)"
for project in pg/diesel pg/django pg/flyway pg/golang-migrate pg/goose; do
  files=$(find "$CORPUS/$project" -name '*.sql' ! -name '*.down.sql' ! -name down.sql | sort | tr '\n' ' ')
  hyperfine -N --warmup 3 --runs 30 --style none --export-json /tmp/dirthara-lint-bench.json \
    -i "$BIN lint --offline --dir $CORPUS/$project --output json" \
    "$SQUAWK --reporter json $files" > /dev/null 2>&1
  python3 - "$project" <<'EOF'
import json, sys
r = json.load(open("/tmp/dirthara-lint-bench.json"))["results"]
d, s = r[0]["mean"] * 1000, r[1]["mean"] * 1000
print(f"{sys.argv[1]:<18} dirthara {d:6.2f} ms   squawk {s:6.2f} ms   dirthara/squawk {d / s:4.2f}")
EOF
done

echo "== 2. findings side by side"
python3 bench/lint_vs_squawk.py "$BIN" "$SQUAWK" || true

echo "== 3. the rehearsal on the live server"
ADMIN=${DIRTHARA_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}
DB="dirthara_lint_bench_$$"
on() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$ADMIN" "$1"; }
URL=$(on "$DB")
psql "$(on postgres)" -qc "CREATE DATABASE $DB"
trap 'psql "$(on postgres)" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"' EXIT
WORK=$(mktemp -d)
mkdir -p "$WORK/asked" "$WORK/sized" "$WORK/trivial"
tables=""
for i in $(seq 1 20); do
  tables="$tables CREATE TABLE t$i (id int PRIMARY KEY, n int, note varchar(20));"
  echo "ALTER TABLE t$i ALTER COLUMN note TYPE varchar(40);" > "$WORK/asked/${i}_widen_t$i.sql"
  echo "CREATE INDEX t${i}_n ON t$i (n);" > "$WORK/sized/${i}_index_t$i.sql"
  echo "CREATE TABLE u$i (id int);" > "$WORK/trivial/${i}_create_u$i.sql"
done
psql "$URL" -qc "$tables"
hyperfine -N --warmup 3 --runs 20 --style none --export-json /tmp/dirthara-lint-bench.json \
  -i "$BIN -d $URL --dir $WORK/asked lint --output json" \
  "$BIN -d $URL --dir $WORK/sized lint --output json" > /dev/null 2>&1
"$BIN" -d "$URL" --dir "$WORK/asked" lint --output json | python3 -c '
import json, sys; n = len(json.load(sys.stdin)["findings"])
print(f"   the 20 type changes to a longer varchar: {n} finding(s) left once the server was asked (offline: 20)")'
python3 - <<'EOF'
import json
r = json.load(open("/tmp/dirthara-lint-bench.json"))["results"]
asked, sized = r[0]["mean"] * 1000, r[1]["mean"] * 1000
print(f"   lint -d, 20 statements asked of the server {asked:6.1f} ms, 20 only sized {sized:6.1f} ms: "
      f"{(asked - sized) / 20:5.2f} ms per rehearsal")
EOF
"$BIN" -d "$URL" --dir "$WORK/asked" --history-table h_asked migrate -q
"$BIN" -d "$URL" --dir "$WORK/trivial" --history-table h_trivial migrate -q
hyperfine -N --warmup 3 --runs 30 --style none --export-json /tmp/dirthara-lint-bench.json \
  "$BIN -d $URL --dir $WORK/asked --history-table h_asked migrate -q" \
  "$BIN -d $URL --dir $WORK/trivial --history-table h_trivial migrate -q" > /dev/null 2>&1
python3 - <<'EOF'
import json
r = json.load(open("/tmp/dirthara-lint-bench.json"))["results"]
a, t = r[0]["mean"] * 1000, r[1]["mean"] * 1000
print(f"   no-op migrate: 20 applied type changes {a:6.1f} ms, 20 applied trivial files {t:6.1f} ms "
      f"(ratio {a / t:4.2f}): nothing pending, nothing analysed")
EOF
rm -rf "$WORK"
