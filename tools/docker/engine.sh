#!/usr/bin/env bash
# A Docker engine for kafkalite's tests, on a private socket, from Debian's packages.
#
#   tools/docker/engine.sh install   # fetch the engine, Compose v2 and buildx into the cache (once)
#   tools/docker/engine.sh start     # install if needed, start dockerd; prints the variables to export
#   tools/docker/engine.sh stop      # stop dockerd; puts ip_forward and the iptables FORWARD policy back
#   tools/docker/engine.sh status    # engine version, or exit 1
#   tools/docker/engine.sh env       # the variables to export (PATH, DOCKER_HOST, DOCKER_CONFIG)
#
# Needs root and Debian's apt (the machines this project runs on). Nothing is installed
# system-wide except the iptables package when it is missing: the engine, its CLI, containerd,
# Compose and buildx are unpacked from Debian 13 (trixie) packages under $KL_DOCKER_HOME
# (default ~/.cache/kafkalite/docker). trixie is used rather than bookworm's docker.io
# (20.10) because the image's health check uses start_interval, which needs Engine 25+.
# runc comes from bookworm: trixie's needs a newer glibc; docker-init is tini's static build.
set -euo pipefail

H=${KL_DOCKER_HOME:-$HOME/.cache/kafkalite/docker}
SUITE=${KL_DOCKER_SUITE:-trixie}
# package[/release]: what the engine is made of (versions are whatever the suite has; the stamp records them)
PACKAGES=${KL_DOCKER_PACKAGES:-"docker.io/$SUITE docker-cli/$SUITE containerd/$SUITE docker-compose/$SUITE docker-buildx/$SUITE tini/$SUITE runc/bookworm"}
ROOT="$H/engine/root"
SOCK="$H/docker.sock"
export DOCKER_HOST="unix://$SOCK" DOCKER_CONFIG="$H/config" PATH="$ROOT/usr/bin:$ROOT/usr/sbin:$PATH"

log() { echo "engine.sh: $*" >&2; }

apt_private() {  # apt-get/apt-cache with lists and cache under $H/apt, leaving the system's apt alone
  local tool=$1; shift
  "$tool" -o Dir::Etc::sourcelist="$H/apt/sources.list" -o Dir::Etc::sourceparts=/nonexistent \
    -o Dir::State::Lists="$H/apt/lists" -o Dir::Cache="$H/apt/cache" -o Dir::State::status="$H/apt/status" \
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}

install_engine() {
  if [ -f "$H/engine/stamp" ] && [ "$(head -1 "$H/engine/stamp")" = "$PACKAGES" ] && [ -x "$ROOT/usr/sbin/dockerd" ]; then
    return 0
  fi
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { log "needs Debian's apt-get and dpkg-deb"; exit 3; }
  [ "$(id -u)" = 0 ] || { log "needs root"; exit 3; }
  if ! command -v iptables >/dev/null; then
    log "installing iptables (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables >/dev/null
  fi
  local mirror
  mirror=$(grep -rhoE 'https?://[^ ]+/debian/?$' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  mkdir -p "$H/apt/lists/partial" "$H/apt/cache/archives/partial" "$H/apt/debs"
  : > "$H/apt/status"
  printf 'deb %s %s main\ndeb %s bookworm main\n' "$mirror" "$SUITE" "$mirror" > "$H/apt/sources.list"
  log "fetching $PACKAGES from $mirror"
  apt_private apt-get update -qq
  rm -f "$H/apt/debs"/*.deb
  # shellcheck disable=SC2086
  (cd "$H/apt/debs" && apt_private apt-get download -qq $PACKAGES)
  rm -rf "$ROOT.new" && mkdir -p "$ROOT.new"
  for deb in "$H/apt/debs"/*.deb; do dpkg-deb -x "$deb" "$ROOT.new"; done
  rm -rf "$ROOT" && mv "$ROOT.new" "$ROOT"
  mkdir -p "$H/config/cli-plugins"
  ln -sf "$ROOT/usr/libexec/docker/cli-plugins/docker-compose" "$H/config/cli-plugins/docker-compose"
  ln -sf "$ROOT/usr/libexec/docker/cli-plugins/docker-buildx" "$H/config/cli-plugins/docker-buildx"
  [ -f "$H/config/config.json" ] || echo '{}' > "$H/config/config.json"
  { echo "$PACKAGES"; for deb in "$H/apt/debs"/*.deb; do echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"; done; } > "$H/engine/stamp"
  rm -f "$H/apt/debs"/*.deb
  log "installed: $(tail -n +2 "$H/engine/stamp" | paste -sd',')"
}

running() { [ -S "$SOCK" ] && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start_engine() {
  install_engine
  if running; then log "already running"; print_env; return 0; fi
  # what dockerd changes on the host, to put back at stop
  cat /proc/sys/net/ipv4/ip_forward > "$H/ip_forward.before" 2>/dev/null || true
  { iptables -S FORWARD 2>/dev/null | awk '$1=="-P"{print $3}'; } > "$H/forward_policy.before" || true
  rm -f "$SOCK"
  setsid dockerd --host "$DOCKER_HOST" --data-root "$H/data-root" \
    --exec-root "$H/exec-root" --pidfile "$H/dockerd.pid" --storage-driver "${KL_DOCKER_STORAGE_DRIVER:-overlay2}" \
    >"$H/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 120); do running && break; sleep 0.5; done
  running || { log "dockerd did not start; the end of $H/dockerd.log:"; tail -20 "$H/dockerd.log" >&2; exit 1; }
  print_env
}

stop_engine() {
  local pid
  if [ -f "$H/dockerd.pid" ] && pid=$(cat "$H/dockerd.pid") && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && { log "dockerd $pid did not stop in 60 s"; exit 1; }
  fi
  [ -s "$H/ip_forward.before" ] && cat "$H/ip_forward.before" > /proc/sys/net/ipv4/ip_forward 2>/dev/null || true
  if [ -s "$H/forward_policy.before" ] && command -v iptables >/dev/null; then
    iptables -P FORWARD "$(cat "$H/forward_policy.before")" 2>/dev/null || true
  fi
  rm -f "$H/ip_forward.before" "$H/forward_policy.before"
}

print_env() { echo "export PATH=$ROOT/usr/bin:\$PATH DOCKER_HOST=$DOCKER_HOST DOCKER_CONFIG=$DOCKER_CONFIG"; }

mkdir -p "$H"
case "${1:-start}" in
  install) install_engine; tail -n +2 "$H/engine/stamp" ;;
  start) start_engine ;;
  stop) stop_engine ;;
  status) running && docker version --format '{{.Server.Version}}' ;;
  env) print_env ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
