#!/usr/bin/env bash
# Runs the dirthara migration benchmarks against the local servers.
#
#   bash bench/run.sh
#
# Builds the release CLI first (the bench times it as a separate process, from
# target/release/dirthara), then runs crates/dirthara-cli/benches/migrations.rs.
# Results are printed only; nothing is written to the repository.
#
# Servers: DIRTHARA_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres)
# and DIRTHARA_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/mysql); the bench
# creates uniquely named databases there and drops them when it ends.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release -p dirthara-cli
cargo bench -p dirthara-cli --bench migrations
