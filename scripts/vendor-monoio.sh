#!/usr/bin/env bash
# vendor/monoio is monoio 0.2.4 exactly as published on crates.io plus the numbered patches
# in vendor/patches/monoio/, applied in order, and nothing else (vendor/README.md lists them).
#
#   scripts/vendor-monoio.sh check     the committed vendor/monoio equals pristine + patches
#                                      (exit 1 and the difference, as a patch, if not)
#   scripts/vendor-monoio.sh rebuild   replace vendor/monoio with pristine + patches
#
# To change the vendored runtime: edit vendor/monoio, run `check` (it prints the edit as a
# patch against pristine + patches), save that as the next numbered patch with a header that
# says its purpose, list it in vendor/README.md, and `check` again.
#
# No network: the published crate is kept in vendor/pristine/ and its checksum (crates.io's)
# is checked here. Needs bash, tar, gzip, sha256sum, git and diff.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CRATE="$ROOT/vendor/pristine/monoio-0.2.4.crate"
# The checksum crates.io publishes for monoio 0.2.4 (the `cksum` of its index entry).
CRATE_SHA256=3bd0f8bcde87b1949f95338b547543fcab187bc7e7a5024247e359a5e828ba6a
PATCHES="$ROOT/vendor/patches/monoio"
TREE="$ROOT/vendor/monoio"

die() {
    echo "vendor-monoio: $*" >&2
    exit 1
}

# Unpack the pristine crate into "$1/monoio" and apply the patches in order.
build_into() {
    local dir=$1 sum p
    sum=$(sha256sum "$CRATE" | cut -d' ' -f1)
    [ "$sum" = "$CRATE_SHA256" ] || die "$CRATE: sha256 $sum, crates.io publishes $CRATE_SHA256"
    tar -xzf "$CRATE" -C "$dir"
    mv "$dir/monoio-0.2.4" "$dir/monoio"
    # Not vendored: the crate's tests (patch 0001 drops their Cargo.toml sections) and the
    # packaging leftovers.
    rm -rf "$dir/monoio/tests" "$dir/monoio/Cargo.toml.orig" "$dir/monoio/.cargo_vcs_info.json"
    shopt -s nullglob
    local patches=("$PATCHES"/[0-9][0-9][0-9][0-9]-*.patch)
    shopt -u nullglob
    [ ${#patches[@]} -gt 0 ] || die "no patches in $PATCHES"
    for p in "${patches[@]}"; do
        # GIT_CEILING_DIRECTORIES: git apply must not find an enclosing repository (it would
        # then take paths from that repository's top and skip the rest without a word).
        (cd "$dir/monoio" && GIT_CEILING_DIRECTORIES="$dir" git apply -p1 "$p") ||
            die "$(basename "$p") does not apply to pristine + the patches before it"
    done
}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/vendor-monoio.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

case "${1:-}" in
check)
    build_into "$scratch"
    # As a patch (a/ rebuilt, b/ committed), so a deliberate edit can be saved as one.
    ln -s "$TREE" "$scratch/b"
    mv "$scratch/monoio" "$scratch/a"
    if ! (cd "$scratch" && diff -ruN a/ b/ >"$scratch/drift.patch"); then
        cat "$scratch/drift.patch"
        die "vendor/monoio differs from monoio 0.2.4 + vendor/patches/monoio (diff above):" \
            "make the edit a numbered patch, or run scripts/vendor-monoio.sh rebuild"
    fi
    applied=("$PATCHES"/[0-9][0-9][0-9][0-9]-*.patch)
    echo "vendor/monoio = monoio 0.2.4 + ${#applied[@]} patches"
    ;;
rebuild)
    build_into "$scratch"
    rm -rf "$TREE"
    mv "$scratch/monoio" "$TREE"
    echo "vendor/monoio rebuilt from monoio 0.2.4 + vendor/patches/monoio"
    ;;
*)
    echo "usage: $0 check|rebuild" >&2
    exit 2
    ;;
esac
