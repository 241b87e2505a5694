#!/bin/bash
# The first real run of the Seatbelt backend (issue 33): on macOS, compile every shape of the
# generated profile with sandbox-exec (through `sandboxctl run`, the provider's own path), then
# run the checks a person would run first and check the host after each. Until this has run, the
# profile is judged only by the SBPL model on Linux (docs/macos.md).
#
#   ci/macos-smoke.sh [TARGET_DIR]     (default target/debug; needs `cargo build --workspace --bins`)
#
# Prints one line per check: PASS, FAIL (a promise broken: the script exits 1) or NOTE (a gap
# docs/macos.md names, measured and reported, never claimed). Bash 3.2 (macOS's /bin/bash).
set -u

if [ "$(uname -s)" != Darwin ]; then
    echo "macos-smoke: Seatbelt runs on macOS only (this host: $(uname -s))" >&2
    exit 2
fi

target=${1:-target/debug}
ctl="$target/sandboxctl"
[ -x "$ctl" ] || { echo "macos-smoke: $ctl not built (cargo build --workspace --bins)" >&2; exit 2; }

base=$(mktemp -d "${TMPDIR:-/tmp}/macos-smoke.XXXXXX")
base=$(cd "$base" && pwd -P)
ws="$base/ws"
out="$base/outside"
mkdir -p "$ws" "$out"
failures=0
tag="macos-smoke-$$"

pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
note() { echo "NOTE  $*"; }

cleanup() {
    launchctl remove "$tag" >/dev/null 2>&1
    defaults delete "$tag" >/dev/null 2>&1
    rm -rf "$base"
}
trap cleanup EXIT

# run MODE NETWORK [sandboxctl options...] -- COMMAND...: confined in $ws; its facts in $base/facts.json.
run() {
    local mode=$1 network=$2
    shift 2
    (cd "$ws" && "$ctl" run --mode "$mode" --network "$network" --workspace "$ws" "$@") \
        >"$base/facts.json" 2>"$base/stderr.txt"
}

# The payload's exit code in the last facts (empty when it never ran).
exit_code() { sed -n 's/.*"exit_code":\([-0-9]*\).*/\1/p' "$base/facts.json" | head -1; }

# A denial check proves nothing when the command never ran (the profile refused, the policy was
# bad): true when it ran, else a failure naming why.
ran() {
    [ -n "$(exit_code)" ] && return 0
    fail "$1: the command never ran: $(cat "$base/stderr.txt" "$base/facts.json" | head -c 400)"
    return 1
}

# --- 1. Every shape of the profile compiles and runs a command -------------------------------
(cd "$ws" && git init -q && git config user.email s@example.invalid && git config user.name smoke \
    && printf 'a\n' > a && git add a && git commit -qm init) || { echo "macos-smoke: git init failed" >&2; exit 2; }
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$out/agent.sock" 2>/dev/null
mkdir -p "$base/extra"
for shape in "read-only enabled" "read-only restricted" "workspace-write enabled" \
    "workspace-write restricted --writable-root $base/extra --allow-socket $out/agent.sock"; do
    # shellcheck disable=SC2086 # the shape's words are options
    if run $shape -- /usr/bin/true && [ "$(exit_code)" = 0 ]; then
        pass "profile compiles and runs: $shape"
    else
        fail "profile did not run: $shape: $(cat "$base/stderr.txt" "$base/facts.json" | head -c 600)"
    fi
done

# --- 2. The deputies: none acts for the payload -------------------------------------------------
run workspace-write enabled -- /bin/sh -c \
    "launchctl submit -l $tag -- /bin/sh -c 'touch $out/launchd' 2>&1; exit 0"
ran "launchctl submit" && sleep 2
if [ -e "$out/launchd" ]; then fail "launchctl submit ran a job outside"; else pass "launchctl submit refused (job-creation)"; fi

run workspace-write enabled -- /usr/bin/open -g -j -a Calculator
if [ "$(exit_code)" != 0 ]; then pass "open(1) refused (lsopen)"; else fail "open(1) launched an app for the payload"; fi
osascript -e 'tell application "Calculator" to quit' >/dev/null 2>&1

run workspace-write enabled -- /usr/bin/osascript -e 'tell application "Finder" to get name of startup disk'
if [ "$(exit_code)" != 0 ]; then pass "osascript's Apple event refused (appleevent-send)"; else fail "osascript sent an Apple event"; fi

run workspace-write enabled -- /usr/bin/defaults write "$tag" key value
if defaults read "$tag" key >/dev/null 2>&1; then fail "defaults write reached ~/Library/Preferences"; else pass "defaults write refused (user-preference-write)"; fi

# --- 3. A hard link in, written through ---------------------------------------------------------
printf 'secret\n' > "$out/rc"
run workspace-write enabled -- /bin/sh -c "ln '$out/rc' z; printf 'x\n' >> z; exit 0"
ran "hard link" && if [ "$(cat "$out/rc")" = secret ]; then pass "a hard link of an outside file was not written through (file-link)"; else fail "wrote $out/rc through a hard link"; fi

