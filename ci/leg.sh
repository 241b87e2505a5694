#!/usr/bin/env bash
# One leg of the host matrix: what it proves, a check that its host really is that host, its tests
# and its certify run. The GitHub workflow (.github/workflows/conformance.yml) calls this script
# with the leg's name, and so does .ci/run here, so what GitHub runs is what passes here.
#
#   ci/leg.sh LEG check                  is this host the one the leg is about? (exit 1 if not)
#   ci/leg.sh LEG tests [--archive F]    the test suite (from a `cargo nextest archive` when given,
#                                        extracted into this clone, so its binaries keep their modes)
#   ci/leg.sh LEG certify [--out DIR]    certify the leg's backends (default certify-report/LEG)
#   ci/leg.sh LEG all [--archive F] [--out DIR]
#   ci/leg.sh --list                     the legs and what each proves
#   ci/leg.sh --requires LEG             the backends LEG must certify
#
# Legs:
#   root               bwrap usable as root: every Linux backend and the hostile-host simulations
#   user               an unprivileged user: bwrap through unprivileged user namespaces, as on a laptop
#   landlock-fallback  bwrap installed but unusable: the platform chain must select Landlock
#   macos              macOS: Seatbelt through /usr/bin/sandbox-exec
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

# What each leg proves, and the backends it must certify (a skip of any of them fails the leg:
# CONFORMANCE_REQUIRE). Functions, not associative arrays: macOS's /bin/bash is 3.2.
proves_of() {
    case "$1" in
    root) echo "bwrap usable as root: every Linux backend and the hostile-host simulations" ;;
    user) echo "an unprivileged user: bwrap through unprivileged user namespaces, as on a laptop" ;;
    landlock-fallback) echo "bwrap installed but unusable: the platform chain selects Landlock" ;;
    macos) echo "macOS: Seatbelt through /usr/bin/sandbox-exec" ;;
    *) return 1 ;;
    esac
}
requires_of() {
    case "$1" in
    root) echo bwrap,landlock,landlock-abi2,local,policy ;;
    user) echo bwrap,landlock,landlock-abi2,policy ;;
    landlock-fallback) echo landlock,landlock-abi2 ;;
    macos) echo seatbelt ;;
    *) return 1 ;;
    esac
}

if [ "${1:-}" = --requires ]; then
    requires_of "${2:?usage: ci/leg.sh --requires LEG}"
    exit
fi
if [ "${1:-}" = --list ]; then
    for leg in root user landlock-fallback macos; do
        printf '%-18s %s (requires %s)\n' "$leg" "$(proves_of "$leg")" "$(requires_of "$leg")"
    done
    exit 0
fi
leg=${1:?usage: ci/leg.sh LEG check|tests|certify|all [--archive FILE] [--out DIR]}
what=${2:?usage: ci/leg.sh LEG check|tests|certify|all}
shift 2
proves_of "$leg" >/dev/null || { echo "ci/leg.sh: no leg $leg (ci/leg.sh --list)" >&2; exit 2; }
archive="" out="certify-report/$leg"
while [ $# -gt 0 ]; do
    case "$1" in
    --archive) archive="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "ci/leg.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
require=$(requires_of "$leg")

fail() { echo "ci/leg.sh $leg: $*" >&2; exit 1; }

# Whether bwrap can make the namespaces our profile asks for, on this host, as this user.
bwrap_works() {
    command -v bwrap >/dev/null 2>&1 &&
        bwrap --unshare-user --unshare-pid --ro-bind / / --dev /dev --proc /proc true 2>/dev/null
}

check() {
    echo "leg $leg proves: $(proves_of "$leg") (requires $require)"
    case "$leg" in
    root)
        [ "$(id -u)" = 0 ] || fail "runs as uid $(id -u), not root"
        bwrap_works || fail "bwrap cannot make its namespaces here: $(bwrap --unshare-user true 2>&1 | head -1)"
        ;;
    user)
        [ "$(id -u)" != 0 ] || fail "runs as root; this leg is about an unprivileged user"
        bwrap_works || fail "bwrap cannot make its namespaces here: $(bwrap --unshare-user true 2>&1 | head -1)"
        ;;
    landlock-fallback)
        command -v bwrap >/dev/null 2>&1 || fail "bwrap is not installed: a fallback from it proves nothing"
        if bwrap_works; then fail "bwrap works here, so no fallback is exercised"; fi
        [ "$(uname -s)" = Linux ] || fail "not Linux"
        [ -x target/debug/sandboxctl ] ||
            fail "no target/debug/sandboxctl to ask which backend the chain selects (cargo build --workspace, or --archive)"
        local selected
        selected=$(target/debug/sandboxctl probe 2>/dev/null |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["selected"]["backend"])' ||
            echo "nothing")
        [ "$selected" = landlock ] || fail "the platform chain selected $selected, not landlock"
        echo "the platform chain selects landlock here"
        ;;
    macos)
        [ "$(uname -s)" = Darwin ] || fail "not macOS ($(uname -s))"
        [ -x /usr/bin/sandbox-exec ] || fail "no /usr/bin/sandbox-exec"
        ;;
    esac
}

