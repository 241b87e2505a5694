//! `--prevent` and `--pid-namespace` on the real kernel: what a payload plants of git's code
//! surface fails while the call runs, so the person's own `git status` and `git commit` run
//! beside it (as an editor and a shell prompt do) run nothing of it; git's own work still passes
//! confined, new git directories staying private to the sandbox until the caller merges them;
//! and a payload in its own PID namespace reaches no process outside it. Root and unprivileged.
#![cfg(target_os = "linux")]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use landlock_run::staged::{RECORD_SUFFIX, StagedTarget};

/// Makes `dir` and everything below it writable by anyone (the unprivileged payload works in a
/// repository the test made as root).
fn open_up(dir: &Path) {
    let status = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir)
        .status()
        .expect("chmod");
    assert!(status.success());
}

/// Runs git as the person would, outside the sandbox, in `dir`; `Ok` when it succeeded.
fn host_git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*", "-c", "user.email=p@example.com"])
        .args(["-c", "user.name=person", "-c", "protocol.file.allow=always"])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A repository with a commit, a linked worktree `wt`, a nested repository `nested` and a
/// submodule `sub` whose git directory is gone (so `git submodule update` must clone it again).
fn repo(w: &World) {
    let ws = &w.ws;
    for args in [
        &["init", "-q", "-b", "main", "."][..],
        &["commit", "-q", "--allow-empty", "-m", "one"],
    ] {
        host_git(ws, args).expect("repo");
    }
    let upstream = w.outside.join("upstream");
    fs::create_dir(&upstream).expect("upstream");
    host_git(&upstream, &["init", "-q", "-b", "main", "."]).expect("upstream");
    host_git(&upstream, &["commit", "-q", "--allow-empty", "-m", "up"]).expect("upstream");
    let upstream_s = upstream.to_str().expect("utf8");
    for args in [
        &["worktree", "add", "-q", "wt"][..],
        &["submodule", "add", "-q", upstream_s, "sub"],
        &["commit", "-q", "-m", "sub"],
    ] {
        host_git(ws, args).expect("repo set-up");
    }
    fs::remove_dir_all(ws.join(".git/modules/sub")).expect("drop the submodule's git dir");
    fs::remove_dir_all(ws.join("sub")).expect("drop the submodule's worktree");
    fs::create_dir(ws.join("sub")).expect("sub");
    fs::create_dir(ws.join("nested")).expect("nested");
    host_git(&ws.join("nested"), &["init", "-q", "-b", "main", "."]).expect("nested");
    host_git(
        &ws.join("nested"),
        &["commit", "-q", "--allow-empty", "-m", "n"],
    )
    .expect("nested");
    open_up(&w.ws);
    open_up(&upstream);
}

/// A staging directory the launcher's init (running as `who`) may fill, private to it.
fn stage_dir(w: &World, who: Who) -> PathBuf {
    let stage = w.outside.join("stage");
    fs::create_dir(&stage).expect("stage");
    fs::set_permissions(&stage, fs::Permissions::from_mode(0o700)).expect("chmod");
    if who == Who::Unprivileged && sandbox_test_support::is_root() {
        std::os::unix::fs::chown(&stage, Some(65534), Some(65534)).expect("chown");
    }
    stage
}

/// The launcher's flags for a prevented, PID-namespaced launch over `w`'s workspace.
fn prevent_args(w: &World, stage: &Path) -> Vec<String> {
    let ws = w.ws().to_owned();
    // The staging directory is handed over as descriptor 9 ([`spawn`] opens it).
    let _ = stage;
    let mut args: Vec<String> = ["--pid-namespace", "--prevent", "--stage-fd", "9"]
        .map(String::from)
        .to_vec();
    args.extend(["--anchor".into(), ws.clone()]);
    for rel in [
        ".git/hooks",
        ".git/config",
        ".git/commondir",
        ".husky",
        ".vscode",
    ] {
        args.extend(["--protected-rel".into(), rel.into()]);
    }
    args.extend(["--protected-name".into(), "rust-toolchain.toml".into()]);
    args.extend([
        "--ro".into(),
        "/".into(),
        "--rw".into(),
        ws,
        "--rw".into(),
        "/dev/null".into(),
    ]);
    args
}

