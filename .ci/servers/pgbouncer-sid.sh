#!/usr/bin/env bash
# The newest PgBouncer, Debian sid's, installed in the sid chroot (.ci/servers/sid-chroot.sh
# pgbouncer) and run here on this machine's file system through sid's own loader and
# libraries (it needs a newer C library than this Debian): the tests hand it configuration
# files in their temporary directories, which a chroot would not see.
#
#   DIRTHARA_TEST_PGBOUNCER=.ci/servers/pgbouncer-sid.sh cargo test --test pgbouncer
set -euo pipefail
dir="${DIRTHARA_SID_CHROOT:-$HOME/.cache/dirthara-sid-chroot}"
libs="$dir/lib/x86_64-linux-gnu:$dir/usr/lib/x86_64-linux-gnu"
exec "$dir/lib64/ld-linux-x86-64.so.2" --library-path "$libs" "$dir/usr/sbin/pgbouncer" "$@"
