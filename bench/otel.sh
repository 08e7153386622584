#!/usr/bin/env bash
# What OpenTelemetry costs a no-op `migrate` (SQLite, N applied): the CLI built without the
# `otel` feature, with it and no endpoint set (nothing is recorded or sent), and with it
# exporting to a local OTLP/HTTP receiver (a Python server answering 200), alternated ROUNDS
# times so the machine's drift hits each alike. Prints each round and the medians, and the
# ratios to the build without the feature.
#
#   bash bench/otel.sh [N] [ROUNDS]
#
# N defaults to 100, ROUNDS to 15. Builds both CLIs first (PROFILE, default `release`; `bench-build`
# is release without its LTO, minutes faster; each
# in its own target directory under target/bench-otel). Results are printed only.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
rounds=${2:-15}
profile=${PROFILE:-release}

echo "building the CLI with and without the otel feature ($profile)"
cargo build -q --profile "$profile" -p dirthara-cli --target-dir target/bench-otel/on
cargo build -q --profile "$profile" -p dirthara-cli --target-dir target/bench-otel/off \
  --no-default-features --features sqlite,postgres,mysql,mongodb
dir_name=$profile; [ "$profile" = dev ] && dir_name=debug
on=target/bench-otel/on/$dir_name/dirthara
off=target/bench-otel/off/$dir_name/dirthara

work=$(mktemp -d)
receiver_pid=
cleanup() { [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir "$work/migrations"
for i in $(seq 1 "$n"); do
  echo "CREATE TABLE t$i (id INT)" > "$work/migrations/${i}_t$i.up.sql"
  echo "DROP TABLE t$i" > "$work/migrations/${i}_t$i.down.sql"
done
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$port" <<'PY' &
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
PY
receiver_pid=$!
sleep 0.5

db="$work/app.db"
"$off" -d "sqlite:$db" --dir "$work/migrations" --no-lock -q migrate

# Microseconds one no-op takes, wall clock; fails loudly if the run fails.
us() {
  local start end
  start=$(date +%s%N)
  "$@" -d "sqlite:$db" --dir "$work/migrations" --no-lock -q migrate > /dev/null
  end=$(date +%s%N)
  echo $(((end - start) / 1000))
}

declare -A times
for round in $(seq 1 "$rounds"); do
  times[off]+="$(us "$off") "
  times[on]+="$(us "$on") "
  times[exporting]+="$(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" us "$on") "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(echo "${times[off]}" | median)
for which in off on exporting; do
  m=$(echo "${times[$which]}" | median)
  printf '%-10s median %7.2f ms  (%.2fx the build without the feature)  runs: %s\n' "$which" \
    "$(echo "$m / 1000" | bc -l)" "$(echo "$m / $base" | bc -l)" "${times[$which]}"
done
