#!/usr/bin/env bash
# The stall benchmark's rows for blocking DDL (crates/dirthara-cli/benches/ddl_stall.rs), on
# PostgreSQL: a 3-million-row table's rewrite refused by default, unchecked (every other
# runner), and done by docs/ddl-safety.md's recipe; four ALTERs in one transaction and one
# ALTER of a partitioned table while readers of their other tables end one after the other.
# Prints the steady client's largest latency per row and each target met or MISSED (exit 1 if
# one was missed).
#
#   bash bench/ddl_stall.sh
#   DIRTHARA_STALL_ROWS=6000000 bash bench/ddl_stall.sh
#
# Server: DIRTHARA_TEST_POSTGRES_URL, as for the tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p dirthara-cli
cargo bench -p dirthara-cli --bench ddl_stall
