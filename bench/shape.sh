#!/usr/bin/env bash
# The shape of the code, for the reshape's before/after figures: lines per source file (and
# how many pass 400), public items in the library's docs, the Backend trait's methods, the
# module graph's cycles and the dependency count. Run from the repository root; public items
# need `cargo doc -p dirthara --no-deps` to have run.
set -euo pipefail
src=crates/dirthara/src
echo "library source files:      $(find $src -name '*.rs' | wc -l)"
echo "library lines (non-test):  $(find $src -name '*.rs' ! -name 'tests.rs' ! -path '*/tests/*' | xargs cat | wc -l)"
echo "source files over 400 lines (all crates, src/ only):"
find crates -path '*/src/*' -name '*.rs' | xargs wc -l | awk '$2 != "total" && $1 > 400 {print "  " $1 " " $2}' | sort -rn
echo "Backend methods:           $(awk '/trait Backend: Send \{/,/^\}/' $src/backend.rs | grep -cE '^\s+(async )?fn ')"
echo "pub modules in lib.rs:     $(grep -cE '^pub mod ' $src/lib.rs)"
if [ -f target/doc/dirthara/all.html ]; then
  echo "public items (docs):       $(grep -o '<li><a href="[^"]*"' target/doc/dirthara/all.html | wc -l)"
fi
echo "module cycles:             $(python3 bench/module_cycles.py | awk '/cycle\(s\)/ {print $1}')"
echo "dependencies (dirthara-cli, normal): $(cargo tree -p dirthara-cli -e normal --prefix none | sed 's/ (\*)//' | sort -u | wc -l)"
