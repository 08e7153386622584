#!/usr/bin/env bash
# The stall benchmark (crates/dirthara-cli/benches/stall.rs): how long the application is
# blocked while a migration's ALTER TABLE waits behind a 10 s transaction, with the default
# table-lock timeout and with `--table-lock-timeout off` (every other runner's behaviour), on
# PostgreSQL and MariaDB. Prints each run's client latency (largest, p99), the time blocked,
# how long after the blocker the migration finished, and whether it was applied once; with
# the timeout, each target met or MISSED, and exits 1 if one was missed.
#
#   bash bench/stall.sh
#   DIRTHARA_STALL_HOLD=5 bash bench/stall.sh      # a shorter blocker
#
# Servers: DIRTHARA_TEST_POSTGRES_URL / DIRTHARA_TEST_MYSQL_URL, as for the tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p dirthara-cli
cargo bench -p dirthara-cli --bench stall
