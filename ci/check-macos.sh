#!/usr/bin/env bash
# The workspace builds on macOS (the Seatbelt backend's host), checked from Linux:
# 1. `cargo tree --target <mac>` resolves no Linux-only crate (each offender printed with the
#    path that pulls it in: `cargo tree -i`);
# 2. every use of a Linux-only API sits under a Linux cfg (ci/check-cfg.py);
# 3. `cargo check --lib --bins` of the crates for both Apple targets, which needs their std
#    (`rustup target add aarch64-apple-darwin x86_64-apple-darwin`; the workflow installs both).
#    Test targets are left out: a dev-dependency's C build script (criterion's alloca) needs a
#    macOS C compiler, which Linux does not have.
# Exit 0: all three checked and passed. Exit 1: one failed. Exit 3: 1 and 2 passed but step 3
# could not run (an Apple std is missing): the last line says NOT CHECKED, and .ci/run's phase
# table shows "not checked", never "ok". CI_MACOS_CHECK_CRATES overrides the crates of step 3
# (default: every crate of the workspace).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(aarch64-apple-darwin x86_64-apple-darwin)
# Crates that exist only for Linux (or only build there): none may reach a macOS build.
linux_only=(landlock seccompiler linux-raw-sys procfs caps libseccomp libseccomp-sys)
rc=0
for t in "${targets[@]}"; do
    found=0
    for c in "${linux_only[@]}"; do
        # -i on a crate absent from the target's graph prints nothing on stdout.
        path=$(cargo tree --workspace --target "$t" -e normal -i "$c" 2>/dev/null || true)
        if [ -n "$path" ]; then
            echo "$t: the Linux-only crate $c is in the build:" >&2
            printf '%s\n' "$path" >&2
            found=1
        fi
    done
    [ "$found" -eq 0 ] || { rc=1; continue; }
    echo "$t: no Linux-only crate (${linux_only[*]}) in cargo tree -e normal"
done

ci/check-cfg.py || rc=1

read -r -a crates <<<"${CI_MACOS_CHECK_CRATES:-sandbox sandbox-policy landlock-run sandbox-local sandbox-cli sandbox-bench sandbox-tools sandbox-agent conformance}"
installed=$(rustup target list --installed 2>/dev/null || true)
unchecked=()
for t in "${targets[@]}"; do
    if ! grep -qx "$t" <<<"$installed"; then
        echo "$t: std not installed (rustup target add $t): cargo check for it not run" >&2
        unchecked+=("$t")
        continue
    fi
    args=()
    for c in "${crates[@]}"; do args+=(-p "$c"); done
    echo "$t: cargo check --lib --bins ${crates[*]}"
    cargo check --quiet --target "$t" --lib --bins "${args[@]}" || rc=1
done
if [ "$rc" -eq 0 ] && [ ${#unchecked[@]} -gt 0 ]; then
    echo "NOT CHECKED: cargo check for ${unchecked[*]} (no std installed); steps 1 and 2 passed"
    exit 3
fi
exit "$rc"
