#!/usr/bin/env bash
# Build a CPython that Debian ships in a newer release than this machine's, from Debian's own
# source archive, into PREFIX; print the interpreter's path.
#
#   scripts/debian_cpython.sh 3.13 "$HOME/.cache/wheel-engine/python3.13"
#
# Why: CI must run the pure build on every Python the classifiers list, and this machine
# (Debian bookworm) ships 3.11 only; python.org, uv's and portable-python's builds are not
# reachable here, Debian's archive is. The source tarball is trusted through the archive's
# signature chain, as apt trusts packages: trixie's InRelease is checked by gpgv against the
# installed Debian keyring, it names the SHA-256 of Sources.xz, and Sources names the SHA-256
# of the tarball. Debian's patches are not applied: this is upstream CPython, as released.
# A PREFIX that already holds the interpreter is reused (a few minutes of build saved).
set -euo pipefail
version=${1:?usage: debian_cpython.sh VERSION PREFIX}
prefix=${2:?usage: debian_cpython.sh VERSION PREFIX}
python="$prefix/bin/python$version"
if [ -x "$python" ] && "$python" -c 'import sqlite3, ssl, zlib, lzma, bz2, ctypes' 2>/dev/null; then
    echo "$python"
    exit 0
fi
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-trixie}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

say() { echo "debian_cpython: $*" >&2; }
fetch() { curl -fsS --retry 3 --max-time 300 -o "$2" "$1"; }
check_sha256() {  # FILE SHA256
    echo "$2  $1" | sha256sum -c --quiet - || { say "checksum mismatch: $1"; exit 1; }
}

say "fetching $suite's signed index from $mirror"
fetch "$mirror/dists/$suite/InRelease" InRelease
gpgv --keyring "$keyring" --output Release InRelease 2>/dev/null \
    || { say "InRelease of $suite is not signed by a key in $keyring"; exit 1; }
sources_sha=$(awk '/^SHA256:/{s=1; next} /^[^ ]/{s=0} s && $3 == "main/source/Sources.xz" {print $1}' Release)
[ -n "$sources_sha" ] || { say "Release names no main/source/Sources.xz"; exit 1; }
fetch "$mirror/dists/$suite/main/source/Sources.xz" Sources.xz
check_sha256 Sources.xz "$sources_sha"

xz -dc Sources.xz >Sources  # whole, not piped: awk stops early and pipefail would see SIGPIPE
stanza=$(awk -v p="python$version" '$0 == "Package: " p {s=1} s && /^$/ {exit} s' Sources)
[ -n "$stanza" ] || { say "$suite has no source package python$version"; exit 1; }
directory=$(printf '%s\n' "$stanza" | awk '/^Directory:/ {print $2}')
read -r tar_sha tar_name < <(printf '%s\n' "$stanza" \
    | awk '/^Checksums-Sha256:/{s=1; next} /^[^ ]/{s=0} s && $3 ~ /orig\.tar\.(xz|gz)$/ {print $1, $3; exit}')
[ -n "${tar_name:-}" ] || { say "python$version lists no orig tarball"; exit 1; }
say "fetching $tar_name"
fetch "$mirror/$directory/$tar_name" "$tar_name"
check_sha256 "$tar_name" "$tar_sha"

tar xf "$tar_name"
cd "$(find . -maxdepth 1 -type d -name 'Python-*' -o -maxdepth 1 -type d -name "python$version*" | head -1)"
say "building CPython $version into $prefix (a few minutes)"
./configure --prefix="$prefix" >"$work/configure.log" 2>&1 || { tail -20 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
make altinstall >"$work/install.log" 2>&1 || { tail -20 "$work/install.log" >&2; exit 1; }
"$python" -c 'import sqlite3, ssl, zlib, lzma, bz2, ctypes' \
    || { say "the build lacks a module the suite needs (sqlite3, ssl, zlib, lzma, bz2, ctypes)"; exit 1; }
echo "$python"
