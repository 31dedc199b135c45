#!/bin/sh
# Installs what the pmsim tracer (tools/tracer, `pmsim trace cc`) needs on Debian/Ubuntu:
# clang, llvm-dev (the pass plugin API), libpmem-dev / libpmem2-dev / libpmemobj-dev (PMDK programs and
# `--pm pmdk`) and make (the examples). Idempotent: installs only what is missing; says clearly when it cannot.
set -eu

missing=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in clang llvm-dev libpmem-dev libpmem2-dev libpmemobj-dev make; do
    have_pkg "$p" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "setup-tracer: clang, llvm-dev, libpmem-dev, libpmem2-dev, libpmemobj-dev, make already installed"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-tracer: error: missing packages:$missing, and apt-get is not available; install them (or their equivalents) by hand" >&2
    exit 2
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "setup-tracer: error: missing packages:$missing; run as root: apt-get install$missing" >&2
        exit 2
    fi
fi
echo "setup-tracer: installing$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
echo "setup-tracer: done"
