# tools/stack.d/mariadb.sh — the private MariaDBs (primary, replica, at its defaults), sourced by
# tools/stack (which defines dir, the ports, log, die, pid_alive and stop_pidfile).
# shellcheck shell=bash disable=SC2154

# mariadb-install-db gives the OS user who ran it a same-named account with socket authentication
# (root@localhost for root, dev@localhost for a normal user "dev"): connect as that one.
mysql_sock() { local s=$1; shift; mariadb --no-defaults --protocol=socket --socket="$s" -u"$(id -un)" "$@"; }
mysql_root() { mysql_sock "$dir/mariadb/mysqld.sock" "$@"; }
mysql_replica() { mysql_sock "$dir/mariadb-replica/mysqld.sock" "$@"; }

REPL_USER=repl
REPL_PASSWORD=repl-dev

# TLS certificates for the private MariaDB (made once): a CA and a server certificate for
# 127.0.0.1 and localhost. Tests sign client certificates with the CA.
make_tls() {
  local t=$dir/tls
  [ -f "$t/server-cert.pem" ] && return 0
  mkdir -p "$t"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -days 3650 -subj "/CN=outbox-bridge stack CA" \
    -keyout "$t/ca-key.pem" -out "$t/ca.pem" > "$t/openssl.log" 2>&1 || { cat "$t/openssl.log" >&2; die "openssl failed"; }
  openssl req "${ec[@]}" -subj "/CN=localhost" -keyout "$t/server-key.pem" -out "$t/server.csr" >> "$t/openssl.log" 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$t/server.ext"
  openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 3650 \
    -extfile "$t/server.ext" -out "$t/server-cert.pem" >> "$t/openssl.log" 2>&1 \
    || { cat "$t/openssl.log" >&2; die "openssl failed"; }
}

# Every server's temporary files in a tmpdir of its own: a MariaDB that starts deletes every
# "#sql*" file in its tmpdir, left over from its last run as it thinks — with /tmp shared, the
# live temporary tables of every other server on the machine (a read of PROCESSLIST makes one),
# whose statements then fail ("Error on delete of '/tmp/#sql-temptable-...MAI'").
#
# write_mycnf DIR PORT BUFFER_POOL LOG_FILE_SIZE [EXTRA_LINE...]: DIR/my.cnf, the settings the
# primary and the replica share (binary log with ROW events, TLS), then EXTRA_LINEs.
write_mycnf() {
  local d=$1 port=$2 pool=$3 logsize=$4
  shift 4
  mkdir -p "$d/binlog" "$d/tmp"
  {
    cat <<CNF
[mariadbd]
datadir=$d/data
tmpdir=$d/tmp
socket=$d/mysqld.sock
pid-file=$d/mariadbd.pid
port=$port
bind-address=127.0.0.1
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_unicode_ci
max_connections=400
innodb_buffer_pool_size=$pool
innodb_log_file_size=$logsize
log-error=$d/error.log
ssl_cert=$dir/tls/server-cert.pem
ssl_key=$dir/tls/server-key.pem
ssl_ca=$dir/tls/ca.pem
log_bin=$d/binlog/mariadb-bin
binlog_format=ROW
binlog_expire_logs_seconds=86400
log_bin_trust_function_creators=1
# information_schema.METADATA_LOCK_INFO: which connections may write an outbox table (the scan
# lets an open hole die while statements that cannot write it run; docs/design.md, Contract v2)
plugin_load_add=metadata_lock_info
CNF
    printf '%s\n' "$@"
  } > "$d/my.cnf"
}