# The archive's binaries, extracted into this clone (modes kept) before the host check, which
# asks the extracted sandboxctl which backend the chain selects.
extract() {
    [ -n "$archive" ] || return 0
    cargo-nextest nextest list --archive-file "$archive" --workspace-remap "$repo" \
        --extract-to "$repo" --extract-overwrite >/dev/null
}

# Tests that need a usable bwrap, beyond the conformance trials (which skip an unusable backend
# when they are listed, with the reason): a nextest filterset per line of ci/needs-bwrap, each
# group under a `## ` line giving the reason. On a host where bwrap works they all run.
bwrap_filter() {
    awk '/^[[:space:]]*(#|$)/ { next } { printf "%s(%s)", sep, $0; sep = " | " }' ci/needs-bwrap
}
# Lists each test ci/needs-bwrap leaves out, with its reason; fails when an entry names no test
# of the suite (each entry is `binary_id(BINARY) & test(=NAME)`: one test).
list_needs_bwrap() { # NEXTEST-LIST-COMMAND...
    local listed entries=0 line reason="" name
    listed=$("$@" -T oneline -E "$(bwrap_filter)")
    while IFS= read -r line; do
        case "$line" in
        "## "*) reason=${line#\#\# } ;;
        "#"* | "") ;;
        "binary_id("*") & test(="*")")
            entries=$((entries + 1))
            name=${line#binary_id(}
            name="${name%%)*} ${line##*test(=}"
            name=${name%)}
            grep -qxF "$name" <<<"$listed" || fail "ci/needs-bwrap: no test $name"
            echo "  not run (bwrap cannot make its namespaces here: $reason): $name"
            ;;
        *) fail "ci/needs-bwrap: an entry is binary_id(BINARY) & test(=NAME), not $line" ;;
        esac
    done <ci/needs-bwrap
    echo "$entries tests of ci/needs-bwrap not run on this host"
}

tests() {
    export NEXTEST_PROFILE=ci CONFORMANCE_REQUIRE=$require INSTA_UPDATE=no
    # The report.html test drives a real headless browser: ci/install-tests.sh installs one, so
    # a missing one fails the leg instead of skipping.
    export CONFORMANCE_REQUIRE_TOOLS=${CONFORMANCE_REQUIRE_TOOLS-chromium}
    local run=(cargo nextest run --workspace) list=(cargo nextest list --workspace)
    if [ -n "$archive" ]; then
        # The archive keeps every binary's mode; extracted into this clone, the compiled-in
        # paths (CARGO_MANIFEST_DIR, CARGO_BIN_EXE_*) point at real files.
        local from=(--archive-file "$archive" --workspace-remap "$repo" --extract-to "$repo"
            --extract-overwrite)
        run=(cargo-nextest nextest run "${from[@]}")
        list=(cargo-nextest nextest list "${from[@]}")
    fi
    if ! bwrap_works; then
        list_needs_bwrap "${list[@]}"
        run+=(-E "not ($(bwrap_filter))")
    fi
    "${run[@]}"
}

certify() {
    local args=() b
    for b in ${require//,/ }; do args+=(--backend "$b"); done
    local bin=target/debug/certify
    [ -x "$bin" ] || fail "no $bin: build it (cargo build --workspace) or extract the archive first"
    # The report names its leg: `certify merge` labels the host by it.
    CONFORMANCE_LEG=$leg CONFORMANCE_REQUIRE=$require "$bin" "${args[@]}" --out "$out"
}

case "$what" in
check) check ;;
tests) extract; check; tests ;;
certify) extract; check; certify ;;
all) extract; check; tests; certify ;;
*) echo "ci/leg.sh: check, tests, certify or all, not $what" >&2; exit 2 ;;
esac