/// Spawns the launcher as `who` with `args`, the staging directory `stage` open as descriptor 9
/// (opened by a shell as root before it drops to `who`), running `script`.
fn spawn(who: Who, stage: &Path, args: &[String], script: &str) -> Child {
    Command::new("bash")
        .args(["-c", "exec 9<\"$0\" && exec \"$@\""])
        .arg(stage)
        .args(launcher_argv(who))
        .args(args)
        .args(["--", "bash", "-c", script])
        .current_dir("/")
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .env("GIT_CONFIG_KEY_1", "protocol.file.allow")
        .env("GIT_CONFIG_VALUE_1", "always")
        .env("GIT_AUTHOR_NAME", "agent")
        .env("GIT_AUTHOR_EMAIL", "agent@example.com")
        .env("GIT_COMMITTER_NAME", "agent")
        .env("GIT_COMMITTER_EMAIL", "agent@example.com")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the launcher")
}

/// The launch's output once it ended; a launch still running after `bound` is a hang (an emulator
/// blocked on the payload's behalf), and fails the test.
fn ended_within(child: Child, bound: Duration) -> std::process::Output {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(bound)
        .expect("the launch ended: nothing held the emulator up")
        .expect("wait")
}

/// The person's `git status` and `git commit` in every folder a repository is, or was planted,
/// in: nothing of the payload's may run (it would write `marker`).
fn persons_git_runs_nothing(w: &World, marker: &Path, when: &str) {
    for dir in ["", "wt", "nested", "newrepo", "fake", "gitfiled", "sub"] {
        let at = w.ws.join(dir);
        if !at.is_dir() {
            continue;
        }
        let _ = host_git(&at, &["status", "--short"]);
        let _ = host_git(&at, &["commit", "-q", "--allow-empty", "-m", "person"]);
        assert!(
            !marker.exists(),
            "{when}: the person's git in {} ran the payload's code: {:?}",
            at.display(),
            fs::read_to_string(marker)
        );
    }
}

