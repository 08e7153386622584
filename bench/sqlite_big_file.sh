#!/usr/bin/env bash
# A big SQL file on SQLite (issue 22): time and peak memory of `dirthara migrate` running one
# file of N MB of INSERT lines, beside Python's `sqlite3.executescript` running the same file
# in one transaction (the floor: SQLite's own C loop, one statement prepared at a time).
#
#   bash bench/sqlite_big_file.sh                    # 2, 8 and 32 MB
#   SIZES="2 8 32 64" RUNS=5 bash bench/sqlite_big_file.sh
#   DIRTHARA_BENCH_BIN=/path/to/other/dirthara bash bench/sqlite_big_file.sh
#
# Each size prints the best of RUNS runs (default 3) of each side: seconds and peak RSS
# (`/usr/bin/time`, maximum resident set size), and dirthara's ratio to the floor. Linear
# means the ratio stays flat as the file grows; the target is a time ratio of at most 3.
# Both sides use SQLite's defaults (rollback journal, synchronous FULL) and start from no
# database file. dirthara's figure includes its whole run: process start, loading and
# checking the file, the history table, the step and its record. Results are printed only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ -z "${DIRTHARA_BENCH_BIN:-}" ]; then
    cargo build --release -p dirthara-cli
fi
bin="$(realpath "${DIRTHARA_BENCH_BIN:-target/release/dirthara}")"
sizes="${SIZES:-2 8 32}"
runs="${RUNS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# `seconds peak_kb` of one run of the command; its output is discarded unless it fails.
measure() {
    local started ended
    started="$(date +%s.%N)"
    if ! /usr/bin/time -f '%M' -o "$work/rss" "$@" >"$work/out" 2>&1; then
        echo "failed: $*" >&2
        cat "$work/out" >&2
        exit 1
    fi
    ended="$(date +%s.%N)"
    echo "$(echo "$ended - $started" | bc -l) $(tail -n 1 "$work/rss")"
}

# The best (shortest) of $runs runs, and the largest peak RSS among them.
best_of() {
    local best="" peak=0 line seconds kb
    for _ in $(seq "$runs"); do
        rm -f "$work/bench.db" "$work/bench.db-journal"
        line="$(measure "$@")"
        seconds="${line% *}"
        kb="${line#* }"
        if [ -z "$best" ] || [ "$(echo "$seconds < $best" | bc -l)" = 1 ]; then
            best="$seconds"
        fi
        [ "$kb" -gt "$peak" ] && peak="$kb"
    done
    echo "$best $peak"
}

rows() {
    python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM bench_rows").fetchone()[0])' "$work/bench.db"
}

floor='import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    db.executescript("BEGIN;\n" + f.read() + "\nCOMMIT;")
'

printf '%8s %10s %12s %10s %12s %8s %8s\n' size dirthara 'peak RSS' python 'peak RSS' 'time x' 'RSS x'
for mb in $sizes; do
    rm -rf "$work/migrations"
    mkdir "$work/migrations"
    file="$work/migrations/1_big.up.sql"
    python3 - "$file" "$mb" <<'EOF'
import sys
path, mb = sys.argv[1], int(sys.argv[2])
with open(path, "w") as f:
    f.write("CREATE TABLE bench_rows (id INTEGER PRIMARY KEY, payload TEXT NOT NULL);\n")
    n = 0
    while f.tell() < mb * 1024 * 1024:
        n += 1
        f.write(f"INSERT INTO bench_rows (id, payload) VALUES ({n}, 'row {n}; of a big file');\n")
EOF
    expected="$(grep -c '^INSERT' "$file")"

    read -r ours ours_kb < <(best_of "$bin" --database-url "sqlite:$work/bench.db" \
        --dir "$work/migrations" --no-lock --quiet migrate)
    got="$(rows)"
    [ "$got" = "$expected" ] || { echo "dirthara inserted $got rows of $expected" >&2; exit 1; }

    read -r theirs theirs_kb < <(best_of python3 -c "$floor" "$work/bench.db" "$file")
    got="$(rows)"
    [ "$got" = "$expected" ] || { echo "python inserted $got rows of $expected" >&2; exit 1; }

    printf '%6sMB %9.2fs %10sMB %9.2fs %10sMB %7.2fx %7.2fx\n' "$mb" "$ours" "$((ours_kb / 1024))" \
        "$theirs" "$((theirs_kb / 1024))" "$(echo "$ours / $theirs" | bc -l)" \
        "$(echo "$ours_kb / $theirs_kb" | bc -l)"
done
