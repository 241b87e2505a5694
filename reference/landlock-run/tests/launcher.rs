//! The launcher on the real Landlock kernel of this host: what lands on disk, what does not, and
//! how it reports failure. Landlock is a hard requirement of these tests (kernel 6.18, ABI 7 on
//! the reference machine); a host without it fails them loudly rather than skipping.
//!
//! Every promise is tried by a hostile payload, then checked on the host, both as root and as an
//! unprivileged user: when the tests run as root, the unprivileged variant runs the launcher under
//! `setpriv` as uid 65534; when they do not, the root variant is skipped with a printed reason and
//! the unprivileged one runs as the test's own user.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use landlock_run::{
    FAILURE_EXIT_CODE, PARTIAL_NOTICE, ProbeReport, SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL,
};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_landlock-run");

/// The user the launcher runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Root,
    Unprivileged,
}

/// The test process's effective uid (the owner of its `/proc/self`).
fn test_uid() -> u32 {
    fs::metadata("/proc/self").expect("/proc/self").uid()
}

fn test_is_root() -> bool {
    test_uid() == 0
}

/// The identities to try: both when the tests run as root, otherwise the unprivileged one.
fn identities() -> Vec<Who> {
    if test_is_root() {
        vec![Who::Root, Who::Unprivileged]
    } else {
        eprintln!(
            "root variant skipped: the test process is not root (uid {})",
            test_uid()
        );
        vec![Who::Unprivileged]
    }
}

/// The argv prefix that runs the launcher as `who`.
fn launcher_argv(who: Who) -> Vec<String> {
    let mut argv = Vec::new();
    if who == Who::Unprivileged && test_is_root() {
        argv.extend(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ]
            .map(String::from),
        );
    }
    argv.push(LAUNCHER.to_owned());
    argv
}

fn launcher(who: Who) -> Command {
    let argv = launcher_argv(who);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir("/");
    cmd
}

