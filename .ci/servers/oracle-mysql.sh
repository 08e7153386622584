# Sourced by .ci/run: start_oracle_mysql NAME PORT starts Oracle MySQL (Debian sid's
# mysql-server-core, which needs sid's C library, hence the chroot of sid-chroot.sh) on
# 127.0.0.1:PORT, root without a password, from a data directory of its own inside the chroot.
# It uses .ci/run's wait_for, and records what it started in .ci/run's MARIADB_PIDS (stopped by
# pid) and CHROOT_TMP_DIRS (removed), so the EXIT trap undoes it however CI ends.
# Sets ORACLE_MYSQL_VERSION to the version the server reports, and ORACLE_MYSQL_CHROOT to the
# chroot (the tests' private servers of Oracle MySQL start there: DIRTHARA_TEST_MYSQL_CHROOT).

start_oracle_mysql() { # name, port
  local name=$1 port=$2 chroot_dir dir inside
  chroot_dir="$(.ci/servers/sid-chroot.sh mysql-server-core mysql-client | tail -n1)"
  ORACLE_MYSQL_CHROOT="$chroot_dir"
  # mysql-server-core ships the server without the package that makes its system user.
  chroot "$chroot_dir" getent passwd mysql >/dev/null \
    || chroot "$chroot_dir" useradd --system --user-group --no-create-home \
      --home-dir /nonexistent --shell /bin/false mysql
  # The server sees only the chroot: its data, socket and logs live under the chroot's /tmp.
  dir="$(mktemp -d "$chroot_dir/tmp/dirthara-ci-$name.XXXXXX")"
  CHROOT_TMP_DIRS+=("$dir")
  inside="${dir#"$chroot_dir"}"
  chmod 755 "$dir"
  chroot "$chroot_dir" chown mysql:mysql "$inside"
  chroot "$chroot_dir" mysqld --no-defaults --initialize-insecure --user=mysql \
    --datadir="$inside/data" > "$dir/initialize.log" 2>&1 \
    || { cat "$dir/initialize.log" >&2; return 1; }
  # The tests connect over TCP to 127.0.0.1; with --skip-name-resolve root@localhost matches
  # only the socket, so root gets an account for any host too (no password, as on MariaDB).
  cat > "$dir/init.sql" <<'SQL'
CREATE USER IF NOT EXISTS 'root'@'%';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
SQL
  chmod 644 "$dir/init.sql"
  # chroot execs mysqld, so $! is the server's own pid.
  chroot "$chroot_dir" mysqld --no-defaults --user=mysql --datadir="$inside/data" \
    --port="$port" --bind-address=127.0.0.1 --socket="$inside/mysqld.sock" \
    --pid-file="$inside/mysqld.pid" --log-error="$inside/server.log" --mysqlx=OFF \
    --skip-name-resolve --skip-log-bin --secure-file-priv= --init-file="$inside/init.sql" \
    > "$dir/stdout.log" 2>&1 &
  MARIADB_PIDS+=($!)
  wait_for "$name" mysqladmin --protocol=tcp -h 127.0.0.1 -P "$port" -uroot ping \
    || { tail -n 30 "$dir/server.log" >&2; return 1; }
  ORACLE_MYSQL_VERSION="$(mysql --protocol=tcp -h 127.0.0.1 -P "$port" -uroot -N -B \
    -e 'SELECT CONCAT(@@version, " ", @@version_comment)')"
  echo "$name: Oracle MySQL $ORACLE_MYSQL_VERSION on port $port ($dir)"
}
