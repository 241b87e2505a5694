#!/usr/bin/env bash
# The workspace's `rust-version` must be the real minimum: no lower than the highest
# `rust-version` any dependency declares (cargo metadata), nor than what the language features
# used need (let chains in edition 2024: 1.88). Fails naming the dependency that needs more.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --locked | python3 -c '
import json, re, sys
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
def parse(v):
    return tuple(int(x) for x in v.split("."))[:3] + (0,) * (3 - len(v.split(".")))
declared = {p["rust_version"] for p in meta["packages"] if p["id"] in members}
if len(declared) != 1 or None in declared:
    sys.exit(f"every workspace crate must inherit one rust-version, found {sorted(map(str, declared))}")
ours = declared.pop()
need, who = parse("1.88"), "let chains (edition 2024)"
for p in meta["packages"]:
    if p["id"] not in members and p.get("rust_version") and parse(p["rust_version"]) > need:
        need, who = parse(p["rust_version"]), p["name"] + " " + p["version"]
shown = ".".join(map(str, need))
if parse(ours) < need:
    sys.exit(f"rust-version = {ours} is too low: {who} needs {shown}")
print(f"rust-version = {ours}: the highest need is {who} ({shown})")
'
