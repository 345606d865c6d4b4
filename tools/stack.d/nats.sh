# tools/stack.d/nats.sh — the single nats-server and the three-node cluster, sourced by tools/stack
# (which defines dir, NATS_NODES, the ports, log, die, pid_alive and stop_pidfile).
# shellcheck shell=bash disable=SC2154

# nats_port N client|monitor|route
nats_port() {
  local v
  case "$2" in client) v=NATS_N$1_PORT ;; monitor) v=NATS_N$1_MONITOR_PORT ;; route) v=NATS_N$1_ROUTE_PORT ;; esac
  echo "${!v}"
}

# nats_cluster_list client|monitor|route: the nodes' URLs, comma-separated, in node order.
nats_cluster_list() {
  local n scheme=nats out=()
  [ "$1" = monitor ] && scheme=http
  for n in "${NATS_NODES[@]}"; do out+=("$scheme://127.0.0.1:$(nats_port "$n" "$1")"); done
  (IFS=,; echo "${out[*]}")
}

start_nats() {
  local d=$dir/nats
  if pid_alive "$d/nats.pid"; then return 0; fi
  mkdir -p "$d/store"
  nohup nats-server -js -a 127.0.0.1 -p "$NATS_PORT" -m "$NATS_MONITOR_PORT" -sd "$d/store" \
    -P "$d/nats.pid" -l "$d/nats.log" > "$d/stdout.log" 2>&1 &
  for _ in $(seq 1 200); do
    if curl -fs "http://127.0.0.1:$NATS_MONITOR_PORT/healthz?js-enabled-only=true" > /dev/null 2>&1; then
      log "nats-server up on 127.0.0.1:$NATS_PORT"; return 0
    fi
    sleep 0.05
  done
  tail -20 "$d/nats.log" >&2; die "nats-server did not start"
}

nats_node_dir() { echo "$dir/nats-cluster/n$1"; }
nats_node_alive() { pid_alive "$(nats_node_dir "$1")/nats.pid"; }

# nats_meta_leader N: the JetStream meta leader node N knows of (empty when none).
nats_meta_leader() {
  curl -fs --max-time 2 "http://127.0.0.1:$(nats_port "$1" monitor)/jsz" 2>/dev/null \
    | grep -o '"leader": *"[^"]*"' | head -1 | sed 's/.*: *"\(.*\)"/\1/' || true
}

# nats_live_leader N: the meta leader node N knows of, if that node runs (a killed leader stays
# named for a few seconds).
nats_live_leader() {
  local l
  l=$(nats_meta_leader "$1")
  case "$l" in outbox-n[0-9]*) nats_node_alive "${l#outbox-n}" && echo "$l" ;; esac
  return 0
}

# nats_node_ready N: node N is healthy (JetStream current with the meta leader, its streams
# current) and knows a running leader; prints that leader.
nats_node_ready() {
  curl -fs --max-time 2 "http://127.0.0.1:$(nats_port "$1" monitor)/healthz" > /dev/null 2>&1 || return 1
  local l
  l=$(nats_live_leader "$1")
  [ -n "$l" ] && echo "$l"
}

# launch_nats_node N: starts node N when it does not run; waits only until it serves.
launch_nats_node() {
  local n=$1 d
  d=$(nats_node_dir "$n")
  nats_node_alive "$n" && return 0
  mkdir -p "$d/store"
  nohup nats-server -js -a 127.0.0.1 -p "$(nats_port "$n" client)" -m "$(nats_port "$n" monitor)" \
    -n "outbox-n$n" --cluster_name outbox --cluster "nats://127.0.0.1:$(nats_port "$n" route)" \
    --routes "$(nats_cluster_list route)" -sd "$d/store" -P "$d/nats.pid" -l "$d/nats.log" \
    > "$d/stdout.log" 2>&1 &
  for _ in $(seq 1 200); do
    if curl -fs "http://127.0.0.1:$(nats_port "$n" monitor)/healthz?js-enabled-only=true" > /dev/null 2>&1; then
      log "nats-server outbox-n$n up on 127.0.0.1:$(nats_port "$n" client)"; return 0
    fi
    sleep 0.05
  done
  tail -20 "$d/nats.log" >&2; die "nats-server outbox-n$n did not start"
}

# wait_nats_ready N...: until each node N is ready and all name the same leader (60 s at most).
wait_nats_ready() {
  local n l pending leaders deadline=$((SECONDS + 60))
  while [ "$SECONDS" -lt "$deadline" ]; do
    pending=(); leaders=" "
    for n in "$@"; do
      if l=$(nats_node_ready "$n"); then
        case "$leaders" in *" $l "*) ;; *) leaders+="$l " ;; esac
      else
        pending+=("$n")
      fi
    done
    [ ${#pending[@]} -eq 0 ] && [ "$(wc -w <<< "$leaders")" -eq 1 ] && return 0
    sleep 0.1
  done
  for n in "${pending[@]}"; do
    log "outbox-n$n: healthz $(curl -s --max-time 2 "http://127.0.0.1:$(nats_port "$n" monitor)/healthz" || true)"
  done
  die "nats cluster: nodes $* not ready with one meta leader after 60 s (leaders:$leaders; see $dir/nats-cluster/n*/nats.log)"
}

start_nats_cluster() {
  local n
  for n in "${NATS_NODES[@]}"; do launch_nats_node "$n"; done
  wait_nats_ready "${NATS_NODES[@]}"
  log "nats cluster up on $(nats_cluster_list client), meta leader $(nats_live_leader 1)"
}

# start_nats_node N: one node. With another node running (so a quorum of two can form), also
# waits until this one is current with the meta leader; a lone node has no leader to wait for.
start_nats_node() {
  local n=$1 m others=0
  launch_nats_node "$n"
  for m in "${NATS_NODES[@]}"; do [ "$m" != "$n" ] && nats_node_alive "$m" && others=$((others + 1)); done
  [ "$others" -gt 0 ] && wait_nats_ready "$n"
  return 0
}

stop_nats_node() { stop_pidfile "$(nats_node_dir "$1")/nats.pid" "${2:-TERM}"; }

stop_nats() { stop_pidfile "$dir/nats/nats.pid" "${1:-TERM}"; }
