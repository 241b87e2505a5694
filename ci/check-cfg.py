#!/usr/bin/env python3
"""Every use of a Linux-only API in the workspace's Rust sources sits under a Linux cfg.

The workspace must build on macOS (the Seatbelt backend's host), where these items do not exist.
This host cannot link for macOS, so besides `cargo check --target` (when the target's std is
installed) this source check runs everywhere: each use of a known Linux-only item (the list is
LINUX_ONLY below) must be inside

- a file whose crate root or module declaration is gated: `#![cfg(target_os = "linux")]` at the
  top of the file, or `#[cfg(target_os = "linux")] mod name;` in its parent (up to the crate
  root), or
- an item (a `fn`, `impl`, `mod`, block or statement) carrying `#[cfg(...)]` whose predicate
  requires `target_os = "linux"` (outside any `not(...)`).

A runtime `cfg!(...)` branch does not count: both branches are compiled on every target.
Comments and string literals are ignored. Prints every offending use (file:line: text) and exits
1 when there is one; `--list` prints the patterns.

Usage: ci/check-cfg.py [ROOT...]   (default: reference conformance)
"""

import pathlib
import re
import sys

# The Linux-only items whose use must be gated: syscalls and constants libc defines only for
# Linux, nix's openat2 wrapper, and the two Linux-only crates. (`pidfd` is matched as libc's
# items, not as a word: a portable wrapper named `pidfd_open` with a non-Linux body is fine.)
LINUX_ONLY = [
    r"SYS_openat2",
    r"\bumount2\b",
    r"\bOpenHow\b",
    r"\bResolveFlag\b",
    r"\bopenat2\s*\(",
    r"\bSECCOMP_\w+",
    r"\bPR_CAP_AMBIENT\w*",
    r"\bSYS_capget\b",
    r"\bSYS_capset\b",
    r"\bSYS_pidfd_\w+",
    r"\bPIDFD_\w+",
    r"\bSYS_close_range\b",
    r"\bCLOSE_RANGE_\w+",
    r"\bSYS_landlock_\w+",
    r"(?<![\w:])landlock::",
    r"(?<![\w:])seccompiler::",
    # What the conformance suite's Linux-only steps and supervisor use: std's Linux extensions
    # (abstract unix sockets), the atomic exchange, POSIX message queues, keyrings, prctl's
    # child subreaper and parent-death signal, sigwaitinfo, namespaces.
    r"\bos::linux::",
    r"\bSocketAddrExt\b",
    r"\b(?:from|as)_abstract_name\b",
    r"\brenameat2\b",
    r"\bRENAME_EXCHANGE\b",
    r"\bmq_(?:open|unlink|getattr|setattr|send|receive|attr)\b",
    r"\bSYS_(?:keyctl|add_key|request_key)\b",
    r"\bprctl::",
    r"\bsigwaitinfo\b",
    r"\bCLONE_NEW\w+",
    r"\bunshare\s*\(",
]
PATTERN = re.compile("|".join(f"(?:{p})" for p in LINUX_ONLY))
LINUX = re.compile(r'target_os\s*=\s*"linux"')


def blank(src: str) -> str:
    """`src` with comments and the contents of string and char literals replaced by spaces
    (newlines kept), so offsets and line numbers still match the original."""
    out = list(src)
    i, n = 0, len(src)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j + len(end)
            wipe(m.end(), j - len(end))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            wipe(i + 1, j)
            i = j + 1
        elif c == "'" and (m := re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'").match(src, i)):
            wipe(i + 1, m.end() - 1)
            i = m.end()
        else:
            i += 1
    return "".join(out)


def cfg_predicates(text: str):
    """The predicates of every `#[cfg(...)]` / `#![cfg(...)]` attribute in `text`."""
    for m in re.finditer(r"#\s*!?\s*\[\s*cfg\s*\(", text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        yield text[m.end() : j - 1]


def requires_linux(pred: str) -> bool:
    """Whether a cfg predicate requires Linux: `target_os = "linux"` outside any `not(...)`."""
    while (m := re.search(r"\bnot\s*\(", pred)) :
        depth, j = 1, m.end()
        while j < len(pred) and depth:
            depth += {"(": 1, ")": -1}.get(pred[j], 0)
            j += 1
        pred = pred[: m.start()] + pred[j:]
    if re.search(r"\bany\s*\(", pred) and re.search(r'target_os\s*=\s*"(?!linux|android)', pred):
        return False
    return bool(LINUX.search(pred))


def header_before(code: str, src: str, pos: int) -> str:
    """The original text of the item or statement that starts before `pos`: back to the previous
    `;`, `{` or `}` of the code (attributes included)."""
    k = pos - 1
    while k >= 0 and code[k] not in ";{}":
        k -= 1
    return src[k + 1 : pos]


def gated_item(code: str, src: str, pos: int) -> bool:
    """Whether the use at `pos` is inside (or is) an item carrying a Linux cfg."""
    if any(requires_linux(p) for p in cfg_predicates(header_before(code, src, pos))):
        return True
    stack = []
    for k in range(pos):
        if code[k] == "{":
            stack.append(k)
        elif code[k] == "}" and stack:
            stack.pop()
    return any(
        requires_linux(p) for b in stack for p in cfg_predicates(header_before(code, src, b))
    )


def file_gated(path: pathlib.Path, seen=None) -> bool:
    """Whether the whole file is gated: an inner `#![cfg]` at its top, or its `mod` declaration
    in the parent module under a Linux cfg (recursively)."""
    seen = seen or set()
    if path in seen or not path.exists():
        return False
    seen.add(path)
    src = path.read_text()
    code = blank(src)
    top = re.match(r"(\s*(#!\[[^\]]*\]\s*)*)", re.sub(r"(?m)^\s*//.*$", "", src))
    if top and any(requires_linux(p) for p in cfg_predicates(top.group(1))):
        return True
    if path.name in ("lib.rs", "main.rs") or path.parent.name in ("tests", "examples", "benches"):
        return False
    name = path.parent.name if path.name == "mod.rs" else path.stem
    here = path.parent.parent if path.name == "mod.rs" else path.parent
    parents = [here / "lib.rs", here / "main.rs", here / "mod.rs", here.parent / f"{here.name}.rs"]
    for parent in parents:
        if not parent.exists():
            continue
        psrc = parent.read_text()
        pcode = blank(psrc)
        for m in re.finditer(rf"\bmod\s+{re.escape(name)}\s*;", pcode):
            if gated_item(pcode, psrc, m.start()) or file_gated(parent, seen):
                return True
    return False


def main(argv):
    if "--list" in argv:
        print("\n".join(LINUX_ONLY))
        return 0
    roots = [pathlib.Path(a) for a in argv] or [pathlib.Path("reference"), pathlib.Path("conformance")]
    bad, checked = [], 0
    for root in roots:
        for path in sorted(root.rglob("*.rs")):
            if "target" in path.parts:
                continue
            src = path.read_text()
            code = blank(src)
            hits = list(PATTERN.finditer(code))
            if not hits:
                continue
            whole = file_gated(path)
            for m in hits:
                checked += 1
                if whole or gated_item(code, src, m.start()):
                    continue
                line = code.count("\n", 0, m.start()) + 1
                bad.append(f"{path}:{line}: {src.splitlines()[line - 1].strip()}")
    if bad:
        print("Linux-only API used outside a cfg(target_os = \"linux\") file or item:")
        print("\n".join(f"  {b}" for b in bad))
        return 1
    print(f"{checked} uses of Linux-only APIs, each under a Linux cfg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