#[test]
fn gits_surface_planted_while_the_call_runs_fails_and_the_persons_git_runs_nothing() {
    for who in identities() {
        let w = world();
        repo(&w);
        let stage = stage_dir(&w, who);
        let marker = w.outside.join("pwned");
        let m = marker.to_str().expect("utf8");
        let ws = w.ws();
        let fsm = format!("echo fsmonitor >> {m}; false");
        let hook = format!("#!/bin/sh\necho hook >> {m}\n");
        let script = format!(
            r##"cd {ws}
r=""
try() {{ if eval "$2" >/dev/null 2>&1; then r="$r $1:landed"; else r="$r $1:refused"; fi; }}
mkdir -p .cache/g/hooks
printf '%s' {hook_q} > .cache/g/hooks/pre-commit; chmod +x .cache/g/hooks/pre-commit
printf '[core]\n\tfsmonitor = %s\n' {fsm_q} > .cache/g/config
try head_outside "cp .git/HEAD .cache/g/HEAD"
try commondir "printf '../.cache/g\n' > .git/commondir"
try nested_config "git -C nested config core.fsmonitor {fsm_q}"
try nested_config_append "printf '[core]\n\tfsmonitor = %s\n' {fsm_q} >> nested/.git/config"
try wt_commondir "printf '../../../.cache/g\n' > .git/worktrees/wt/commondir"
try hook "printf '%s' {hook_q} > .git/hooks/pre-commit"
try hook_rename "cp .cache/g/hooks/pre-commit .git/hooks/x && mv .git/hooks/x .git/hooks/pre-commit"
try hook_link "ln .cache/g/hooks/pre-commit .git/hooks/pre-push"
try hook_symlink "ln -s ../../.cache/g/hooks/pre-commit .git/hooks/pre-merge-commit"
try hook_tmpfile "python3 -c 'import os,ctypes,sys;l=ctypes.CDLL(None);fd=os.open(\".git/hooks\",os.O_TMPFILE|os.O_WRONLY,0o755);os.write(fd,b\"#!/bin/sh\\n\");sys.exit(l.linkat(-100,(\"/proc/self/fd/%d\"%fd).encode(),-100,b\".git/hooks/pre-rebase\",0x400))'"
try config_exchange "python3 -c 'import ctypes,sys;l=ctypes.CDLL(None);sys.exit(l.renameat2(-100,b\".cache/g/config\",-100,b\"nested/.git/config\",2))'"
try config_link "ln nested/.git/config linked && printf '[core]\n\tfsmonitor = x\n' >> linked"
try new_repo "git init -q newrepo && git -C newrepo config core.fsmonitor {fsm_q}"
try bare "mkdir -p fake/objects fake/refs && printf 'ref: refs/heads/main\n' > fake/HEAD"
try gitfile "mkdir -p gitfiled && printf 'gitdir: ../.cache/g\n' > gitfiled/.git"
try toolchain "printf '[toolchain]\npath = \"/x\"\n' > sub/rust-toolchain.toml"
try vscode "mkdir .vscode"
try proc_self "exec 3<nested/.git/config; printf x > /proc/self/fd/3"
try logs_head "mkdir .git/logs/logs && printf 'ref: refs/heads/main\n' > .git/logs/logs/HEAD"
try into_worktrees "mv .cache/g .git/worktrees/planted"
try into_modules "mkdir -p .git/modules && mv .cache/g .git/modules/sub"
try gitdir_moved "mv .git/worktrees/wt .cache/oldwt"
try repo_moved "mv nested nested_moved && mv nested_moved nested"
try toolchain_deleted "mkdir 'x (deleted)' && printf '[toolchain]\npath = \"/x\"\n' > 'x (deleted)/rust-toolchain.toml'"
try modules_symlink "mkdir -p .git/modules && ln -s ../../.cache/g .git/modules/linked"
try logs_config "rm -f .git/logs/HEAD; printf '[core]\n\tfsmonitor = %s\n' {fsm_q} > .git/logs/config"
try wt_into_logs "rm -rf .git/worktrees/wt; printf 'ref: refs/heads/wt\n' > .git/logs/HEAD; ln -s ../logs .git/worktrees/wt"
echo "$r" > {ws}/results.tmp && mv {ws}/results.tmp {ws}/results
while [ ! -e {ws}/go ]; do sleep 0.05; done
"##,
            hook_q = shell_quote(&hook),
            fsm_q = shell_quote(&fsm),
        );
        let child = spawn(who, &stage, &prevent_args(&w, &stage), &script);
        let results = w.ws.join("results");
        assert!(
            wait_for(&results, Duration::from_secs(120)),
            "{who:?}: the payload never got ready"
        );
        // The call is still running: the person's tools act now.
        persons_git_runs_nothing(&w, &marker, &format!("{who:?}, during the call"));
        let said = fs::read_to_string(&results).expect("results");
        for refused in [
            "head_outside",
            "commondir",
            "nested_config",
            "nested_config_append",
            "wt_commondir",
            "hook",
            "hook_rename",
            "hook_link",
            "hook_symlink",
            "hook_tmpfile",
            "config_exchange",
            "config_link",
            "bare",
            "toolchain",
            "vscode",
            "proc_self",
            "logs_head",
            "into_worktrees",
            "into_modules",
            "gitdir_moved",
            "toolchain_deleted",
            "modules_symlink",
            "logs_config",
            "wt_into_logs",
        ] {
            assert!(
                said.contains(&format!(" {refused}:refused")),
                "{who:?}: {refused} was not refused: {said}"
            );
        }
        for landed in ["new_repo", "gitfile", "repo_moved"] {
            assert!(
                said.contains(&format!(" {landed}:landed")),
                "{who:?}: {landed} did not work inside: {said}"
            );
        }
        // What the host sees of the new repository and gitfile: empty, until the caller merges.
        assert_eq!(
            fs::read_dir(w.ws.join("newrepo/.git"))
                .expect("newrepo/.git")
                .count(),
            0,
            "{who:?}"
        );
        assert_eq!(
            fs::read(w.ws.join("gitfiled/.git")).expect("gitfile"),
            b"",
            "{who:?}"
        );
        fs::write(w.ws.join("go"), "").expect("gate");
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        persons_git_runs_nothing(&w, &marker, &format!("{who:?}, after the call"));
        // The staged git directory holds what the payload made, and says where it belongs.
        let targets: Vec<PathBuf> = fs::read_dir(&stage)
            .expect("stage")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(RECORD_SUFFIX))
            .map(|e| {
                StagedTarget::decode(&fs::read(e.path()).expect("target"))
                    .expect("a staged target record")
                    .path
            })
            .collect();
        assert!(
            targets.contains(&PathBuf::from(format!("{ws}/newrepo/.git"))),
            "{who:?}: {targets:?}"
        );
    }
}