/// A world both users can work in: the workspace and the outside directory are writable by
/// anyone, so only the sandbox stands between an unprivileged payload and the outside.
struct World {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn world() -> World {
    let dir = tempfile::Builder::new()
        .prefix("landlock-run-test-")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let root = fs::canonicalize(dir.path()).expect("canonical");
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod root");
    let ws = root.join("ws");
    let outside = root.join("outside");
    for d in [&ws, &outside] {
        fs::create_dir_all(d).expect("mkdir");
        fs::set_permissions(d, fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let sentinel = outside.join("sentinel");
    fs::write(&sentinel, "untouched").expect("sentinel");
    fs::set_permissions(&sentinel, fs::Permissions::from_mode(0o666)).expect("chmod sentinel");
    World {
        _dir: dir,
        ws,
        outside,
    }
}

impl World {
    fn ws(&self) -> &str {
        self.ws.to_str().expect("utf8")
    }

    fn outside(&self) -> &str {
        self.outside.to_str().expect("utf8")
    }

    fn sentinel(&self) -> String {
        fs::read_to_string(self.outside.join("sentinel")).expect("sentinel")
    }
}

fn launch_as(who: Who, args: &[&str], script: &str) -> Output {
    launcher(who)
        .args(args)
        .args(["--", "bash", "-c", script])
        .output()
        .expect("spawn launcher")
}

fn launch(args: &[&str], script: &str) -> Output {
    launch_as(Who::Root, args, script)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Waits up to `limit` for `path` to exist.
fn wait_for(path: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn inside_lands_outside_is_denied_and_the_sentinel_is_untouched() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let script = format!(
            "printf new > {ws}/inside; printf evil > {out}/sentinel; printf new > {out}/created; printf x > /dev/null",
            out = w.outside()
        );
        let out = launch_as(
            who,
            &["--ro", "/", "--rw", ws, "--rw", "/dev/null"],
            &script,
        );
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert_eq!(
            fs::read_to_string(w.ws.join("inside")).expect("inside"),
            "new"
        );
        assert_eq!(w.sentinel(), "untouched", "{who:?}");
        assert!(!w.outside.join("created").exists(), "{who:?}");
        assert!(
            stderr(&out).contains("Permission denied"),
            "{who:?}: {}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains(PARTIAL_NOTICE));
    }
}

#[test]
fn a_capped_abi_reports_partial_and_leaves_truncate_ungoverned() {
    let w = world();
    let target = w.outside.join("sentinel");
    let script = format!(
        "perl -e 'truncate($ARGV[0], 0) or die \"truncate: $!\\n\"' {}",
        target.display()
    );
    let full = launch(&["--ro", "/"], &script);
    assert!(!full.status.success(), "full ABI must deny truncate(2)");
    assert_eq!(fs::read_to_string(&target).expect("read"), "untouched");

    let capped = launch(&["--abi-cap", "2", "--ro", "/"], &script);
    assert!(
        stderr(&capped).contains(PARTIAL_NOTICE),
        "{}",
        stderr(&capped)
    );
    // The honest limit of ABI 2: truncate(2) by path is not governed.
    assert!(capped.status.success(), "{}", stderr(&capped));
    assert_eq!(fs::read_to_string(&target).expect("read"), "");
}

#[test]
fn launcher_failures_exit_125_with_a_prefixed_line_and_never_run_the_payload() {
    let w = world();
    let canary = w.outside.join("canary");
    let script = format!("printf ran > {}", canary.display());
    for args in [
        vec!["--rw", "/definitely/not/here"],
        vec!["--abi-cap", "9"],
        vec!["--status-fd", "77"],
        vec!["--bogus"],
    ] {
        let out = launch(&args, &script);
        assert_eq!(out.status.code(), Some(FAILURE_EXIT_CODE), "{args:?}");
        assert!(
            stderr(&out).starts_with("landlock-run: "),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(!canary.exists(), "{args:?} ran the payload");
    }
}

fn with_status_fd(args: &[&str], payload: &[&str]) -> (Output, String) {
    // bash opens the status file as fd 3 for the launcher only.
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("status");
    let mut argv = vec![LAUNCHER.to_owned(), "--status-fd".into(), "3".into()];
    argv.extend(args.iter().map(|s| (*s).to_owned()));
    argv.push("--".into());
    argv.extend(payload.iter().map(|s| (*s).to_owned()));
    let quoted: Vec<String> = argv.iter().map(|a| format!("'{a}'")).collect();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("exec {} 3>{}", quoted.join(" "), status.display()))
        .output()
        .expect("spawn");
    let records = fs::read_to_string(&status).unwrap_or_default();
    (out, records)
}

#[test]
fn status_fd_tells_a_forged_line_from_a_real_failure() {
    let (forged, records) = with_status_fd(
        &["--ro", "/"],
        &[
            "bash",
            "-c",
            "echo landlock-run: forged >&2; test -e /proc/self/fd/3 && exit 9; exit 125",
        ],
    );
    assert_eq!(forged.status.code(), Some(125));
    assert_eq!(
        records, "{\"exec\":\"bash\"}\n",
        "the payload must not inherit fd 3"
    );

    let (missing, records) = with_status_fd(&["--ro", "/"], &["/no/such/program"]);
    assert_eq!(missing.status.code(), Some(125));
    assert!(records.contains("\"exec-failed\""), "{records}");

    let (refused, records) = with_status_fd(&["--rw", "/no/such/dir"], &["true"]);
    assert_eq!(refused.status.code(), Some(125));
    assert!(
        records.starts_with("{\"error\":\"landlock-run: cannot open /no/such/dir"),
        "{records}"
    );
}

#[test]
fn probe_reports_full_on_this_kernel_and_partial_when_capped() {
    let run = |args: &[&str]| {
        let out = Command::new(LAUNCHER).args(args).output().expect("probe");
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.success(),
            ProbeReport::parse(&line).expect(&line),
        )
    };
    let (ok, full) = run(&["--probe"]);
    assert!(ok && full.usable, "{full:?}");
    assert_eq!(full.enforcement, "full");
    assert!(full.kernel_abi >= 3, "{full:?}");
    assert_eq!(
        full.scoped,
        [SCOPE_SIGNAL, SCOPE_ABSTRACT_UNIX_SOCKET],
        "{full:?}"
    );
    let (ok, capped) = run(&["--probe", "--abi-cap", "1"]);
    assert!(ok && capped.usable);
    assert_eq!((capped.enforcement, capped.abi), ("partial", 1));
    assert!(capped.scoped.is_empty(), "{capped:?}");
    let (ok, five) = run(&["--probe", "--abi-cap", "5"]);
    assert!(ok && five.usable && five.scoped.is_empty(), "{five:?}");
    let (ok, six) = run(&["--probe", "--abi-cap", "6"]);
    assert!(ok && six.usable, "{six:?}");
    assert_eq!(six.scoped, [SCOPE_SIGNAL, SCOPE_ABSTRACT_UNIX_SOCKET]);
}

/// Another local user who squats the probe's scratch name must not make the backend look
/// unusable. The names the launcher used to take (`/tmp/landlock-run-probe-<its pid>`) are
/// squatted for the next pids, as files so that creating a directory there fails; the probe must
/// still succeed.
#[test]
fn a_squatted_probe_name_does_not_disable_the_backend() {
    let next: u32 = fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .expect("ns_last_pid")
        .trim()
        .parse()
        .expect("pid");
    let mut squats = Vec::new();
    for pid in next + 1..next + 400 {
        let path = PathBuf::from(format!("/tmp/landlock-run-probe-{pid}"));
        if fs::write(&path, "squatted").is_ok() {
            squats.push(path);
        }
    }
    assert!(!squats.is_empty(), "could not squat any probe name");
    let outs: Vec<(Who, Output)> = identities()
        .into_iter()
        .map(|who| (who, launcher(who).arg("--probe").output().expect("probe")))
        .collect();
    for path in &squats {
        let _ = fs::remove_file(path);
    }
    for (who, out) in outs {
        let line = stdout(&out);
        let report = ProbeReport::parse(&line).expect(&line);
        assert!(
            out.status.success() && report.usable,
            "{who:?}: {report:?} {}",
            stderr(&out)
        );
    }
}

#[test]
fn rules_follow_execve_into_grandchildren() {
    for who in identities() {
        let w = world();
        let script = format!("bash -c 'sh -c \"printf x > {}/deep\"'", w.outside());
        let out = launch_as(who, &["--ro", "/", "--rw", w.ws()], &script);
        assert!(!out.status.success(), "{who:?}");
        assert!(!w.outside.join("deep").exists(), "{who:?}");
    }
}

/// The payload's capability sets and `no_new_privs`, read from its own `/proc/self/status`.
fn status_fields(out: &Output) -> Vec<(String, String)> {
    stdout(out)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

#[test]
fn the_payload_holds_no_capability() {
    if test_is_root() {
        let own = fs::read_to_string("/proc/self/status").expect("status");
        assert!(
            !own.contains("CapEff:\t0000000000000000"),
            "the root variant must start with capabilities to prove a drop"
        );
    }
    for who in identities() {
        let out = launch_as(
            who,
            &["--ro", "/"],
            "grep -E '^(Cap|NoNewPrivs)' /proc/self/status",
        );
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        let fields = status_fields(&out);
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{who:?}: no {name} in {fields:?}"))
        };
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            assert_eq!(get(set), "0000000000000000", "{who:?}: {set}");
        }
        assert_eq!(get("NoNewPrivs"), "1", "{who:?}");
        match who {
            Who::Root => assert_eq!(get("CapBnd"), "0000000000000000", "{who:?}"),
            // An unprivileged process cannot shrink its bounding set; no_new_privs makes it moot.
            Who::Unprivileged => eprintln!("unprivileged bounding set kept: {}", get("CapBnd")),
        }
    }
}

#[test]
fn privileged_operations_fail_and_change_nothing_outside() {
    for who in identities() {
        let w = world();
        let mnt = w.ws.join("mnt");
        fs::create_dir(&mnt).expect("mkdir mnt");
        fs::set_permissions(&mnt, fs::Permissions::from_mode(0o777)).expect("chmod mnt");
        let owned = w.ws.join("owned");
        fs::write(&owned, "mine").expect("owned");
        fs::set_permissions(&owned, fs::Permissions::from_mode(0o666)).expect("chmod owned");
        let owner = fs::metadata(&owned).expect("stat").uid();
        let (ws, out) = (w.ws(), w.outside());
        let script = format!(
            "mknod {ws}/null c 1 3; echo mknod=$?
             mount -t tmpfs none {ws}/mnt; echo mount=$?
             mount --bind {out} {ws}/mnt; echo bind=$?
             mount -o remount,rw /; echo remount=$?
             unshare -r sh -c 'echo x > {out}/userns'; echo unshare_r=$?
             unshare -m sh -c 'echo x > {out}/mountns'; echo unshare_m=$?
             chown 4242 {ws}/owned; echo chown=$?
             echo x > {out}/sentinel; echo write=$?"
        );
        let run = launch_as(who, &["--ro", "/", "--rw", ws], &script);
        let report = stdout(&run);
        for step in [
            "mknod",
            "mount",
            "bind",
            "remount",
            "unshare_r",
            "unshare_m",
            "chown",
            "write",
        ] {
            let line = report
                .lines()
                .find(|l| l.starts_with(&format!("{step}=")))
                .unwrap_or_else(|| panic!("{who:?}: {step} did not run: {report}"));
            assert_ne!(
                line,
                format!("{step}=0"),
                "{who:?}: {step} succeeded: {}",
                stderr(&run)
            );
        }
        assert!(!w.ws.join("null").exists(), "{who:?}: mknod");
        assert_eq!(fs::read_dir(&mnt).expect("ls mnt").count(), 0, "{who:?}");
        let mounts = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        assert!(!mounts.contains(mnt.to_str().expect("utf8")), "{who:?}");
        assert!(!w.outside.join("userns").exists(), "{who:?}");
        assert!(!w.outside.join("mountns").exists(), "{who:?}");
        assert_eq!(fs::metadata(&owned).expect("stat").uid(), owner, "{who:?}");
        assert_eq!(w.sentinel(), "untouched", "{who:?}");
    }
}

#[test]
fn an_inherited_descriptor_does_not_reach_the_payload() {
    for who in identities() {
        let w = world();
        let target = w.outside.join("appended");
        fs::write(&target, "before\n").expect("target");
        // Only root may open it itself; the descriptor is the payload's only way in.
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).expect("chmod");
        let control = w.outside.join("control");
        let held = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "exec 7>>{}; bash -c 'echo reached >&7'",
                shell_quote(control.to_str().expect("utf8"))
            ))
            .status()
            .expect("control");
        assert!(held.success());
        assert_eq!(
            fs::read_to_string(&control).expect("control"),
            "reached\n",
            "the control must show fd 7 reaches an ordinary child"
        );

