#!/usr/bin/env bash
# Builds relayd's OCI image from the Debian package (docs/operations.md, "Container image"),
# with Debian's buildah, FROM scratch: the package's files, the shared libraries relayd links
# (read with ldd on this Debian 12 system), the dynamic loader, and an /etc/passwd naming the
# image's user (65532, "relayd"). No registry is needed.
#
#   scripts/build-image.sh [--deb PATH] [--tag NAME] [--archive PATH]
#
#   --deb PATH      the package to build from (default: build it with scripts/package-deb.sh)
#   --tag NAME      the image's name (default: relayd:<version>)
#   --archive PATH  also write the image as an OCI archive (for `podman load`, a registry push)
#
# Runs as root (buildah's storage). The image lands in the local containers storage.
set -euo pipefail
log() { printf 'build-image: %s\n' "$*" >&2; }

DEB="" TAG="" ARCHIVE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) DEB=$(realpath -m "$2"); shift 2 ;;
        --tag) TAG=$2; shift 2 ;;
        --archive) ARCHIVE=$(realpath -m "$2"); shift 2 ;;
        -h|--help) sed -n '2,/^set -e/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) log "unknown argument: $1"; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
command -v buildah >/dev/null || { log "buildah not found (Debian package buildah)"; exit 1; }
if [ -z "$DEB" ]; then
    ./scripts/package-deb.sh
    DEB=$(ls -t .build/deb/relayd_*_"$(dpkg --print-architecture)".deb | head -1)
fi
[ -f "$DEB" ] || { log "no package at $DEB"; exit 1; }
version=$(dpkg-deb -f "$DEB" Version)
TAG=${TAG:-relayd:$version}

CONTEXT=$(mktemp -d /tmp/relayd-image.XXXXXX)
trap 'rm -rf "$CONTEXT"' EXIT
ROOTFS="$CONTEXT/rootfs"
dpkg-deb -x "$DEB" "$ROOTFS"
# What a container does not use: the systemd unit and drop-ins, the man pages and docs.
rm -rf "$ROOTFS/lib/systemd" "$ROOTFS/usr/share/man" "$ROOTFS/usr/share/doc"

# Every shared library relayd needs, at the path the loader looks for it, and the loader.
libraries=$(ldd "$ROOTFS/usr/bin/relayd" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }')
if ldd "$ROOTFS/usr/bin/relayd" | grep -q "not found"; then
    log "unresolved libraries: $(ldd "$ROOTFS/usr/bin/relayd" | grep 'not found')"
    exit 1
fi
# 0755: the dynamic loader among them must be executable, whatever the architecture names it.
for library in $libraries; do
    [ -e "$library" ] || { log "missing library $library"; exit 1; }
    install -D -m 0755 "$(readlink -f "$library")" "$ROOTFS$library"
done

# The image's user, and what name lookups read; the packaged configuration's state-dir.
install -d -m 0755 "$ROOTFS/etc" "$ROOTFS/tmp"
chmod 1777 "$ROOTFS/tmp"
install -d -m 0700 "$CONTEXT/state"
printf 'root:x:0:0:root:/:/usr/sbin/nologin\nrelayd:x:65532:65532:relayd:/:/usr/sbin/nologin\n' > "$ROOTFS/etc/passwd"
printf 'root:x:0:\nrelayd:x:65532:\n' > "$ROOTFS/etc/group"
printf 'hosts: files dns\n' > "$ROOTFS/etc/nsswitch.conf"

cp packaging/image/Containerfile "$CONTEXT/Containerfile"
log "building $TAG from $(basename "$DEB") ($(du -sh "$ROOTFS" | cut -f1) of files)"
buildah build --quiet --layers=false --format oci -f "$CONTEXT/Containerfile" -t "$TAG" \
    --label "org.opencontainers.image.title=relayd" --label "org.opencontainers.image.version=$version" \
    "$CONTEXT" >/dev/null
if [ -n "$ARCHIVE" ]; then
    rm -f "$ARCHIVE"
    buildah push --quiet "$TAG" "oci-archive:$ARCHIVE:$TAG"
    log "wrote $ARCHIVE"
fi
log "built $TAG"
echo "$TAG"
