#!/usr/bin/env bash
# What repeatable migrations cost a no-op `migrate`: 1,000 applied migrations alone, against
# the same 1,000 plus 20 applied repeatables (`R__<name>.sql`, unchanged), on SQLite and on the
# local PostgreSQL, alternated ROUNDS times so the machine's drift hits each alike. Prints the
# medians and the ratio of each to the no-op without repeatables.
#
#   bash bench/repeatables.sh [ROUNDS]
#
# ROUNDS defaults to 15. Builds the CLI first (PROFILE, default `bench-build`: release without
# its fat LTO). PostgreSQL: DIRTHARA_BENCH_PG (default postgres://postgres@127.0.0.1:5432);
# two databases are created and dropped. Results are printed only.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-15}
profile=${PROFILE:-bench-build}
pg=${DIRTHARA_BENCH_PG:-postgres://postgres@127.0.0.1:5432}

cargo build -q --profile "$profile" -p dirthara-cli
dir_name=$profile; [ "$profile" = dev ] && dir_name=debug
bin=target/$dir_name/dirthara

work=$(mktemp -d)
suffix=$$
cleanup() {
  for d in plain with; do psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS bench_rep_${d}_$suffix" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/plain" "$work/with"
for i in $(seq 1 1000); do
  echo "CREATE TABLE t$i (id INT);" > "$work/plain/${i}_t$i.up.sql"
  echo "DROP TABLE t$i;" > "$work/plain/${i}_t$i.down.sql"
done
cp "$work/plain/"* "$work/with/"
for i in $(seq 1 20); do
  printf 'DROP VIEW IF EXISTS v%s;\nCREATE VIEW v%s AS SELECT id FROM t%s;\n' "$i" "$i" "$i" > "$work/with/R__view_$i.sql"
done

declare -A url
url[sqlite_plain]="sqlite:$work/plain.db"
url[sqlite_with]="sqlite:$work/with.db"
for d in plain with; do
  psql -q "$pg/postgres" -c "CREATE DATABASE bench_rep_${d}_$suffix"
  url[postgres_$d]="$pg/bench_rep_${d}_$suffix"
done
for db in sqlite postgres; do
  for d in plain with; do
    "$bin" -d "${url[${db}_$d]}" --dir "$work/$d" --locking lease -q migrate
  done
done

# Microseconds one no-op takes, wall clock; fails loudly if the run fails.
us() {
  local start end
  start=$(date +%s%N)
  "$bin" -d "${url[$1_$2]}" --dir "$work/$2" --locking lease -q migrate > /dev/null
  end=$(date +%s%N)
  echo $(((end - start) / 1000))
}

declare -A times
for round in $(seq 1 "$rounds"); do
  for db in sqlite postgres; do
    times[${db}_plain]+="$(us "$db" plain) "
    times[${db}_with]+="$(us "$db" with) "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for db in sqlite postgres; do
  base=$(echo "${times[${db}_plain]}" | median)
  for d in plain with; do
    m=$(echo "${times[${db}_$d]}" | median)
    printf '%-9s %-28s median %7.2f ms  (%.2fx the no-op without repeatables)\n' "$db" \
      "$([ "$d" = plain ] && echo "1,000 applied" || echo "1,000 applied + 20 repeatables")" \
      "$(echo "$m / 1000" | bc -l)" "$(echo "$m / $base" | bc -l)"
  done
done
