#!/usr/bin/env bash
# Builds relayd_<version>_amd64.deb (docs/operations.md, "The Debian package") into OUT_DIR
# (default .build/deb) and prints its path. The package holds:
#   /usr/bin/relayd                            release build, Swift runtime linked in statically
#   /usr/lib/relayd/relayd_fastpath.bpf.o      the kernel fast path's BPF program
#   /usr/lib/relayd/relayd_tcp_splice.bpf.o    the RFC 6062 pipes' sockmap program
#   /etc/relayd/relayd.conf                    conffile, from conf/relayd.conf
#   /etc/logrotate.d/relayd                    conffile
#   /lib/systemd/system/relayd.service         from conf/relayd.service, on /usr/bin/relayd
#   /usr/share/relayd/kernel-offload.conf      the unit's drop-in for kernel-offload's privileges
#   /usr/share/man/man8/relayd*.8.gz           generated from the argument parser (relayd(8),
#                                              relayd-serve(8), relayd-sessions(8), ...)
#   /usr/share/doc/relayd/{copyright,changelog.gz}
# and maintainer scripts that create the `relayd` system user (packaging/debian). The Depends
# line comes from dpkg-shlibdeps on the binary. Needs dpkg-dev (install-build-deps.sh).
# SCRATCH (default .build-deb) is the separate build directory of the release build.
set -euo pipefail
umask 022
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
SCRATCH=${SCRATCH:-.build-deb}
OUT_DIR=${OUT_DIR:-.build/deb}

version=$(sed -n 's/.*string = "relayd \([^"]*\)".*/\1/p' Sources/RelayCore/Core/Version.swift)
[ -n "$version" ] || { echo "package-deb: no version in Version.swift" >&2; exit 1; }
arch=$(dpkg --print-architecture)

echo "package-deb: building relayd $version (release, static Swift runtime)"
# No $ORIGIN RUNPATH: the binary finds its libraries where Debian installs them.
# Full RELRO (-z relro -z now), as Debian builds its own daemons.
# generate-manual is built with the same options: other options in the same scratch path make
# SwiftPM compile the modules both products share again (about a minute each way).
release=(-c release --static-swift-stdlib --disable-local-rpath --scratch-path "$SCRATCH"
         -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now)
swift build "${release[@]}" --product relayd
swift build "${release[@]}" --product generate-manual
OUT="$SCRATCH/bpf/relayd_fastpath.bpf.o" ./scripts/build-bpf.sh >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/relayd_${version}_${arch}"
debian=packaging/debian

install -D -m 0755 "$SCRATCH/release/relayd" "$root/usr/bin/relayd"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/relayd"
install -D -m 0644 "$SCRATCH/bpf/relayd_fastpath.bpf.o" "$root/usr/lib/relayd/relayd_fastpath.bpf.o"
install -D -m 0644 "$SCRATCH/bpf/relayd_tcp_splice.bpf.o" "$root/usr/lib/relayd/relayd_tcp_splice.bpf.o"
install -D -m 0644 conf/relayd.conf "$root/etc/relayd/relayd.conf"
# The package keeps UDP allocations across a crash: its configuration sets state-dir.
sed -i 's|^#state-dir=/var/lib/relayd$|state-dir=/var/lib/relayd|' "$root/etc/relayd/relayd.conf"
grep -q '^state-dir=/var/lib/relayd$' "$root/etc/relayd/relayd.conf"
install -D -m 0644 "$debian/logrotate" "$root/etc/logrotate.d/relayd"
# The unit as installed: the packaged binary, without the manual installation notes (the
# package does those steps); everything from [Unit] on is kept as is.
install -d "$root/lib/systemd/system"
{
    echo "# relayd — STUN/TURN relay server, as a hardened systemd service (the Debian package's unit)."
    sed -n '/^\[Unit\]/,$p' conf/relayd.service | sed 's|/usr/local/bin/relayd|/usr/bin/relayd|g'
} >"$root/lib/systemd/system/relayd.service"
chmod 0644 "$root/lib/systemd/system/relayd.service"
install -D -m 0644 conf/relayd-kernel-offload.conf "$root/usr/share/relayd/kernel-offload.conf"

# Man pages: relayd(8) and one per subcommand (relayd.serve(8), relayd.sessions(8), ...).
man="$work/man"
mkdir -p "$man"
"$SCRATCH/release/generate-manual" "$root/usr/bin/relayd" --multi-page --section 8 \
    --date "$(date -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)" +%Y-%m-%d)" \
    --authors "relayd developers<relayd@example.org>" --output-directory "$man"
# A subcommand's page is named like git's (relayd-sessions(8)): man-db's whatis parser takes one
# word as a page's name, so NAME says `relayd-sessions` while SYNOPSIS shows the command as
# typed, `relayd sessions`.
install -d "$root/usr/share/man/man8"
for page in "$man"/*.8; do
    name=$(basename "$page" .8)
    words=${name//./ }
    sed -e "s/^\.Nm \"$words\"\$/.Nm ${name//./-}/" -e "s/^\.Nm\$/.Nm $words/" \
        -e "s/^\.Dt [^ ]* 8\$/.Dt $(echo "${name//./-}" | tr '[:lower:]' '[:upper:]') 8/" \
        -e ':dots' -e 's/^\(\.Xr relayd[a-z-]*\)\./\1-/' -e 't dots' "$page" \
        | gzip -9n >"$root/usr/share/man/man8/${name//./-}.8.gz"
done
chmod 0644 "$root"/usr/share/man/man8/*

install -D -m 0644 "$debian/copyright" "$root/usr/share/doc/relayd/copyright"
{
    echo "relayd ($version) unstable; urgency=medium"
    echo
    echo "  * Release $version."
    echo
    echo " -- relayd developers <relayd@example.org>  $(date -u -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n >"$root/usr/share/doc/relayd/changelog.gz"
chmod 0644 "$root/usr/share/doc/relayd/changelog.gz"
install -D -m 0644 "$debian/lintian-overrides" "$root/usr/share/lintian/overrides/relayd"

install -d -m 0755 "$root/DEBIAN"
# Depends: the shared libraries the binary links (libevent, OpenSSL, libbpf, hiredis, glibc).
mkdir -p "$work/shlibs/debian"
printf 'Source: relayd\n\nPackage: relayd\nArchitecture: any\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$root/usr/bin/relayd" 2>"$work/shlibdeps.err" \
    | sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.err" >&2; exit 1; }
[ -n "$depends" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@INSTALLED_SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
    "$debian/control.in" >"$root/DEBIAN/control"
install -m 0644 "$debian/conffiles" "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do install -m 0755 "$debian/$script" "$root/DEBIAN/$script"; done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
    | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/md5sums"

mkdir -p "$OUT_DIR"
deb="$OUT_DIR/relayd_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
