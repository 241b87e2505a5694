#!/usr/bin/env python3
"""Reproduces the raced bwrap bind by hand (issue 20 item 1), bounded.

An inner workspace `o/a/ws` lies inside an outer one `o`. While `sandboxctl run` confines calls
in the inner workspace (workspace-write, bwrap), this process plays a payload of the outer
session: it exchanges `o/a` with a relative symlink `../victim` again and again
(renameat2 RENAME_EXCHANGE, atomic), so between the provider's pin check and bwrap's bind the
path `o/a/ws` may lead to `victim/ws`. Each call writes one file into its workspace; any file that
lands in `victim/ws`, and any new entry anywhere under `victim` or next to `o`, is a write
outside. Prints the tally of outcomes and exits 1 when something landed outside.

The victim directory is the home directory of the calls ($HOME), which the policy refuses as a
workspace, so a file there never belongs to the pinned workspace.

usage: bind-race.py SANDBOXCTL [CALLS] [--agent SANDBOX_AGENT]  (as the user whose calls to test;
with --agent the calls go through the agent's bash tool in one session pinned before the race)
"""

import ctypes
import re
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

RENAME_EXCHANGE = 2
libc = ctypes.CDLL(None, use_errno=True)


def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def listing(root):
    out = set()
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.add(os.path.join(d, n))
    return out


def main():
    args = sys.argv[1:]
    agent = None
    if "--agent" in args:
        i = args.index("--agent")
        agent = os.path.abspath(args[i + 1])
        del args[i : i + 2]
    sandboxctl = os.path.abspath(args[0])
    calls = int(args[1]) if len(args) > 1 else 300
    # Outside /tmp, which workspace-write makes writable anyway (a workspace under it is not bound
    # on its own, and a file landing under it would prove nothing).
    base = os.path.realpath(tempfile.mkdtemp(prefix="bind-race-", dir="/var/tmp"))
    outer = os.path.join(base, "o")
    ws = os.path.join(outer, "a", "ws")
    victim = os.path.join(base, "victim")
    os.makedirs(ws)
    os.makedirs(os.path.join(victim, "ws"))
    # The partner the parent is exchanged with: a relative symlink from o/ to ../victim.
    partner = os.path.join(outer, "a.swap")
    os.symlink("../victim", partner)
    before = listing(victim)
    stop = threading.Event()
    swaps = [0]

    def swapper():
        started = time.monotonic()
        while not stop.is_set() and time.monotonic() - started < 120:
            exchange(os.path.join(outer, "a"), partner)
            swaps[0] += 1

    # The victim is the home directory: the policy refuses it as a workspace ("too broad"), so a
    # file there is never the pinned workspace's, whenever the pin was taken.
    # (The provider's probe cache goes elsewhere: it is the host's own write, not the payload's.)
    env = dict(os.environ, HOME=os.path.join(victim, "ws"),
               XDG_CACHE_HOME=tempfile.mkdtemp(prefix="bind-race-cache-", dir="/var/tmp"))
    t = threading.Thread(target=swapper)
    tally = {}
    t.start()
    try:
        if agent:
            tally = run_agent(agent, ws, calls, env)
        else:
            for i in range(calls):
                out = subprocess.run(
                    [sandboxctl, "run", "--mode", "workspace-write", "--backend", "bwrap",
                     "--workspace", ws, "--", "sh", "-c", f'printf x > "{ws}/f{i}"'],
                    capture_output=True, text=True, cwd="/", env=env,
                )
                try:
                    facts = json.loads(out.stdout)
                    key = facts.get("error") or facts["classification"]["class"]
                    if facts.get("runner_failed"):
                        key += " (runner failed: " + facts.get("stderr", "").strip()[:50] + ")"
                except (ValueError, KeyError):
                    key = "no-json:" + out.stderr.strip()[:60]
                tally[key] = tally.get(key, 0) + 1
    finally:
        stop.set()
        t.join()
    if os.path.islink(os.path.join(outer, "a")):
        exchange(os.path.join(outer, "a"), partner)
    after = listing(victim)
    landed = sorted(after - before)
    escaped_parent = sorted(set(os.listdir(base)) - {"o", "victim"})
    print(json.dumps({
        "calls": calls, "swaps": swaps[0], "outcomes": tally,
        "landed_outside": len(landed), "examples": landed[:5],
        "new_next_to_outer": escaped_parent, "inside": len(os.listdir(ws)),
        "base": base,
    }, indent=1))
    sys.exit(1 if landed or escaped_parent else 0)


def run_agent(agent, ws, calls, env):
    """Drives sandbox-agent over ACP (its scripted model): one bash call per prompt."""
    sessions = tempfile.mkdtemp(prefix="bind-race-sessions-", dir="/var/tmp")
    proc = subprocess.Popen([agent, "--sessions", sessions, "--mode", "workspace-write"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/",
                            env=env)
    ids = [0]

    def call(method, params):
        ids[0] += 1
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ids[0], "method": method,
                                     "params": params}) + "\n")
        proc.stdin.flush()
        texts = []
        while True:
            msg = json.loads(proc.stdout.readline())
            if msg.get("id") == ids[0]:
                return msg, texts
            texts.append(json.dumps(msg))

    call("initialize", {"protocolVersion": 1})
    new, _ = call("session/new", {"cwd": ws, "mcpServers": []})
    sid = new["result"]["sessionId"]
    tally = {}
    for i in range(calls):
        cmd = json.dumps({"command": f"printf x > f{i}"})
        _, updates = call("session/prompt", {"sessionId": sid,
                                              "prompt": [{"type": "text", "text": f"tool bash {cmd}"}]})
        blob = " ".join(updates)
        m = re.search(r"[A-Z][A-Z_]{5,}_[A-Z]+", blob)
        key = m.group(0) if m else ("completed" if '"completed"' in blob else "other")
        tally[key] = tally.get(key, 0) + 1
    proc.stdin.close()
    proc.wait()
    return tally


if __name__ == "__main__":
    main()
