#!/usr/bin/env bash
# The long chaos run (crates/dirthara-cli/tests/chaos.rs): many rounds per backend, K
# runners SIGKILLed at random, and PostgreSQL and MariaDB restarted mid-round.
#
#   bash fuzz/chaos.sh                 # 25 rounds per backend
#   ROUNDS=200 SECONDS_PER_ROUND=3 MIGRATIONS=24 bash fuzz/chaos.sh
#   LOAD=1 bash fuzz/chaos.sh          # with a CPU hog (`yes`) on one core beside it
#   bash fuzz/chaos.sh chaos_postgres  # one backend (any arguments go to the test harness)
#   FAULTS="lock_key_per_process=return" bash fuzz/chaos.sh chaos_postgres
#                                      # a planted fault (crates/dirthara/src/failpoints.rs) in a
#                                      # build with the `failpoints` feature: the rounds must
#                                      # report a violation, else the run fails
#
# The servers that restart are private instances the test makes and removes itself
# (tests/support/private_server.rs: initdb from /usr/lib/postgresql/*/bin or
# DIRTHARA_TEST_POSTGRES_BIN, mariadb-install-db and mariadbd): the machine's own servers are
# never stopped. SQLite needs nothing; MongoDB uses DIRTHARA_TEST_MONGODB_URL. Each round
# prints its violations (none, or what broke, with the runners' own accounts); each backend
# ends with "chaos <backend> in <s>s: Tally { rounds, kills, restarts, exits, ... }" and
# fails if any round found a violation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export DIRTHARA_REQUIRE_SERVERS=1
export DIRTHARA_CHAOS_ROUNDS="${ROUNDS:-25}"
export DIRTHARA_CHAOS_RUNNERS="${RUNNERS:-6}"
export DIRTHARA_CHAOS_MIGRATIONS="${MIGRATIONS:-40}"
export DIRTHARA_CHAOS_SECONDS="${SECONDS_PER_ROUND:-6}"
export DIRTHARA_TEST_MONGODB_URL="${DIRTHARA_TEST_MONGODB_URL:-mongodb://127.0.0.1:27018/admin?directConnection=true}"
if [ "${LOAD:-0}" = 1 ]; then
  yes > /dev/null &
  hog=$!
  trap 'kill "$hog"' EXIT
fi
features=()
if [ -n "${FAULTS:-}" ]; then
  export DIRTHARA_CHAOS_RUNNER_ENV="FAILPOINTS=$FAULTS" DIRTHARA_CHAOS_EXPECT_VIOLATIONS=1
  features=(--features dirthara-cli/failpoints)
fi
cargo test --workspace "${features[@]}" --test chaos -- --nocapture --test-threads 1 "$@"