/// A FIFO reopened for writing through its procfs magic link waits for a reader, as by name:
/// the emulator answers it from a thread, so the payload's other creates go on and the launch
/// ends when the payload does (it hung the emulator, and with it the launcher, before).
#[test]
fn a_fifo_reopened_through_its_magic_link_holds_up_nothing_else() {
    for who in identities() {
        let w = world();
        let stage = stage_dir(&w, who);
        let ws = w.ws();
        let script = format!(
            r#"cd {ws} && mkfifo fifo && python3 -c '
import os
p = os.open("fifo", os.O_PATH)
if os.fork() == 0:
    os.open("/proc/self/fd/%d" % p, os.O_WRONLY)
    os._exit(0)
os.close(os.open("after", os.O_CREAT | os.O_WRONLY, 0o644))
'"#
        );
        let child = spawn(who, &stage, &prevent_args(&w, &stage), &script);
        let out = ended_within(child, Duration::from_secs(120));
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert!(
            w.ws.join("after").exists(),
            "{who:?}: the create after it ran"
        );
    }
}

/// A payload races a file against a FIFO: behind `/proc/self/fd/N` (`dup2` of an `O_PATH`
/// descriptor of each) and under one name (renames), while it opens that for writing. What the
/// emulator looked at as a file may be a FIFO with no reader when it opens it; that open must
/// never block the emulator (the payload's every later call would hang, and the launch with it).
/// Each racing child is ended by its own alarm, as a blocked open of a FIFO would be.
#[test]
fn a_file_swapped_for_a_fifo_while_it_is_opened_holds_up_nothing_else() {
    const RACE: &str = r#"
import os, signal, threading
for f in ("reg", "reg2"):
    open(f, "w").close()
for f in ("fifo", "fifo2"):
    os.mkfifo(f)
reg, fifo = os.open("reg", os.O_PATH), os.open("fifo", os.O_PATH)
N = 50
def magic():
    while True:
        os.dup2(fifo, N)
        os.dup2(reg, N)
def renames():
    while True:
        for a, b in (("reg2", "x"), ("x", "reg2"), ("fifo2", "x"), ("x", "fifo2")):
            try:
                os.rename(a, b)
            except OSError:
                pass
for i in range(4):
    pid = os.fork()
    if pid == 0:
        signal.alarm(2)
        threading.Thread(target=magic, daemon=True).start()
        threading.Thread(target=renames, daemon=True).start()
        for k in range(400):
            for p in ("/proc/self/fd/%d" % N, "x"):
                try:
                    os.close(os.open(p, os.O_WRONLY))
                except OSError:
                    pass
        os._exit(0)
    os.waitpid(pid, 0)
os.close(os.open("after", os.O_CREAT | os.O_WRONLY, 0o644))
"#;
    for who in identities() {
        let w = world();
        let stage = stage_dir(&w, who);
        fs::write(w.outside.join("race.py"), RACE).expect("script");
        let script = format!(
            "cd {} && python3 {}",
            w.ws(),
            w.outside.join("race.py").display()
        );
        let child = spawn(who, &stage, &prevent_args(&w, &stage), &script);
        // Four rounds of at most two seconds each: ten minutes is a hang, not load.
        let out = ended_within(child, Duration::from_secs(600));
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert!(
            w.ws.join("after").exists(),
            "{who:?}: the create after the race was carried out"
        );
    }
}

