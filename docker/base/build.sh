#!/usr/bin/env bash
# Makes the local Debian 12 base image (default hiwater/base:bookworm) without a registry:
# debootstrap --variant=minbase into a temporary rootfs, add the node image's Debian packages
# (docker/node/packages.txt) with apt-get inside it, then `tar | docker import`.
# Skipped when the image exists (FORCE=1 rebuilds). The Debian mirror is the one this machine's
# apt already uses (read from /etc/apt/sources.list*), or $HIWATER_DEBIAN_MIRROR.
# Needs root and debootstrap (apt-get install -y debootstrap).
set -euo pipefail
IMAGE="${1:-hiwater/base:bookworm}"
SUITE=bookworm
here="$(cd "$(dirname "$0")" && pwd)"

if ! docker info >/dev/null 2>&1; then
  echo "hiwater docker: no Docker engine is reachable (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})" >&2
  exit 3
fi
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE exists: skipped"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "docker/base/build.sh: needs root (debootstrap)" >&2; exit 3; fi
command -v debootstrap >/dev/null || { echo "docker/base/build.sh: debootstrap is missing (apt-get install -y debootstrap)" >&2; exit 3; }

mirror_from_apt() {
  # deb822 (.sources) first: the URIs of a stanza whose Suites name $SUITE; then one-line lists
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      /^[[:space:]]*$/ { if (uri != "" && ok) { print uri; exit } uri=""; ok=0; next }
      /^URIs:/ { uri=$2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) ok=1 }
      END { if (uri != "" && ok) print uri }' "$f" | head -n1
  done | grep -v security | head -n1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($(i+1) == suite) print $i; break } }' "$f"
  done | head -n1
}
MIRROR="${HIWATER_DEBIAN_MIRROR:-$(mirror_from_apt | head -n1)}"
if [ -z "$MIRROR" ]; then
  echo "docker/base/build.sh: no Debian $SUITE mirror in /etc/apt/sources.list*; set HIWATER_DEBIAN_MIRROR" >&2
  exit 3
fi
packages=$(grep -v '^#' "$here/../node/packages.txt" | tr -s ' \n' ' ')

work="$(mktemp -d /var/tmp/hiwater-base.XXXXXX)"
rootfs="$work/rootfs"
cleanup() {
  for m in proc sys dev/pts; do umount -l "$rootfs/$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT INT TERM
t0=$(date +%s)
echo "debootstrap $SUITE from $MIRROR into $rootfs"
debootstrap --variant=minbase --include=python3,ca-certificates "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
mount -t proc proc "$rootfs/proc"
# no service may start inside the chroot (zookeeper's postinst asks to)
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"; chmod +x "$rootfs/usr/sbin/policy-rc.d"
echo "apt-get install in the rootfs: $packages"
chroot "$rootfs" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
  "apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*"
umount -l "$rootfs/proc"
rm -f "$rootfs/usr/sbin/policy-rc.d"
tar --one-file-system -C "$rootfs" -c . | docker import \
  -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' \
  -m "debootstrap --variant=minbase $SUITE + $packages" - "$IMAGE" >/dev/null
echo "base image $IMAGE built in $(( $(date +%s) - t0 )) s"