# init_and_start_mariadbd DIR: mariadb-install-db on first use, then mariadbd, waiting until it
# answers on its socket.
init_and_start_mariadbd() {
  local d=$1 run_as=()
  [ "$(id -u)" = 0 ] && run_as=(--user=root)
  if [ ! -d "$d/data/mysql" ]; then
    log "initialising MariaDB in $d/data"
    # --force: no look-up of the host's name (a root without /etc/hosts, a renamed host); the
    # server skips name resolution and its accounts are by address and socket.
    mariadb-install-db --defaults-file="$d/my.cnf" "${run_as[@]}" --auth-root-authentication-method=socket \
      --skip-test-db --force > "$d/install.log" 2>&1 || { cat "$d/install.log" >&2; die "mariadb-install-db failed"; }
  fi
  nohup mariadbd --defaults-file="$d/my.cnf" "${run_as[@]}" > "$d/stdout.log" 2>&1 &
  for _ in $(seq 1 300); do
    if mysql_sock "$d/mysqld.sock" -e "SELECT 1" > /dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  tail -20 "$d/error.log" >&2; die "MariaDB in $d did not start"
}

# The application's accounts, the same on the primary and the replica. Account statements stay
# out of the binary log (each server's accounts are its own, a primary's restart does not re-grant
# on the replica).
outbox_accounts_sql() {
  cat <<SQL
SET sql_log_bin=0;
CREATE USER IF NOT EXISTS 'outbox'@'127.0.0.1' IDENTIFIED BY 'outbox-dev';
CREATE USER IF NOT EXISTS 'outbox'@'localhost' IDENTIFIED BY 'outbox-dev';
GRANT ALL PRIVILEGES ON *.* TO 'outbox'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'outbox'@'localhost' WITH GRANT OPTION;
SQL
}

start_mariadb() {
  local d=$dir/mariadb
  if pid_alive "$d/mariadbd.pid"; then return 0; fi
  mkdir -p "$d"
  make_tls
  write_mycnf "$d" "$MYSQL_PORT" 512M 256M server_id=1
  init_and_start_mariadbd "$d"
  { outbox_accounts_sql; repl_account_sql; } | mysql_root
  log "MariaDB up on 127.0.0.1:$MYSQL_PORT"
}

# mariadb-defaults: a MariaDB as a new user's server is, started with what a private instance
# needs (its files and tmpdir, a port on 127.0.0.1) plus log_bin and a server_id, and nothing
# else: binlog_format MIXED, max_connections 151, no metadata_lock_info, no TLS, the default
# buffer pool and character set. The same application accounts as mariadb; no replica account.
defaults_dir() { echo "$dir/mariadb-defaults"; }

write_defaults_mycnf() {
  local d=$1
  mkdir -p "$d/binlog" "$d/tmp"
  cat > "$d/my.cnf" <<CNF
[mariadbd]
datadir=$d/data
tmpdir=$d/tmp
socket=$d/mysqld.sock
pid-file=$d/mariadbd.pid
port=$MYSQL_DEFAULTS_PORT
bind-address=127.0.0.1
log-error=$d/error.log
log_bin=$d/binlog/mariadb-bin
server_id=3
CNF
}

start_mariadb_defaults() {
  local d
  d=$(defaults_dir)
  if pid_alive "$d/mariadbd.pid"; then return 0; fi
  write_defaults_mycnf "$d"
  init_and_start_mariadbd "$d"
  outbox_accounts_sql | mysql_sock "$d/mysqld.sock"
  log "MariaDB at its defaults up on 127.0.0.1:$MYSQL_DEFAULTS_PORT"
}

stop_mariadb_defaults() { stop_pidfile "$(defaults_dir)/mariadbd.pid" "${1:-TERM}"; }

# The account replicas connect with (on the primary).
repl_account_sql() {
  cat <<SQL
SET sql_log_bin=0;
CREATE USER IF NOT EXISTS '$REPL_USER'@'127.0.0.1' IDENTIFIED BY '$REPL_PASSWORD';
GRANT REPLICATION SLAVE ON *.* TO '$REPL_USER'@'127.0.0.1';
SQL
}

# The replica's state: "configured" once it was pointed at the primary, "promoted" after promote.
replica_dir() { echo "$dir/mariadb-replica"; }

