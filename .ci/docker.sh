#!/usr/bin/env bash
# Docker engine for the docker backend's tests (local_mode --backend docker).
#
# Source it and call the functions (what .ci/run does):
#     source .ci/docker.sh
#     smddp_docker_start      # installs docker.io, docker-compose, debootstrap; starts dockerd; exports DOCKER_HOST
#     smddp_docker_build_image  # after setup.sh: the kit's image (cached by digest in the persistent data root)
#     ...                     # tests
#     smddp_docker_stop       # stops that dockerd by its PID; removes the links it made
# or run it:  bash .ci/docker.sh start|build|stop|status   (start prints the DOCKER_HOST line to export).
#
# The daemon is ours alone: its own data root (persistent, so built images survive between CI runs on the same
# machine), exec root, pidfile and socket. It runs with --bridge=none and --iptables=false: containers use host
# networking (loopback addresses only), so no docker0 bridge, no NAT and no nft/iptables rules are created.

SMDDP_DOCKER_DATA_ROOT=${SMDDP_DOCKER_DATA_ROOT:-/var/lib/smddp-compat/docker}
SMDDP_DOCKER_RUN_DIR=${SMDDP_DOCKER_RUN_DIR:-/run/smddp-compat}
SMDDP_DOCKER_SOCKET="$SMDDP_DOCKER_RUN_DIR/docker.sock"
SMDDP_DOCKER_PIDFILE="$SMDDP_DOCKER_RUN_DIR/dockerd.pid"
SMDDP_DOCKER_LOG=${SMDDP_DOCKER_LOG:-/var/log/smddp-compat-dockerd.log}
SMDDP_DOCKER_PACKAGES=(docker.io docker-compose debootstrap)

_smddp_docker_as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

_smddp_docker_install() {
  local missing=() p
  for p in "${SMDDP_DOCKER_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "==> [docker] installing ${missing[*]} from Debian"
  _smddp_docker_as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
  _smddp_docker_as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
}

_smddp_docker_pid_alive() {
  [ -f "$SMDDP_DOCKER_PIDFILE" ] && kill -0 "$(cat "$SMDDP_DOCKER_PIDFILE")" 2>/dev/null
}

smddp_docker_start() {
  _smddp_docker_install || { echo "!! [docker] could not install ${SMDDP_DOCKER_PACKAGES[*]}" >&2; return 1; }
  export DOCKER_HOST="unix://$SMDDP_DOCKER_SOCKET"
  if _smddp_docker_pid_alive && timeout 10 docker info >/dev/null 2>&1; then
    echo "==> [docker] dockerd already running (pid $(cat "$SMDDP_DOCKER_PIDFILE")); DOCKER_HOST=$DOCKER_HOST"
    return 0
  fi
  _smddp_docker_as_root mkdir -p "$SMDDP_DOCKER_DATA_ROOT" "$SMDDP_DOCKER_RUN_DIR/exec"
  _smddp_docker_as_root rm -f "$SMDDP_DOCKER_PIDFILE" "$SMDDP_DOCKER_SOCKET"
  echo "==> [docker] starting dockerd (data root $SMDDP_DOCKER_DATA_ROOT, log $SMDDP_DOCKER_LOG)"
  # setsid: the daemon gets its own session, so a Ctrl-C in the calling shell does not reach it.
  _smddp_docker_as_root setsid dockerd \
      --data-root "$SMDDP_DOCKER_DATA_ROOT" \
      --exec-root "$SMDDP_DOCKER_RUN_DIR/exec" \
      --pidfile "$SMDDP_DOCKER_PIDFILE" \
      --host "$DOCKER_HOST" \
      --bridge none --iptables=false --ip6tables=false \
      >>"$SMDDP_DOCKER_LOG" 2>&1 < /dev/null &
  local i
  for i in $(seq 1 60); do
    if timeout 5 docker info >/dev/null 2>&1; then
      echo "==> [docker] ready after ~$((i / 2)) s (pid $(cat "$SMDDP_DOCKER_PIDFILE")); DOCKER_HOST=$DOCKER_HOST"
      return 0
    fi
    sleep 0.5
  done
  echo "!! [docker] dockerd did not answer within 30 s; last lines of $SMDDP_DOCKER_LOG:" >&2
  tail -20 "$SMDDP_DOCKER_LOG" >&2
  smddp_docker_stop
  return 1
}

_smddp_docker_remove_links() {
  # Bridge links docker may have made: docker0 (never with --bridge none, but an older daemon may have left it)
  # and br-<network id> of user-defined networks (the SageMaker SDK's local mode creates one). With
  # --iptables=false the daemon writes no nft/iptables rules, so there are no tables to delete.
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^(docker0|br-[0-9a-f]{12})$'); do
    _smddp_docker_as_root ip link delete "$link" 2>/dev/null && echo "==> [docker] removed link $link"
  done
}

smddp_docker_stop() {
  local pid i
  if [ -f "$SMDDP_DOCKER_PIDFILE" ]; then
    pid=$(cat "$SMDDP_DOCKER_PIDFILE")
    if kill -0 "$pid" 2>/dev/null; then
      # Containers first (they would otherwise be killed by the daemon's shutdown after its own timeout).
      timeout 30 docker --host "unix://$SMDDP_DOCKER_SOCKET" ps -q 2>/dev/null \
        | xargs -r timeout 30 docker --host "unix://$SMDDP_DOCKER_SOCKET" rm -f >/dev/null 2>&1 || true
      echo "==> [docker] stopping dockerd (pid $pid)"
      _smddp_docker_as_root kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "!! [docker] dockerd (pid $pid) still running after 20 s: SIGKILL" >&2
        _smddp_docker_as_root kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
  fi
  _smddp_docker_as_root rm -f "$SMDDP_DOCKER_PIDFILE" "$SMDDP_DOCKER_SOCKET"
  _smddp_docker_remove_links
  return 0
}

# Builds the kit's training image if the engine does not hold it yet (after setup.sh: it reuses the host's Horovod
# wheel), printing the tag and the time taken; the build output goes to $SMDDP_DOCKER_BUILD_LOG.
smddp_docker_build_image() {
  local python=${1:-.venv/bin/python} started log=${SMDDP_DOCKER_BUILD_LOG:-/tmp/smddp-docker-image-build.log}
  started=$(date +%s)
  echo "==> [docker] kit image (build log: $log)"
  if ! "$python" -m smddp_compat.image --log "$log"; then
    echo "!! [docker] image build failed; last lines of $log:" >&2
    tail -30 "$log" >&2
    return 1
  fi
  echo "==> [docker] kit image ready in $(( $(date +%s) - started )) s"
}

smddp_docker_status() {
  if _smddp_docker_pid_alive; then
    echo "dockerd running (pid $(cat "$SMDDP_DOCKER_PIDFILE")); export DOCKER_HOST=unix://$SMDDP_DOCKER_SOCKET"
  else
    echo "dockerd not running"
    return 1
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    start) smddp_docker_start; echo "export DOCKER_HOST=unix://$SMDDP_DOCKER_SOCKET" ;;
    build) export DOCKER_HOST="unix://$SMDDP_DOCKER_SOCKET"; smddp_docker_build_image "${2:-.venv/bin/python}" ;;
    stop) smddp_docker_stop ;;
    status) smddp_docker_status ;;
    *) echo "usage: bash .ci/docker.sh start|build|stop|status  (or: source .ci/docker.sh; smddp_docker_start)" >&2; exit 2 ;;
  esac
fi