/// A payload points its descriptor N at a harmless file, then, from another thread, at a file
/// of git's surface it opened read-only (a linked worktree's `commondir`), while it reopens
/// `/proc/self/fd/N` for writing and links it to a new name. What the emulator judged must be
/// what it opens and links: it holds the object it judged (it judged the decoy and wrote the
/// `commondir` before, within a few tries, as root and as a user).
#[test]
fn a_descriptor_swapped_behind_proc_self_fd_reaches_nothing_it_was_not_judged_for() {
    const RACE: &str = r#"
import os, sys, threading
target = ".git/worktrees/wt/commondir"
open("decoy", "w").close()
decoy, surface = os.open("decoy", os.O_RDONLY), os.open(target, os.O_RDONLY)
N = 60
os.dup2(decoy, N)
def swap():
    while True:
        os.dup2(surface, N)
        os.dup2(decoy, N)
threading.Thread(target=swap, daemon=True).start()
for i in range(1500):
    try:
        fd = os.open("/proc/self/fd/%d" % N, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"../../../elsewhere\n")
        os.close(fd)
    except OSError:
        pass
    try:
        os.link("/proc/self/fd/%d" % N, "alias%d" % i, follow_symlinks=True)
    except OSError:
        pass
open("done", "w").close()
"#;
    for who in identities() {
        let w = world();
        repo(&w);
        let stage = stage_dir(&w, who);
        let commondir = w.ws.join(".git/worktrees/wt/commondir");
        let before = fs::read(&commondir).expect("commondir");
        fs::write(w.outside.join("race.py"), RACE).expect("script");
        let script = format!(
            "cd {} && python3 {}",
            w.ws(),
            w.outside.join("race.py").display()
        );
        let child = spawn(who, &stage, &prevent_args(&w, &stage), &script);
        let out = ended_within(child, Duration::from_secs(600));
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert!(
            w.ws.join("done").exists(),
            "{who:?}: the race ran to its end"
        );
        assert_eq!(
            fs::read(&commondir).expect("commondir"),
            before,
            "{who:?}: the commondir was written through a swapped descriptor"
        );
        let links = std::os::unix::fs::MetadataExt::nlink(&fs::metadata(&commondir).expect("stat"));
        assert_eq!(links, 1, "{who:?}: the commondir got a second name");
    }
}

#[test]
fn gits_own_work_passes_confined_and_new_git_directories_are_staged() {
    for who in identities() {
        let w = world();
        repo(&w);
        let stage = stage_dir(&w, who);
        let ws = w.ws();
        let up = w.outside.join("upstream");
        let script = format!(
            r#"set -e
cd {ws}
echo a > a.txt && git add a.txt && git commit -q -m two
git checkout -q -b feature && echo b > b.txt && git add b.txt && git commit -q -m three
git checkout -q main && git rebase -q feature
git stash list >/dev/null
git worktree add -q wt2
git -C wt2 status --short >/dev/null
git submodule update -q
git -C sub log --oneline >/dev/null
git submodule add -q {up} added
git -C added log --oneline >/dev/null
git clone -q {up} cloned
git -C cloned log --oneline >/dev/null
git init -q fresh && git -C fresh commit -q --allow-empty -m first
echo ok
"#,
            up = up.display()
        );
        let out = spawn(who, &stage, &prevent_args(&w, &stage), &script)
            .wait_with_output()
            .expect("wait");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
            "{who:?}: {}",
            stderr(&out)
        );
        // The workspace's own repository moved on, on the host.
        let log = host_git(&w.ws, &["log", "--format=%s", "main"]).expect("log");
        assert!(
            log.contains("three") && log.contains("two"),
            "{who:?}: {log}"
        );
        // Every new git directory was staged, none is on the host yet.
        let mut targets: Vec<String> = fs::read_dir(&stage)
            .expect("stage")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(RECORD_SUFFIX))
            .filter_map(|e| StagedTarget::decode(&fs::read(e.path()).ok()?))
            .map(|t| t.path.display().to_string())
            .collect();
        targets.sort();
        for want in [
            format!("{ws}/.git/worktrees/wt2"),
            format!("{ws}/.git/modules/sub"),
            format!("{ws}/.git/modules/added"),
            format!("{ws}/added/.git"),
            format!("{ws}/cloned/.git"),
            format!("{ws}/fresh/.git"),
            format!("{ws}/wt2/.git"),
        ] {
            assert!(
                targets.contains(&want),
                "{who:?}: {want} not staged: {targets:?}"
            );
        }
        assert_eq!(
            fs::read_dir(w.ws.join("cloned/.git"))
                .expect("cloned")
                .count(),
            0,
            "{who:?}"
        );
    }
}