        let ws = w.ws();
        let payload = format!(
            "echo x >&7; echo y >> /proc/self/fd/7; echo z >> /proc/$PPID/fd/7; \
             for f in /proc/self/fd/*; do echo \"${{f##*/}}\"; done > {ws}/fds; \
             test -e /proc/self/fd/7 && echo fd7-present; true"
        );
        let mut argv = launcher_argv(who);
        argv.extend(["--ro", "/", "--rw", ws, "--", "bash", "-c", &payload].map(String::from));
        let quoted: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "exec 7>>{}; exec {}",
                shell_quote(target.to_str().expect("utf8")),
                quoted.join(" ")
            ))
            .current_dir("/")
            .output()
            .expect("spawn");
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert_eq!(
            fs::read_to_string(&target).expect("target"),
            "before\n",
            "{who:?}"
        );
        let fds = fs::read_to_string(w.ws.join("fds")).expect("fds");
        assert!(fds.lines().any(|l| l == "2"), "{who:?}: {fds}");
        assert!(!fds.lines().any(|l| l == "7"), "{who:?}: {fds}");
        assert!(!stdout(&out).contains("fd7-present"), "{who:?}");
    }
}

#[test]
fn daemons_do_not_outlive_the_launcher() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let daemon = |name: &str, extra: &str| {
            format!(
                "sh -c '{extra}echo up > {ws}/{name}-up; sleep 1; echo late > {ws}/{name}-late' \
                 </dev/null >/dev/null 2>&1"
            )
        };
        let script = format!(
            "setsid {setsid} &
             ( {double} & )
             ( setsid {stubborn} & )
             for i in $(seq 500); do
               [ -e {ws}/setsid-up ] && [ -e {ws}/double-up ] && [ -e {ws}/stubborn-up ] && break
               sleep 0.01
             done",
            setsid = daemon("setsid", ""),
            double = daemon("double", ""),
            stubborn = daemon("stubborn", "trap \"\" TERM HUP INT QUIT; "),
        );
        let start = Instant::now();
        let out = launch_as(
            who,
            &["--ro", "/", "--rw", ws, "--rw", "/dev/null"],
            &script,
        );
        let took = start.elapsed();
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert!(
            took < Duration::from_millis(950),
            "{who:?}: the launcher waited for its daemons ({took:?})"
        );
        for name in ["setsid", "double", "stubborn"] {
            assert!(w.ws.join(format!("{name}-up")).exists(), "{who:?}: {name}");
        }
        std::thread::sleep(Duration::from_millis(1500));
        for name in ["setsid", "double", "stubborn"] {
            assert!(
                !w.ws.join(format!("{name}-late")).exists(),
                "{who:?}: the {name} daemon outlived the launcher"
            );
        }
    }
}

