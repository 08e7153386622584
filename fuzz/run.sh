#!/usr/bin/env bash
# The long fuzz run: every proptest target of crates/dirthara-source/tests/hostile_input.rs
# and crates/dirthara/tests/hostile_config.rs with many cases (CI runs a few thousand).
#
#   bash fuzz/run.sh            # 200000 cases per target (≥ 10^6 executions in total)
#   CASES=1000000 bash fuzz/run.sh
#
# Every input of every target is held to the target's time and memory bounds (the runner,
# crates/dirthara-test-kit/src/fuzz.rs); one that never returns ends the run, naming its
# case and the seed to replay it with (DIRTHARA_FUZZ_SEED=<seed> bash fuzz/run.sh).
# Each target prints "fuzz <target>: <cases> cases in <seconds>s (seed S); slowest input
# <ms>, largest input held <MiB>" (shown with --nocapture).
# The loader target writes a temporary directory per case: it runs a tenth of CASES.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cases="${CASES:-200000}"
export DIRTHARA_FUZZ_CASES="$cases"
cargo test --release -p dirthara-source --test hostile_input -- --nocapture --skip loader
cargo test --release -p dirthara --test hostile_config -- --nocapture
DIRTHARA_FUZZ_CASES=$((cases / 10)) \
    cargo test --release -p dirthara-source --test hostile_input -- --nocapture loader
