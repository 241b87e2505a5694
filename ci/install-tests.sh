#!/usr/bin/env bash
# Installs what the tests (`cargo nextest run --workspace`) need on a bare Debian or Ubuntu
# machine (or macOS, for the Seatbelt leg), when it is missing. Everything the main job needs
# first (ci/install-host.sh), then:
#   - python3-pytest (a confined pytest run: sandbox-local's host_ipc test) and python3-venv
#     (the official Python ACP client's virtualenv);
#   - nodejs and npm (the official TypeScript ACP client);
#   - a headless Chromium (the report.html test opens the page in a real browser): Debian's
#     `chromium`; a Chrome or Chromium already on PATH is used as it is (GitHub's images);
#   - cargo-nextest (pinned, --locked);
#   - the official ACP clients at their pinned versions (ci/install-clients.sh).
# Idempotent: with everything present it installs nothing and needs no network. `.ci/run`
# installs through this script alone, so a package the tests need that it misses fails CI
# instead of a newcomer.
set -euo pipefail
cd "$(dirname "$0")/.."

nextest_version=0.9.143

have_cmd() { command -v "$1" >/dev/null 2>&1; }
as_root=()
[ "$(id -u)" = 0 ] || as_root=(sudo)

# The browser the report.html test drives (its lookup: conformance/tests/report_html.rs).
have_browser() {
    local b
    for b in chromium chromium-browser google-chrome google-chrome-stable; do
        have_cmd "$b" && return 0
    done
    [ -x "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" ]
}

linux() {
    ci/install-host.sh
    local missing=()
    /usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || missing+=(python3-pytest)
    /usr/bin/python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
    { have_cmd node && have_cmd npm; } || missing+=(nodejs npm)
    if ! have_browser; then
        . /etc/os-release
        if [ "${ID:-}" = ubuntu ]; then
            # Ubuntu's chromium package only installs the snap; with snapd running it works.
            have_cmd snap || {
                echo "install-tests: no Chromium or Chrome, and Ubuntu ships Chromium only as a snap (no snapd here): install google-chrome" >&2
                exit 1
            }
            "${as_root[@]}" snap install chromium
        else
            missing+=(chromium)
        fi
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        echo "install-tests: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        "${as_root[@]}" apt-get update -qq
        "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# The macOS leg: Homebrew for what the image lacks (GitHub's macOS images have node, python3,
# Chrome and brew).
macos() {
    have_cmd cargo || { echo "install-tests: install Rust first (https://rustup.rs)" >&2; exit 1; }
    have_cmd tmux || brew install tmux
    python3 -c 'import pytest' >/dev/null 2>&1 || brew install pytest
    { have_cmd node && have_cmd npm; } || brew install node
    have_browser || brew install --cask chromium
}

case "$(uname -s)" in
Linux) linux ;;
Darwin) macos ;;
*) echo "install-tests: $(uname -s) is not supported" >&2; exit 1 ;;
esac

if ! have_cmd cargo-nextest; then
    echo "install-tests: installing cargo-nextest $nextest_version"
    cargo install cargo-nextest --version "$nextest_version" --locked
fi
ci/install-clients.sh
