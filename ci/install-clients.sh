#!/usr/bin/env bash
# Installs the official ACP clients the reference agent's client tests drive, at pinned versions,
# into reference/sandbox-agent/tests/clients (node_modules/ and .venv/, both git-ignored):
#   @agentclientprotocol/sdk 2.4.0 (npm, exact tree in package-lock.json, installed with npm ci)
#   agent-client-protocol 0.12.1 (PyPI, with its dependencies pinned in requirements.txt)
# Idempotent: a tree that already matches the pins is left alone, so a second run needs no
# network. Needs node >= 20 with npm, and python3 >= 3.10 with the venv module.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=reference/sandbox-agent/tests/clients

# The system python, when there is one: a venv keeps a link to the interpreter that made it, and
# an unprivileged user (CI's second leg) cannot reach a pyenv interpreter under /root.
python=python3
[ -x /usr/bin/python3 ] && python=/usr/bin/python3
for tool in node npm "$python"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "install-clients: $tool is required" >&2; exit 1; }
done

if npm ls --prefix "$dir" --all >/dev/null 2>&1 \
    && [ "$(node -p "require('./$dir/node_modules/@agentclientprotocol/sdk/package.json').version" 2>/dev/null)" = "2.4.0" ]; then
    echo "install-clients: @agentclientprotocol/sdk 2.4.0 already installed"
else
    echo "install-clients: npm ci (@agentclientprotocol/sdk 2.4.0)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

if [ -x "$dir/.venv/bin/python" ] \
    && diff -q <("$dir/.venv/bin/python" -m pip freeze --disable-pip-version-check | sort) \
               <(sort "$dir/requirements.txt") >/dev/null 2>&1; then
    echo "install-clients: agent-client-protocol 0.12.1 already installed"
else
    echo "install-clients: python venv + pip install -r requirements.txt (agent-client-protocol 0.12.1)"
    rm -rf "$dir/.venv"
    "$python" -m venv "$dir/.venv"
    "$dir/.venv/bin/python" -m pip install --disable-pip-version-check -q -r "$dir/requirements.txt"
fi
