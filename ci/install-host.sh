#!/usr/bin/env bash
# Installs what the main job (`cargo build --workspace --locked && target/debug/certify`) needs
# on a bare Debian or Ubuntu machine, when it is missing:
#   - bubblewrap (the bwrap backend, the chain's first choice), util-linux (setpriv: the
#     capability-dropped host of the selection scenarios; unshare), perl (the truncate effect),
#     python3 (the network family's unix-socket probes), tmux (the host-ipc family starts a real
#     server) and git (the cases about git's code surface): what certify's cases run;
#   - a C compiler and linker (gcc, libc6-dev), ca-certificates (cargo fetches crates over
#     HTTPS) and, when no `cargo` is found, Rust itself through rustup (the pinned toolchain
#     below, with clippy and rustfmt), installed for every user under /usr/local with a `cargo`
#     on PATH, so the README's command that follows this script finds it.
# Idempotent: with everything present it installs nothing and needs no network. Root or sudo for
# the packages; on a host without apt-get it says what is missing and fails.
# `ci/install-tests.sh` runs this first, and `.ci/run` runs that: one list of packages.
set -euo pipefail

# The toolchain CI pins (the workflow's RUST_TOOLCHAIN names the same version; a test checks).
rust_toolchain=1.95.0

as_root=()
if [ "$(id -u)" != 0 ]; then
    as_root=(sudo)
fi
have_cmd() { command -v "$1" >/dev/null 2>&1; }

missing=()
have_cmd bwrap || missing+=(bubblewrap)
{ have_cmd setpriv && have_cmd unshare; } || missing+=(util-linux)
have_cmd perl || missing+=(perl)
# The system python (an unprivileged user cannot reach a pyenv interpreter under /root).
[ -x /usr/bin/python3 ] || missing+=(python3)
have_cmd tmux || missing+=(tmux)
have_cmd git || missing+=(git)
have_cmd cc || missing+=(gcc libc6-dev)
[ -e /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
need_rust=0
if ! have_cmd cargo; then
    need_rust=1
    have_cmd curl || missing+=(curl)
fi

apt_install() { # PACKAGE...
    if ! have_cmd apt-get; then
        echo "install-host: no apt-get here; install $* yourself" >&2
        return 1
    fi
    if [ ${#as_root[@]} -gt 0 ] && ! have_cmd sudo; then
        echo "install-host: $* missing, and neither root nor sudo to install them" >&2
        return 1
    fi
    echo "install-host: installing $*"
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Rust under /usr/local (RUSTUP_HOME /usr/local/rustup, CARGO_HOME /usr/local/cargo), with a
# small wrapper per tool in /usr/local/bin that names both homes: every user finds `cargo`, and
# `cargo install` puts what it installs where `cargo` looks for its subcommands.
install_rust() {
    echo "install-host: no cargo on PATH; installing Rust $rust_toolchain with rustup under /usr/local"
    local init
    init=$(mktemp)
    # rustup's own installer binary, from the Rust project's distribution server.
    curl --proto '=https' --tlsv1.2 -sSf -o "$init" \
        "https://static.rust-lang.org/rustup/dist/$(uname -m)-unknown-linux-gnu/rustup-init"
    chmod 0755 "$init"
    "${as_root[@]}" env RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo \
        "$init" -y --no-modify-path --profile minimal \
        --default-toolchain "$rust_toolchain" --component clippy,rustfmt
    rm -f "$init"
    local tool
    for tool in cargo rustc rustup rustdoc cargo-clippy clippy-driver rustfmt cargo-fmt; do
        [ -x "/usr/local/cargo/bin/$tool" ] || continue
        printf '#!/bin/sh\nexport RUSTUP_HOME="${RUSTUP_HOME:-/usr/local/rustup}" CARGO_HOME="${CARGO_HOME:-/usr/local/cargo}"\nexec /usr/local/cargo/bin/%s "$@"\n' \
            "$tool" | "${as_root[@]}" tee "/usr/local/bin/$tool" >/dev/null
        "${as_root[@]}" chmod 0755 "/usr/local/bin/$tool"
    done
    # Installed tools (cargo-nextest) land in CARGO_HOME/bin, which cargo searches for subcommands.
    "${as_root[@]}" chmod -R a+rX /usr/local/rustup /usr/local/cargo
}

[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
[ "$need_rust" -eq 0 ] || install_rust
have_cmd cargo || { echo "install-host: still no cargo on PATH" >&2; exit 1; }