#[test]
fn a_payload_in_its_own_pid_namespace_reaches_no_process_outside_it() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let mut outside = launcher(who)
            .args(["--ro", "/", "--", "sleep", "300"])
            .spawn()
            .expect("an outside process");
        let pid = outside.id();
        let script = format!(
            "kill -0 {pid} 2>/dev/null && echo SIGNALLED; \
             renice -n 19 -p {pid} >/dev/null 2>&1 && echo RENICED; \
             taskset -p 1 {pid} >/dev/null 2>&1 && echo PINNED; \
             prlimit --pid {pid} --nofile=0 2>/dev/null && echo LIMITED; \
             chrt -i -p 0 $PPID >/dev/null 2>&1; \
             ls /proc | grep -c '^[0-9]' > {ws}/seen; echo done"
        );
        let out = launch_as(
            who,
            &[
                "--pid-namespace",
                "--ro",
                "/",
                "--rw",
                ws,
                "--rw",
                "/dev/null",
            ],
            &script,
        );
        let said = stdout(&out);
        assert!(said.contains("done"), "{who:?}: {said} {}", stderr(&out));
        for reached in ["SIGNALLED", "RENICED", "PINNED", "LIMITED"] {
            assert!(!said.contains(reached), "{who:?}: {reached}");
        }
        // It sees its own few processes only.
        let seen: u32 = fs::read_to_string(w.ws.join("seen"))
            .expect("seen")
            .trim()
            .parse()
            .expect("count");
        assert!(seen < 10, "{who:?}: saw {seen} processes");
        let limits = fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
        assert!(!limits.contains("Max open files            0"), "{who:?}");
        let _ = outside.kill();
        let _ = outside.wait();
    }
}

#[test]
fn a_pid_namespaced_launch_mirrors_its_payload_and_leaves_no_survivor() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let stage = stage_dir(&w, who);
        let args = prevent_args(&w, &stage);
        let run = |script: &str| {
            spawn(who, &stage, &args, script)
                .wait_with_output()
                .expect("wait")
        };
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(run("exit 42").status.code(), Some(42), "{who:?}");
        assert_eq!(run("kill -9 $$").status.signal(), Some(9), "{who:?}");
        assert_eq!(run("kill -TERM $$").status.signal(), Some(15), "{who:?}");
        // A daemon that would write after the call: the namespace dies with the launch.
        let tag = format!("survivor-{}-{who:?}", std::process::id());
        let out = run(&format!(
            "setsid sh -c 'exec -a {tag} sh -c \"while [ ! -e {ws}/go ]; do sleep 0.05; done; echo late > {ws}/late\"' </dev/null >/dev/null 2>&1 &
             sleep 0.2; echo up"
        ));
        assert!(stdout(&out).contains("up"), "{who:?}");
        let alive = fs::read_dir("/proc")
            .expect("proc")
            .filter_map(Result::ok)
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .any(|c| String::from_utf8_lossy(&c).contains(&tag));
        assert!(!alive, "{who:?}: the daemon outlived the launch");
        fs::write(w.ws.join("go"), "").expect("gate");
        assert!(!w.ws.join("late").exists(), "{who:?}");
    }
}

/// What the emulator creates for the payload (a file by `>`, a folder, a FIFO) gets the mode the
/// payload's own call would have: the asked mode less the payload's umask, read when its call
/// stopped, whatever umask the emulator runs with. Root and unprivileged.
#[test]
fn what_the_emulator_creates_keeps_the_payloads_umask() {
    for who in identities() {
        for (umask, file, dir) in [
            ("077", "600", "700"),
            ("022", "644", "755"),
            ("002", "664", "775"),
        ] {
            let w = world();
            let stage = stage_dir(&w, who);
            let ws = w.ws();
            let script = format!(
                "cd {ws} && umask {umask} && echo x > f && mkdir d && mkfifo p && stat -c '%a' f d p"
            );
            let out = ended_within(
                spawn(who, &stage, &prevent_args(&w, &stage), &script),
                Duration::from_secs(60),
            );
            assert!(out.status.success(), "{who:?} umask {umask}: {out:?}");
            let fifo = &file;
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                format!("{file}\n{dir}\n{fifo}\n"),
                "{who:?} umask {umask}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // On disk afterwards, seen from outside the sandbox.
            let mode = |p: &str| fs::metadata(w.ws.join(p)).expect(p).permissions().mode() & 0o777;
            assert_eq!(format!("{:o}", mode("f")), file, "{who:?} umask {umask}");
            assert_eq!(format!("{:o}", mode("d")), dir, "{who:?} umask {umask}");
        }
    }
}
