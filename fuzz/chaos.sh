#!/usr/bin/env bash
# The long chaos run (crates/dirthara-cli/tests/chaos.rs): many rounds per backend, K
# runners SIGKILLed at random, PostgreSQL and MariaDB restarted mid-round.
#
#   bash fuzz/chaos.sh                 # 25 rounds per backend
#   ROUNDS=100 SECONDS_PER_ROUND=8 bash fuzz/chaos.sh
#
# Needs the local test servers (see crates/dirthara-cli/tests/support/servers.rs) and the
# right to restart them (root: pg_ctlcluster, mysqladmin, start-stop-daemon); set
# DIRTHARA_CHAOS_RESTART=0 where the servers are not yours to restart. Each backend prints
# "chaos <backend> in <s>s: Tally { rounds, kills, restarts, ... }".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export DIRTHARA_REQUIRE_SERVERS=1
export DIRTHARA_CHAOS_ROUNDS="${ROUNDS:-25}"
export DIRTHARA_CHAOS_RUNNERS="${RUNNERS:-6}"
export DIRTHARA_CHAOS_MIGRATIONS="${MIGRATIONS:-40}"
export DIRTHARA_CHAOS_SECONDS="${SECONDS_PER_ROUND:-6}"
export DIRTHARA_TEST_MONGODB_URL="${DIRTHARA_TEST_MONGODB_URL:-mongodb://127.0.0.1:27018/admin?directConnection=true}"
cargo test -p dirthara-cli --test chaos -- --nocapture --test-threads 1
