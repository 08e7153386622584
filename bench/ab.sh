#!/usr/bin/env bash
# Two dirthara builds, alternated on the same PostgreSQL database, so that the machine's
# drift hits both alike: apply N pending migrations (a fresh database each round), then a
# no-op `migrate` with the N applied. Each migration has a down file, as in most projects.
#
#   bash bench/ab.sh OLD_BIN NEW_BIN [N] [ROUNDS]
#
# N defaults to 1000, ROUNDS to 5. AB_SETTING=synchronous_commit=off (any `name=value`) is
# set on each database first: without the wait for the disk, what remains is the client's
# and the server's own work. Prints each round's figures and the medians. Needs psql
# and a local PostgreSQL (DIRTHARA_TEST_POSTGRES_URL, default
# postgres://postgres@127.0.0.1:5432/postgres). Results are printed only.
set -euo pipefail

old=${1:?usage: bench/ab.sh OLD_BIN NEW_BIN [N] [ROUNDS]}
new=${2:?usage: bench/ab.sh OLD_BIN NEW_BIN [N] [ROUNDS]}
n=${3:-1000}
rounds=${4:-5}
admin=${DIRTHARA_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}

dir=$(mktemp -d)
dbs=()
cleanup() {
  for db in "${dbs[@]}"; do psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
for i in $(seq 1 "$n"); do
  echo "CREATE TABLE t$i (id INT)" > "$dir/${i}_t$i.up.sql"
  echo "DROP TABLE t$i" > "$dir/${i}_t$i.down.sql"
done

# Milliseconds one run of `$@` takes, wall clock; fails loudly if the run fails.
ms() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  echo $(((end - start) / 1000))
}

declare -A apply noop
for round in $(seq 1 "$rounds"); do
  for which in old new; do
    bin=${!which}
    db="dirthara_ab_${$}_${which}_$round"
    dbs+=("$db")
    url="${admin%/*}/$db"
    psql "$admin" -qc "CREATE DATABASE $db"
    if [ -n "${AB_SETTING:-}" ]; then
      psql "$admin" -qc "ALTER DATABASE $db SET ${AB_SETTING%%=*} = '${AB_SETTING#*=}'"
    fi
    a=$(ms "$bin" -d "$url" --dir "$dir" -q migrate)
    b=$(ms "$bin" -d "$url" --dir "$dir" -q migrate)
    apply[$which]+="$a "
    noop[$which]+="$b "
    printf 'round %d %-3s apply %7.1f ms (%.3f ms per migration)  no-op %6.1f ms\n' \
      "$round" "$which" "$(echo "$a / 1000" | bc -l)" "$(echo "$a / 1000 / $n" | bc -l)" \
      "$(echo "$b / 1000" | bc -l)"
    psql "$admin" -qc "DROP DATABASE $db WITH (FORCE)"
  done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2) / 1000}'; }
for which in old new; do
  printf 'median %-3s apply %.3f ms per migration, no-op %.1f ms\n' "$which" \
    "$(echo "$(echo "${apply[$which]}" | median) / $n" | bc -l)" \
    "$(echo "${noop[$which]}" | median)"
done