# --- 4. TIOCSTI: the caller's terminal is out of reach -------------------------------------------
tiocsti="import fcntl,os,termios
try:
    fd = os.open('/dev/tty', os.O_RDWR)
    fcntl.ioctl(fd, termios.TIOCSTI, b'x')
    print('injected')
except OSError as e:
    print('refused', e.errno)"
script -q /dev/null "$ctl" run --mode workspace-write --workspace "$ws" -- python3 -c "$tiocsti" \
    >"$base/tty.txt" 2>&1 </dev/null
if grep -q '"stdout":"injected' "$base/tty.txt"; then fail "TIOCSTI reached the caller's terminal"; else pass "no controlling terminal for TIOCSTI (setsid)"; fi

# --- 5. The rename-away: .git, a case variant, the workspace itself ----------------------------
for how in "mv .git .git2" "mv .GIT .git2" "cd .. && mv ws ws2"; do
    run workspace-write enabled --writable-root "$base" -- /bin/sh -c "$how; exit 0"
    ran "rename-away ($how)" || continue
    if [ -d "$ws/.git" ] && [ ! -e "$ws/.git2" ] && [ ! -e "$base/ws2" ]; then
        pass "rename-away refused: $how"
    else
        fail "rename-away worked: $how"; mv "$base/ws2" "$ws" 2>/dev/null; mv "$ws/.git2" "$ws/.git" 2>/dev/null
    fi
done
run workspace-write enabled -- /bin/sh -c "printf '[core]\n\thooksPath = /tmp/evil\n' >> .GIT/CONFIG; exit 0"
ran "case variant" && if grep -q evil "$ws/.git/config"; then fail "wrote .git/config through .GIT/CONFIG"; else pass "protected path held in another letter case"; fi

# --- 6. Set-id bits -----------------------------------------------------------------------------
run workspace-write enabled -- /bin/sh -c "printf '#!/bin/sh\n' > tool; chmod 755 tool; chmod u+s tool; exit 0"
ran "chmod u+s"
case $(ls -l "$ws/tool" | cut -c1-10) in
    -rwxr-xr-x) pass "chmod u+s refused (file-write-setugid)" ;;
    *) fail "chmod u+s set a set-id bit: $(ls -l "$ws/tool")" ;;
esac
run workspace-write enabled -- python3 -c "import os; os.close(os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755))"
case $(ls -l "$ws/made" 2>/dev/null | cut -c1-10) in
    *s*|*S*) note "open(O_CREAT, 04755) made a set-id file (not file-write-setugid): $(ls -l "$ws/made")" ;;
    *) pass "open(O_CREAT, 04755) made no set-id file" ;;
esac

# --- 7. A setsid survivor (a known gap: reported, never claimed) --------------------------------
survivor="import os,time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open('survivor.pid', 'w').write(str(os.getpid()))
        time.sleep(5); open('survived', 'w').close()
    os._exit(0)"
run workspace-write enabled -- python3 -c "$survivor"
ran "setsid survivor"
sleep 6
if [ -e "$ws/survived" ]; then note "a setsid survivor outlived the call (docs/macos.md: reaped by group only)"; else pass "no setsid survivor"; fi
[ -s "$ws/survivor.pid" ] && kill -9 "$(cat "$ws/survivor.pid")" 2>/dev/null
if grep -q '"tree_reaped":true' "$base/facts.json"; then fail "the launch claimed its tree reaped"; fi

# --- 8. What a person runs keeps working -------------------------------------------------------
run workspace-write enabled -- script -q /dev/null /bin/sh -c 'echo pty-ok > /dev/tty'
if grep -q 'pty-ok' "$base/facts.json"; then pass "a pty and /dev/tty in it work"; else fail "pty or /dev/tty: $(head -c 400 "$base/facts.json")"; fi
run workspace-write enabled -- /bin/ps -p 1 -o pid=
if [ "$(exit_code)" != "" ]; then pass "ps runs (exit $(exit_code))"; else fail "ps did not run"; fi
printf '#include <stdio.h>\nint main(void){puts("clang-ok");return 0;}\n' > "$ws/hello.c"
run workspace-write enabled -- /bin/sh -c 'clang -o hello hello.c && ./hello'
if grep -q 'clang-ok' "$base/facts.json"; then pass "clang compiles and the program runs"; else fail "clang: $(head -c 600 "$base/facts.json")"; fi
run workspace-write enabled -- /bin/sh -c 'printf b > b && git add b && git commit -qm b && git log --format=%s | head -1'
if grep -q '"stdout":"b' "$base/facts.json"; then pass "git add and commit work"; else fail "git: $(head -c 600 "$base/facts.json")"; fi

echo "macos-smoke: $failures failure(s)"
[ "$failures" = 0 ]
