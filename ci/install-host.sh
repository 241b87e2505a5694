#!/usr/bin/env bash
# Installs what `certify` uses on this host, when it is missing: bubblewrap (the bwrap backend and
# the chain's first choice), util-linux (setpriv: the capability-dropped host of the selection
# scenarios) and perl (the truncate effect). Idempotent: with everything present it installs
# nothing and needs no network. On a host without apt-get it says what is missing and goes on:
# certify plans its host-dependent cases by what the host has and names what it left out.
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v perl >/dev/null 2>&1 || missing+=(perl)
[ ${#missing[@]} -gt 0 ] || exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-host: no apt-get here; install ${missing[*]} yourself for the full matrix" >&2
    exit 0
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "install-host: ${missing[*]} missing, and neither root nor sudo to install them" >&2
        exit 1
    }
    as_root=(sudo)
fi
echo "install-host: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
