#!/usr/bin/env bash
# A Debian sid chroot for the servers whose packages need a newer C library than this Debian:
# Oracle MySQL 9.x (mysql-server-core), Odyssey and the newest PgBouncer. Built once with
# debootstrap and kept under ~/.cache, so a repeat run on the same machine only checks it;
# rebuilt when it is missing or half-made, and any package asked for that it lacks is added.
#
#   .ci/servers/sid-chroot.sh PACKAGE...    prints the chroot's directory on the last line
#
# Needs root (debootstrap, chroot). sid moves: CI gets whatever version sid has that day,
# and says which in its log.
set -euo pipefail

dir="${DIRTHARA_SID_CHROOT:-$HOME/.cache/dirthara-sid-chroot}"
mirror="${DIRTHARA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ "$(id -u)" != 0 ]; then
  echo "FATAL: the sid chroot needs root (debootstrap, chroot); run CI as root" >&2
  exit 1
fi

if [ ! -f "$dir/.dirthara-ready" ]; then
  command -v debootstrap >/dev/null 2>&1 || {
    echo "installing debootstrap from the Debian package" >&2
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >&2
  }
  echo "building a Debian sid chroot in $dir (once per machine; about 90 s)" >&2
  rm -rf "$dir.partial"
  mkdir -p "$(dirname "$dir")"
  debootstrap --variant=minbase sid "$dir.partial" "$mirror" > "$dir.debootstrap.log" 2>&1 || {
    tail -n 30 "$dir.debootstrap.log" >&2
    echo "FATAL: debootstrap of Debian sid from $mirror failed (log: $dir.debootstrap.log)" >&2
    exit 1
  }
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  touch "$dir/.dirthara-ready"
fi

# Servers started inside need /proc (mysqld reads it); mounted once, left for the next run.
mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"

missing=()
for package in "$@"; do
  chroot "$dir" dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing ${missing[*]} into the sid chroot" >&2
  # The packages' maintainer scripts try to start their services; nothing may start here.
  printf '#!/bin/sh\nexit 101\n' > "$dir/usr/sbin/policy-rc.d"
  # The mirror this machine uses may serve a frozen snapshot of sid whose Release file has
  # passed its Valid-Until date; its packages are still what we want.
  echo 'Acquire::Check-Valid-Until "false";' > "$dir/etc/apt/apt.conf.d/99dirthara-snapshot"
  chmod 755 "$dir/usr/sbin/policy-rc.d"
  { chroot "$dir" apt-get update && DEBIAN_FRONTEND=noninteractive chroot "$dir" \
      apt-get install -y --no-install-recommends "${missing[@]}"; } > "$dir.apt.log" 2>&1 || {
    tail -n 30 "$dir.apt.log" >&2
    echo "FATAL: could not install ${missing[*]} into the sid chroot (log: $dir.apt.log)" >&2
    exit 1
  }
fi
echo "$dir"