/// A payload that leaves a `setsid` daemon and itself running for a second, each recording its
/// pid once up and writing `*-late` when it survives.
fn tree_script(ws: &str) -> String {
    format!(
        "setsid sh -c 'echo $$ > {ws}/daemon-pid.tmp; mv {ws}/daemon-pid.tmp {ws}/daemon-pid; \
           sleep 1; echo late > {ws}/daemon-late' </dev/null >/dev/null 2>&1 &
         echo $$ > {ws}/main-pid.tmp; mv {ws}/main-pid.tmp {ws}/main-pid
         sleep 1; echo late > {ws}/main-late"
    )
}

/// After the tree was told to stop: nothing it started is alive or writes later.
fn assert_tree_gone(w: &World, who: Who) {
    let pids: Vec<String> = ["daemon-pid", "main-pid"]
        .iter()
        .map(|f| {
            fs::read_to_string(w.ws.join(f))
                .expect("pid")
                .trim()
                .to_owned()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    for late in ["daemon-late", "main-late"] {
        assert!(!w.ws.join(late).exists(), "{who:?}: {late}");
    }
    for pid in pids {
        let alive = fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .map(|c| c.contains("sleep") || c.starts_with("sh") || c.starts_with("bash"))
            .unwrap_or(false);
        assert!(!alive, "{who:?}: process {pid} survived");
    }
}

#[test]
fn sigterm_to_the_launcher_kills_the_whole_tree() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let mut child = launcher(who)
            .args(["--ro", "/", "--rw", ws, "--rw", "/dev/null", "--"])
            .args(["bash", "-c", &tree_script(ws)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        for f in ["daemon-pid", "main-pid"] {
            assert!(
                wait_for(&w.ws.join(f), Duration::from_secs(5)),
                "{who:?}: {f}"
            );
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
        let status = child.wait().expect("wait");
        assert_eq!(status.signal(), Some(15), "{who:?}: {status:?}");
        assert_tree_gone(&w, who);
    }
}

#[test]
fn the_callers_death_kills_the_whole_tree() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let script = tree_script(ws);
        let mut argv = launcher_argv(who);
        argv.extend(
            [
                "--ro",
                "/",
                "--rw",
                ws,
                "--rw",
                "/dev/null",
                "--",
                "bash",
                "-c",
                &script,
            ]
            .map(String::from),
        );
        let quoted: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
        // The caller starts the launcher and is then killed outright: the monitor's parent-death
        // signal must make it clean up.
        let mut caller = Command::new("bash")
            .arg("-c")
            .arg(format!("{} </dev/null >/dev/null & wait", quoted.join(" ")))
            .current_dir("/")
            .spawn()
            .expect("spawn");
        for f in ["daemon-pid", "main-pid"] {
            assert!(
                wait_for(&w.ws.join(f), Duration::from_secs(5)),
                "{who:?}: {f}"
            );
        }
        caller.kill().expect("kill caller");
        caller.wait().expect("wait caller");
        assert_tree_gone(&w, who);
    }
}

#[test]
fn the_exit_code_and_the_death_signal_are_mirrored() {
    for who in identities() {
        let code = launch_as(who, &["--ro", "/"], "exit 42");
        assert_eq!(code.status.code(), Some(42), "{who:?}");
        let zero = launch_as(who, &["--ro", "/"], "true");
        assert_eq!(zero.status.code(), Some(0), "{who:?}");
        let killed = launch_as(who, &["--ro", "/"], "kill -9 $$");
        assert_eq!(killed.status.signal(), Some(9), "{who:?}");
        let termed = launch_as(who, &["--ro", "/"], "kill -TERM $$");
        assert_eq!(termed.status.signal(), Some(15), "{who:?}");
    }
}

/// The kernel this runs on must scope (ABI 6 or newer): the scoping tests pin both sides.
fn assert_kernel_scopes() {
    let out = Command::new(LAUNCHER)
        .arg("--probe")
        .output()
        .expect("probe");
    let line = stdout(&out);
    let report = ProbeReport::parse(&line).expect(&line);
    assert!(
        report.kernel_abi >= 6,
        "this kernel's Landlock ABI {} cannot scope: {report:?}",
        report.kernel_abi
    );
}

#[test]
fn a_scoped_payload_cannot_signal_outside_its_domain_unless_capped_below_6() {
    assert_kernel_scopes();
    for who in identities() {
        // An outside process of the payload's own user, which it could signal without scoping.
        let mut victim = if who == Who::Unprivileged && test_is_root() {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sleep",
                "30",
            ]);
            c
        } else {
            let mut c = Command::new("sleep");
            c.arg("30");
            c
        }
        .spawn()
        .expect("victim");
        let pid = victim.id();
        let scoped = launch_as(who, &["--ro", "/"], &format!("kill -TERM {pid}"));
        std::thread::sleep(Duration::from_millis(100));
        let survived = victim.try_wait().expect("try_wait").is_none();
        let capped = launch_as(
            who,
            &["--abi-cap", "5", "--ro", "/"],
            &format!("kill -0 {pid}"),
        );
        let _ = victim.kill();
        let _ = victim.wait();
        assert!(!scoped.status.success(), "{who:?}: {}", stderr(&scoped));
        assert!(
            survived,
            "{who:?}: the scoped payload killed an outside process"
        );
        assert!(
            capped.status.success(),
            "{who:?}: an unscoped launch must reach it: {}",
            stderr(&capped)
        );
    }
}

