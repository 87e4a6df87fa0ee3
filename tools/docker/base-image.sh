#!/usr/bin/env bash
# A local stand-in for the python:3.11-slim-bookworm base image, for machines that reach no
# container registry (this project's CI). Debian bookworm from debootstrap (minbase, with the
# documentation and locales left out as Debian's slim images do), Debian's python3.11, and a
# virtualenv at /usr/local so that python, python3 and pip are in /usr/local/bin as in the
# official image. The host's extra CA certificates are added when it has any, for a proxy
# that intercepts TLS on the way to PyPI. Only the tests use it:
#
#   tools/docker/base-image.sh [TAG]     # default kafkalite-local/python:3.11-slim-bookworm
#   docker build --build-arg PYTHON_IMAGE=kafkalite-local/python:3.11-slim-bookworm .
#
# The root filesystem is kept as a tarball under $KL_DOCKER_HOME/base, so a new engine data
# root imports it in seconds instead of running debootstrap again (~5 min).
set -euo pipefail
H=${KL_DOCKER_HOME:-$HOME/.cache/kafkalite/docker}
TAG=${1:-kafkalite-local/python:3.11-slim-bookworm}
VERSION=1   # bump when the recipe below changes
TARBALL="$H/base/python-3.11-slim-bookworm.v$VERSION.tar"
export DOCKER_HOST=${DOCKER_HOST:-unix://$H/docker.sock} DOCKER_CONFIG=${DOCKER_CONFIG:-$H/config}
log() { echo "base-image.sh: $*" >&2; }

if docker image inspect "$TAG" >/dev/null 2>&1 && [ "$(docker image inspect -f '{{index .Config.Labels "kafkalite.base-recipe"}}' "$TAG")" = "$VERSION" ]; then
  exit 0
fi

if [ ! -s "$TARBALL" ]; then
  [ "$(id -u)" = 0 ] || { log "needs root (debootstrap, chroot)"; exit 3; }
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  R="$H/base/rootfs"
  rm -rf "$R" && mkdir -p "$R"
  cleanup() { umount "$R/proc" 2>/dev/null || true; }
  trap cleanup EXIT
  mirror=$(grep -rhoE 'https?://[^ ]+/debian/?$' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 || true)
  log "debootstrap bookworm into $R"
  debootstrap --variant=minbase bookworm "$R" "${mirror:-http://deb.debian.org/debian}" >"$H/base/debootstrap.log" 2>&1 \
    || { tail -20 "$H/base/debootstrap.log" >&2; exit 1; }
  # as Debian's slim images: no documentation, manual pages or translations
  cat > "$R/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
CFG
  find "$R/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  rm -rf "$R"/usr/share/man/* "$R"/usr/share/info/* "$R"/usr/share/locale/* "$R"/usr/share/lintian/*
  cp /etc/resolv.conf "$R/etc/resolv.conf"
  mount -t proc proc "$R/proc"
  chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3.11 python3.11-venv ca-certificates netbase tzdata >/dev/null
  if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$R/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/"
    chroot "$R" update-ca-certificates >/dev/null
  fi
  chroot "$R" python3.11 -m venv /usr/local
  chroot "$R" apt-get clean
  rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin "$R"/var/log/* "$R"/tmp/*
  : > "$R/etc/resolv.conf"
  umount "$R/proc"; trap - EXIT
  tar -C "$R" --numeric-owner --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  rm -rf "$R"
fi
log "importing $TARBALL as $TAG"
docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' --change "LABEL kafkalite.base-recipe=$VERSION" \
  --change 'CMD ["python3"]' "$TARBALL" "$TAG" >/dev/null
docker image ls "$TAG"
