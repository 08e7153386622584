# Sourced by the benchmarks that build scratch PostgreSQL databases (schema.sh, squash.sh):
# set `prefix` first. Gives the admin URL, a temporary directory `$dir`, `create_db NAME`
# (prints its URL; every database named `$prefix...` is dropped when the script exits,
# however it exits, since `$(create_db ...)` runs in a subshell), `ms CMD...`
# (the milliseconds one run takes, wall clock; fails loudly if the run fails), `median` (of
# the numbers on stdin) and `ratio A B`.
admin=${DIRTHARA_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}
dir=$(mktemp -d)

cleanup() {
  local db
  for db in $(psql "$admin" -Atc "SELECT datname FROM pg_database WHERE datname LIKE '${prefix}%'"); do
    psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT

create_db() {
  psql "$admin" -qc "CREATE DATABASE $1" >/dev/null
  echo "${admin%/*}/$1"
}
ms() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
