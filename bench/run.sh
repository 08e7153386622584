#!/usr/bin/env bash
# Runs the dirthara migration benchmarks against the local servers.
#
#   bash bench/run.sh                                 # everything
#   DIRTHARA_BENCH_ONLY=pg,handover-mysql bash bench/run.sh   # some scenarios
#   DIRTHARA_BENCH_BIN=/path/to/other/dirthara bash bench/run.sh  # another build's CLI
#
# Builds the release CLI first (the bench times it as a separate process, from
# target/release/dirthara), then runs crates/dirthara-cli/benches/migrations.rs, which prints
# each scenario beside its floor (psql / mysql doing the same work) in one run: compare the
# ratios of one run, not figures across machines. Results are printed only; nothing is
# written to the repository. bench/syscalls.sh counts a no-op run's system calls and
# statements.
#
# Servers: DIRTHARA_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres)
# and DIRTHARA_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/mysql); the bench
# creates uniquely named databases there and drops them when it ends. The floors need
# `psql` and `mysql` on PATH, peak RSS needs /usr/bin/time.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release -p dirthara-cli
cargo bench -p dirthara-cli --bench migrations