#[test]
fn a_scoped_payload_cannot_reach_an_outside_abstract_socket_unless_capped_below_6() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    assert_kernel_scopes();
    for who in identities() {
        let name = format!("landlock-run-test-{}-{who:?}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
        let listener = UnixListener::bind_addr(&addr).expect("bind");
        let connect = format!(
            "perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die \"socket: $!\\n\"; \
             connect($s, pack_sockaddr_un(\"\\0\" . $ARGV[0])) or die \"connect: $!\\n\"' {name}"
        );
        let scoped = launch_as(who, &["--ro", "/"], &connect);
        let capped = launch_as(who, &["--abi-cap", "5", "--ro", "/"], &connect);
        drop(listener);
        assert!(
            !scoped.status.success() && stderr(&scoped).contains("connect: "),
            "{who:?}: {}",
            stderr(&scoped)
        );
        assert!(
            capped.status.success(),
            "{who:?}: an unscoped launch must connect: {}",
            stderr(&capped)
        );
    }
}

/// The monitor blocks and resets signals for itself; the payload must get the caller's signal
/// mask and ignored set back exactly (a payload with SIGTERM still blocked would survive a stop).
#[test]
fn the_payload_gets_the_callers_signal_state() {
    for who in identities() {
        let wrap = |inner: Vec<String>| {
            let mut cmd = Command::new("perl");
            cmd.arg("-MPOSIX")
                .arg("-e")
                .arg(
                    "$SIG{CHLD} = 'IGNORE'; $SIG{INT} = 'IGNORE'; \
                     sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGUSR1)) or die; exec @ARGV or die",
                )
                .args(inner)
                .current_dir("/");
            cmd.output().expect("spawn")
        };
        let probe = "grep -E '^Sig(Blk|Ign)' /proc/self/status";
        let mut direct = Vec::new();
        if who == Who::Unprivileged && test_is_root() {
            direct.extend(
                [
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                ]
                .map(String::from),
            );
        }
        direct.extend(["bash", "-c", probe].map(String::from));
        let mut launched = launcher_argv(who);
        launched.extend(["--ro", "/", "--", "bash", "-c", probe].map(String::from));
        let (direct, launched) = (wrap(direct), wrap(launched));
        assert!(launched.status.success(), "{who:?}: {}", stderr(&launched));
        // The premise: SIGUSR1 blocked (SIGINT and SIGCHLD are ignored too).
        assert!(
            stdout(&direct).contains("SigBlk:\t0000000000000200"),
            "{}",
            stdout(&direct)
        );
        assert_eq!(stdout(&launched), stdout(&direct), "{who:?}");
    }
}

#[test]
fn the_payload_runs_in_a_session_of_its_own_without_the_callers_terminal() {
    // Its own session: no controlling terminal of the caller's to inject keystrokes into with
    // TIOCSTI. Field 6 of /proc/self/stat is the session id (bash's comm has no spaces).
    let out = launch(
        &["--ro", "/"],
        r#"read -r _ _ _ _ _ sid _ < /proc/$$/stat; if [ "$sid" = "$$" ]; then echo own-session; else echo "session $sid"; fi"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "own-session\n");
}