# Until both replication threads run (30 s at most; at once if the SQL thread stopped on an error).
wait_replica_running() {
  local st='' deadline=$((SECONDS + 30))
  while [ "$SECONDS" -lt "$deadline" ]; do
    st=$(mysql_replica -e "SHOW SLAVE STATUS\G" 2>/dev/null || true)
    if grep -q '^ *Slave_IO_Running: Yes$' <<< "$st" && grep -q '^ *Slave_SQL_Running: Yes$' <<< "$st"; then
      return 0
    fi
    grep -q '^ *Last_SQL_Errno: [1-9]' <<< "$st" && break
    sleep 0.1
  done
  grep -E '^ *(Slave_IO_Running|Slave_SQL_Running|Last_IO_Error|Last_SQL_Error):' <<< "$st" >&2 || true
  die "the MariaDB replica does not replicate (see above and $(replica_dir)/error.log; 'tools/stack reset mariadb-replica' starts a fresh one)"
}

# configure_replica: points the fresh replica at the primary's current GTID position.
configure_replica() {
  local d gtid
  d=$(replica_dir)
  repl_account_sql | mysql_root
  # Local accounts stay out of the replica's binary log, so its GTID history is the primary's.
  # ALL PRIVILEGES includes READ_ONLY ADMIN, which would let outbox write despite read_only.
  { outbox_accounts_sql; echo "REVOKE READ_ONLY ADMIN ON *.* FROM 'outbox'@'127.0.0.1', 'outbox'@'localhost';"; } \
    | mysql_replica
  gtid=$(mysql_root -N -B -e "SELECT @@gtid_binlog_pos") || die "cannot read the primary's GTID position"
  mysql_replica <<SQL
STOP SLAVE;
SET GLOBAL gtid_slave_pos = '$gtid';
CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$MYSQL_PORT, MASTER_USER='$REPL_USER',
  MASTER_PASSWORD='$REPL_PASSWORD', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
START SLAVE;
SQL
  touch "$d/configured"
  log "MariaDB replica replicating from 127.0.0.1:$MYSQL_PORT from GTID '$gtid'"
}

start_mariadb_replica() {
  local d read_only=1
  d=$(replica_dir)
  [ -f "$d/promoted" ] && read_only=0
  if [ "$read_only" = 1 ]; then
    pid_alive "$dir/mariadb/mariadbd.pid" || { log "the replica needs the primary: starting mariadb"; start_mariadb; }
    [ -f "$d/configured" ] || [ "$(mysql_root -N -B -e "SELECT @@log_bin")" = 1 ] \
      || die "mariadb runs without a binary log (started by an older tools/stack): run 'tools/stack restart mariadb' first"
  fi
  if ! pid_alive "$d/mariadbd.pid"; then
    mkdir -p "$d/relay"
    make_tls
    write_mycnf "$d" "$MYSQL_REPLICA_PORT" 128M 64M server_id=2 log_slave_updates=1 "read_only=$read_only" \
      "relay_log=$d/relay/relay-bin"
    init_and_start_mariadbd "$d"
    log "MariaDB replica up on 127.0.0.1:$MYSQL_REPLICA_PORT$([ "$read_only" = 0 ] && echo ' (promoted)')"
  fi
  [ -f "$d/configured" ] || [ "$read_only" = 0 ] || configure_replica
  # Also when it already ran: a stopped SQL thread stays stopped.
  [ "$read_only" = 0 ] || wait_replica_running
}

stop_mariadb_replica() { stop_pidfile "$(replica_dir)/mariadbd.pid" "${1:-TERM}"; }

promote_mariadb_replica() {
  local d
  d=$(replica_dir)
  pid_alive "$d/mariadbd.pid" || die "mariadb-replica is not running"
  mysql_replica <<SQL
STOP SLAVE;
RESET SLAVE ALL;
SET GLOBAL read_only=0;
SQL
  touch "$d/promoted"
  log "MariaDB replica on 127.0.0.1:$MYSQL_REPLICA_PORT promoted: writable, replicates no more"
}

reset_mariadb_replica() {
  stop_mariadb_replica
  rm -rf "$(replica_dir)"
  start_mariadb_replica
}

stop_mariadb() { stop_pidfile "$dir/mariadb/mariadbd.pid" "${1:-TERM}"; }
