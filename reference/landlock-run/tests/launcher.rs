//! The launcher on the real Landlock kernel of this host: what lands on disk, what does not, and
//! how it reports failure. Landlock is a hard requirement of these tests (kernel 6.18, ABI 7 on
//! the reference machine); a host without it fails them loudly rather than skipping.
//!
//! Every promise is tried by a hostile payload, then checked on the host, both as root and as an
//! unprivileged user: when the tests run as root, the unprivileged variant runs the launcher under
//! `setpriv` as uid 65534; when they do not, the root variant is skipped with a printed reason and
//! the unprivileged one runs as the test's own user.
//!
//! Linux only: elsewhere the launcher runs nothing (its library's `run` says so).
#![cfg(target_os = "linux")]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use landlock_run::{
    Enforcement, FAILURE_EXIT_CODE, PARTIAL_NOTICE, ProbeReport, SCOPE_ABSTRACT_UNIX_SOCKET,
    SCOPE_SIGNAL, UNGOVERNED_LINK_ACROSS_DIRS, UNGOVERNED_METADATA, UNGOVERNED_RENAME_ACROSS_DIRS,
    UNGOVERNED_TRUNCATE,
};
use sandbox_test_support::{SCRATCH_BASE, is_root};

mod common;
use common::*;

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
    let mut argv = vec![launcher_path().to_owned(), "--status-fd".into(), "3".into()];
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
fn probe_reports_partial_naming_what_is_ungoverned_and_the_setuid_guard() {
    let run = |who: Who, args: &[&str]| {
        let out = launcher(who).args(args).output().expect("probe");
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.success(),
            ProbeReport::parse(&line).expect(&line),
        )
    };
    let guarded = matches!(std::env::consts::ARCH, "x86_64" | "aarch64");
    for who in identities() {
        let (ok, top) = run(who, &["--probe"]);
        assert!(ok && top.usable, "{who:?}: {top:?}");
        // No Landlock ABI governs metadata: never `full`.
        assert_eq!(top.enforcement, Enforcement::Partial, "{who:?}: {top:?}");
        assert_eq!(top.ungoverned, [UNGOVERNED_METADATA], "{who:?}: {top:?}");
        assert_eq!(top.setuid_guard, guarded, "{who:?}: {top:?}");
        assert_eq!(top.abi, 3, "{who:?}: {top:?}");
        assert!(top.kernel_abi >= 3, "{who:?}: {top:?}");
        assert_eq!(
            top.scoped,
            [SCOPE_SIGNAL, SCOPE_ABSTRACT_UNIX_SOCKET],
            "{who:?}: {top:?}"
        );
        let (ok, two) = run(who, &["--probe", "--abi-cap", "2"]);
        assert!(ok && two.usable, "{who:?}: {two:?}");
        assert_eq!((two.enforcement, two.abi), (Enforcement::Partial, 2));
        assert_eq!(two.ungoverned, [UNGOVERNED_METADATA, UNGOVERNED_TRUNCATE]);
        let (ok, capped) = run(who, &["--probe", "--abi-cap", "1"]);
        assert!(ok && capped.usable);
        assert_eq!((capped.enforcement, capped.abi), (Enforcement::Partial, 1));
        assert_eq!(
            capped.ungoverned,
            [
                UNGOVERNED_METADATA,
                UNGOVERNED_TRUNCATE,
                UNGOVERNED_RENAME_ACROSS_DIRS,
                UNGOVERNED_LINK_ACROSS_DIRS
            ]
        );
        assert!(capped.scoped.is_empty(), "{capped:?}");
        assert_eq!(capped.setuid_guard, guarded, "{who:?}: {capped:?}");
        let (ok, five) = run(who, &["--probe", "--abi-cap", "5"]);
        assert!(ok && five.usable && five.scoped.is_empty(), "{five:?}");
        let (ok, six) = run(who, &["--probe", "--abi-cap", "6"]);
        assert!(ok && six.usable, "{six:?}");
        assert_eq!(six.scoped, [SCOPE_SIGNAL, SCOPE_ABSTRACT_UNIX_SOCKET]);
    }
}

/// What the probe calls ungoverned really is: a payload changes the mode and times of a file of
/// its own user outside the writable set, while its content stays out of reach. The notice is
/// not printed for it (it would be on every launch).
#[test]
fn metadata_outside_the_writable_set_is_ungoverned_as_the_probe_says() {
    for who in identities() {
        let w = world();
        let theirs = w.outside.join("theirs");
        fs::write(&theirs, "content").expect("theirs");
        fs::set_permissions(&theirs, fs::Permissions::from_mode(0o644)).expect("chmod");
        if who == Who::Unprivileged && is_root() {
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        }
        let script = format!(
            "f={}; chmod 600 $f; echo chmod=$?; touch -m -d @0 $f; echo touch=$?; echo x > $f; echo write=$?",
            theirs.display()
        );
        let out = launch_as(who, &["--ro", "/", "--rw", w.ws()], &script);
        let report = stdout(&out);
        assert!(report.contains("chmod=0\n"), "{who:?}: {report}");
        assert!(report.contains("touch=0\n"), "{who:?}: {report}");
        assert!(!report.contains("write=0\n"), "{who:?}: {report}");
        let meta = fs::metadata(&theirs).expect("stat");
        assert_eq!(meta.mode() & 0o7777, 0o600, "{who:?}");
        assert_eq!(meta.mtime(), 0, "{who:?}");
        assert_eq!(fs::read_to_string(&theirs).expect("read"), "content");
        assert!(
            !stderr(&out).contains(PARTIAL_NOTICE),
            "{who:?}: {}",
            stderr(&out)
        );
    }
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
    if is_root() {
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
        // Each daemon records its pid, says it is up, then waits for a gate this test opens only
        // after the launcher returned: a launcher that waited for its daemons would never return
        // (nextest's slow-timeout is the hang guard), and one that left them alive leaves their
        // pids alive and their `*-late` written once the gate opens. No clock decides.
        let daemon = |name: &str, extra: &str| {
            format!(
                "sh -c '{extra}echo $$ > {ws}/{name}-pid; echo up > {ws}/{name}-up; \
                 while [ ! -e {ws}/go ]; do sleep 0.05; done; echo late > {ws}/{name}-late' \
                 </dev/null >/dev/null 2>&1"
            )
        };
        let script = format!(
            "setsid {setsid} &
             ( {double} & )
             ( setsid {stubborn} & )
             until [ -e {ws}/setsid-up ] && [ -e {ws}/double-up ] && [ -e {ws}/stubborn-up ]; do
               sleep 0.01
             done",
            setsid = daemon("setsid", ""),
            double = daemon("double", ""),
            stubborn = daemon("stubborn", "trap \"\" TERM HUP INT QUIT; "),
        );
        let out = launch_as(
            who,
            &["--ro", "/", "--rw", ws, "--rw", "/dev/null"],
            &script,
        );
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        // The monitor killed and reaped every descendant before the launcher exited.
        for name in ["setsid", "double", "stubborn"] {
            assert!(w.ws.join(format!("{name}-up")).exists(), "{who:?}: {name}");
            let pid = fs::read_to_string(w.ws.join(format!("{name}-pid"))).expect("pid");
            let alive = fs::read_to_string(format!("/proc/{}/cmdline", pid.trim()))
                .map(|c| c.starts_with("sh"))
                .unwrap_or(false);
            assert!(!alive, "{who:?}: the {name} daemon outlived the launcher");
        }
        fs::write(w.ws.join("go"), "").expect("gate");
        for name in ["setsid", "double", "stubborn"] {
            assert!(
                !w.ws.join(format!("{name}-late")).exists(),
                "{who:?}: the {name} daemon wrote after the launcher"
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
                wait_for(&w.ws.join(f), Duration::from_secs(60)),
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
                wait_for(&w.ws.join(f), Duration::from_secs(60)),
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
    let out = Command::new(launcher_path())
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

/// A process outside the sandbox, of the user the launcher runs as (`sleep 600`; the test kills
/// it): what a payload could signal or change without its guards.
fn outside_process(who: Who) -> std::process::Child {
    let argv = launcher_argv(who);
    // The launcher's own argv prefix (`setpriv ...` for the unprivileged user), with `sleep`
    // in place of the launcher.
    let mut cmd = Command::new(if argv.len() > 1 { &argv[0] } else { "sleep" });
    if argv.len() > 1 {
        cmd.args(&argv[1..argv.len() - 1]).arg("sleep");
    }
    cmd.arg("600").spawn().expect("an outside process")
}

#[test]
fn a_scoped_payload_cannot_signal_outside_its_domain_unless_capped_below_6() {
    assert_kernel_scopes();
    for who in identities() {
        // An outside process of the payload's own user, which it could signal without scoping.
        let mut victim = outside_process(who);
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

/// Without a PID namespace the payload sees the host's processes of its uid; Landlock does not
/// govern `prlimit`. A payload that could set another process's limits could blind the caller
/// (RLIMIT_NOFILE 0 leaves the monitor unable to list a survivor, sandboxctl's guard unable to
/// revert) or make the kernel dump a host process's core where that process runs. At every ABI
/// the guard refuses it; the payload's own limits stay its to set.
#[test]
fn a_payload_cannot_change_another_processs_resource_limits_at_any_abi() {
    for who in identities() {
        for cap in [None, Some("2")] {
            let mut victim = outside_process(who);
            let pid = victim.id();
            let limits = format!("/proc/{pid}/limits");
            let before = fs::read_to_string(&limits).expect("the victim's limits");
            let mut args = vec!["--ro", "/", "--rw", "/dev/null"];
            if let Some(cap) = cap {
                args.extend(["--abi-cap", cap]);
            }
            let out = launch_as(
                who,
                &args,
                &format!(
                    "prlimit --pid {pid} --nofile=0:0 --core=unlimited --cpu=1 2>/dev/null \
                       && echo CHANGED-VICTIM
                     prlimit --pid $PPID --nofile=0:0 2>/dev/null && echo CHANGED-CALLER
                     prlimit --nofile=64:64 sh -c 'ulimit -n' && ulimit -n 32 && echo OWN-OK"
                ),
            );
            let after = fs::read_to_string(&limits).expect("the victim's limits");
            let _ = victim.kill();
            let _ = victim.wait();
            let said = stdout(&out);
            assert!(
                out.status.success(),
                "{who:?} cap {cap:?}: {}",
                stderr(&out)
            );
            assert_eq!(
                before, after,
                "{who:?} cap {cap:?}: the victim's limits changed"
            );
            assert!(
                !said.contains("CHANGED"),
                "{who:?} cap {cap:?}: a prlimit on another process succeeded: {said}"
            );
            assert_eq!(
                said,
                "64\nOWN-OK\n",
                "{who:?} cap {cap:?}: the payload's own limits: {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn a_payload_cannot_reach_an_outside_abstract_socket_at_any_abi() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    assert_kernel_scopes();
    for who in identities() {
        let name = format!("landlock-run-test-{}-{who:?}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
        let listener = UnixListener::bind_addr(&addr).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let connect = format!(
            "perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die \"socket: $!\\n\"; \
             connect($s, pack_sockaddr_un(\"\\0\" . $ARGV[0])) or die \"connect: $!\\n\"' {name}"
        );
        // Scoped from ABI 6, and below it (capped at 5) the seccomp guard still refuses the
        // unix socket itself: host IPC is closed whatever the ABI.
        for args in [&["--ro", "/"][..], &["--abi-cap", "5", "--ro", "/"][..]] {
            let out = launch_as(who, args, &connect);
            assert!(
                !out.status.success() && stderr(&out).contains("socket: Operation not permitted"),
                "{who:?} {args:?}: {}",
                stderr(&out)
            );
        }
        assert!(
            listener.accept().is_err(),
            "{who:?}: the outside listener saw a connection"
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
        if who == Who::Unprivileged && is_root() {
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

/// A payload whose child seizes it with `PTRACE_SEIZE` (allowed: the same Landlock domain), so
/// the payload's exit status goes to that tracer first, then keeps writing a line to
/// `<ws>/ticks` every 100 ms, having written its pid to `<ws>/tracer-pid`. The payload's main
/// process exits once the seize is in place.
fn tracer_script(ws: &str) -> String {
    let python = format!(
        "import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, os.getppid(), 0, 0) != 0:
    sys.exit('seize failed: %d' % ctypes.get_errno())
with open('{ws}/tracer-pid.tmp', 'w') as f:
    f.write(str(os.getpid()))
os.rename('{ws}/tracer-pid.tmp', '{ws}/tracer-pid')
while True:
    with open('{ws}/ticks', 'a') as f:
        f.write('t\\n')
    time.sleep(0.1)
"
    );
    format!(
        "/usr/bin/python3 -c {} </dev/null >/dev/null 2>&1 &
         until [ -e {ws}/tracer-pid ] || [ $SECONDS -ge 60 ]; do :; done
         [ -e {ws}/tracer-pid ] || exit 3",
        shell_quote(&python)
    )
}

/// After the launcher ended: the tracer is gone and nothing writes to `<ws>/ticks` any more.
fn assert_tracer_gone(w: &World, who: Who) {
    let pid = fs::read_to_string(w.ws.join("tracer-pid")).expect("tracer pid");
    std::thread::sleep(Duration::from_secs(1));
    let before = fs::metadata(w.ws.join("ticks"))
        .map(|m| m.len())
        .unwrap_or(0);
    std::thread::sleep(Duration::from_millis(500));
    let after = fs::metadata(w.ws.join("ticks"))
        .map(|m| m.len())
        .unwrap_or(0);
    let alive = fs::read_to_string(format!("/proc/{}/cmdline", pid.trim()))
        .map(|c| c.contains("python"))
        .unwrap_or(false);
    if alive {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid.trim().parse().expect("pid")),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(before, after, "{who:?}: the tracer still writes 1 s later");
    assert!(!alive, "{who:?}: the tracer {} survived", pid.trim());
}

/// Waits up to `limit` for `child`; on a longer wait kills it and the tracer (so a failure
/// leaves nothing running) and fails.
fn wait_within(
    child: &mut std::process::Child,
    limit: Duration,
    w: &World,
    who: Who,
) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            if let Some(pid) = fs::read_to_string(w.ws.join("tracer-pid"))
                .ok()
                .and_then(|p| p.trim().parse().ok())
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("{who:?}: the launcher did not return within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_tracer_of_the_payload_neither_hangs_the_launcher_nor_outlives_it() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let mut child = launcher(who)
            .args(["--ro", "/", "--rw", ws, "--rw", "/dev/null", "--"])
            .args(["bash", "-c", &tracer_script(ws)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        assert!(
            wait_for(&w.ws.join("tracer-pid"), Duration::from_secs(60)),
            "{who:?}: the tracer never started"
        );
        // No timeout of the caller's: the launcher must notice the payload's exit by itself.
        let status = wait_within(&mut child, Duration::from_secs(60), &w, who);
        assert_eq!(status.code(), Some(0), "{who:?}: {status:?}");
        assert_tracer_gone(&w, who);
    }
}

#[test]
fn a_tracer_of_the_payload_dies_when_the_launcher_is_stopped_like_the_library_does() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        // The payload stays up (the tracer is seized on it) until it is stopped.
        let script = format!("{}\n sleep 30", tracer_script(ws));
        let mut child = launcher(who)
            .args(["--ro", "/", "--rw", ws, "--rw", "/dev/null", "--"])
            .args(["bash", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn");
        assert!(
            wait_for(&w.ws.join("tracer-pid"), Duration::from_secs(60)),
            "{who:?}: the tracer never started"
        );
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        // The library's stop: SIGTERM to the runner, SIGKILL to its process group 200 ms later.
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("term");
        std::thread::sleep(Duration::from_millis(200));
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let status = wait_within(&mut child, Duration::from_secs(60), &w, who);
        assert!(status.signal().is_some(), "{who:?}: {status:?}");
        assert_tracer_gone(&w, who);
    }
}

#[test]
fn a_rw_or_ro_path_through_a_symlink_is_a_launcher_failure_and_nothing_is_written() {
    for who in identities() {
        let w = world();
        let link = w.ws.join("link");
        std::os::unix::fs::symlink(&w.outside, &link).expect("symlink");
        let link = link.to_str().expect("utf8").to_owned();
        let script = format!(
            "printf x > {link}/through; printf x > {}/direct",
            w.outside()
        );
        for args in [
            vec!["--ro", "/", "--rw", &link],
            vec![
                "--ro",
                "/",
                "--rw",
                w.ws(),
                "--rw",
                &format!("{link}/sentinel"),
            ],
            vec!["--ro", &link, "--rw", w.ws()],
        ] {
            let out = launch_as(who, &args, &script);
            assert_eq!(
                out.status.code(),
                Some(FAILURE_EXIT_CODE),
                "{who:?} {args:?}: {}",
                stderr(&out)
            );
            let err = stderr(&out);
            assert!(
                err.starts_with("landlock-run: ") && err.contains(&link),
                "{who:?} {args:?}: {err}"
            );
            assert!(!w.outside.join("through").exists(), "{who:?} {args:?}");
            assert!(!w.outside.join("direct").exists(), "{who:?} {args:?}");
            assert_eq!(w.sentinel(), "untouched", "{who:?}");
        }
    }
    let w = world();
    let link = w.ws.join("link");
    std::os::unix::fs::symlink(&w.outside, &link).expect("symlink");
    let (out, records) = with_status_fd(&["--rw", link.to_str().expect("utf8")], &["true"]);
    assert_eq!(out.status.code(), Some(FAILURE_EXIT_CODE));
    assert!(
        records.starts_with("{\"error\":\"landlock-run: "),
        "{records}"
    );
}

/// A concurrent process exchanges a granted directory with a symlink to the outside (as a
/// sandboxed command holding the parent could) every millisecond while the launcher starts.
#[test]
fn swapping_a_rw_root_with_a_symlink_never_grants_the_outside() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for who in identities() {
        let w = world();
        let (inner, link) = (w.ws.join("inner"), w.ws.join("link"));
        fs::create_dir(&inner).expect("inner");
        fs::set_permissions(&inner, fs::Permissions::from_mode(0o777)).expect("chmod");
        std::os::unix::fs::symlink(&w.outside, &link).expect("symlink");
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, inner, link) = (stop.clone(), inner.clone(), link.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    nix::fcntl::renameat2(
                        nix::fcntl::AT_FDCWD,
                        &inner,
                        nix::fcntl::AT_FDCWD,
                        &link,
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    )
                    .expect("exchange");
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let inner_s = inner.to_str().expect("utf8").to_owned();
        let start = Instant::now();
        let (mut ran, mut refused) = (0, 0);
        for i in 0..200 {
            let out = launcher(who)
                .args(["--rw", &inner_s, "--", "sh", "-c"])
                .arg(format!("echo x > {inner_s}/landed-{i}"))
                .stderr(Stdio::null())
                .output()
                .expect("spawn");
            match out.status.code() {
                Some(FAILURE_EXIT_CODE) => refused += 1,
                _ => ran += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().expect("swapper");
        let took = start.elapsed();
        let landed: Vec<String> = fs::read_dir(&w.outside)
            .expect("outside")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("landed-"))
            .collect();
        eprintln!("{who:?}: {ran} ran, {refused} refused in {took:?}");
        assert!(landed.is_empty(), "{who:?}: landed outside: {landed:?}");
        assert_eq!(w.sentinel(), "untouched", "{who:?}");
        assert!(
            ran > 0 && refused > 0,
            "{who:?}: the race never went both ways"
        );
    }
}

/// Every file and directory below `dir` whose mode has the setuid or setgid bit.
fn set_id_files(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).expect("read_dir").flatten() {
        let meta = fs::symlink_metadata(entry.path()).expect("stat");
        if meta.mode() & 0o6000 != 0 {
            found.push((entry.path(), meta.mode()));
        }
        if meta.is_dir() {
            found.extend(set_id_files(&entry.path()));
        }
    }
    found
}

#[test]
fn the_payload_cannot_set_the_setuid_or_setgid_bit() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let outside_file = w.outside.join("sentinel");
        let outside_mode = fs::metadata(&outside_file).expect("stat").mode();
        let python = format!(
            "import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
for name, mode in (('py-suid', 0o4755), ('py-sgid', 0o2755)):
    try:
        os.close(os.open('{ws}/' + name, os.O_CREAT | os.O_WRONLY, mode))
        print(name + '=created')
    except OSError as e:
        print(name + '=' + str(e.errno))
if platform.machine() == 'x86_64':
    open('{ws}/x32', 'w').close()
    # chmod through the x32 ABI: __X32_SYSCALL_BIT | 90.
    rc = libc.syscall(0x40000000 | 90, b'{ws}/x32', 0o4755)
    print('x32=%d/%d' % (rc, ctypes.get_errno()))
    # openat2 (437) must say ENOSYS so callers fall back to openat.
    rc = libc.syscall(437, -100, b'{ws}/o2', None, 0)
    print('openat2=%d/%d' % (rc, ctypes.get_errno()))
"
        );
        let script = format!(
            "cd {ws}
             echo plain > own; chmod 644 own
             chmod u+s own; echo chmod_us=$?
             chmod g+s own; echo chmod_gs=$?
             chmod 4755 own; echo chmod_4755=$?
             chmod u+s {outside}; echo outside_us=$?
             chmod g+s {outside}; echo outside_gs=$?
             install -m 4755 /bin/true inst; echo install=$?
             mkdir -m 2755 sgid-dir; echo mkdir=$?
             /usr/bin/python3 -c {python}
             echo data > normal; chmod 755 normal; echo chmod_755=$?
             stat -c %a normal
             chmod 640 normal; echo chmod_640=$?
             stat -c %a normal
             cp -p normal copied; echo cp_p=$?
             stat -c %a copied
             mkdir -p src/sub; echo a > src/sub/a; chmod 750 src/sub
             tar cf archive.tar src; echo tar_c=$?
             mkdir x; tar xf archive.tar -C x; echo tar_x=$?
             stat -c %a x/src/sub; cat x/src/sub/a",
            outside = outside_file.display(),
            python = shell_quote(&python),
        );
        let out = launch_as(
            who,
            &["--ro", "/", "--rw", ws, "--rw", "/dev/null"],
            &script,
        );
        let report = stdout(&out);
        let step = |name: &str| -> String {
            report
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .unwrap_or_else(|| panic!("{who:?}: {name} did not run: {report} {}", stderr(&out)))
                .to_owned()
        };
        for name in [
            "chmod_us",
            "chmod_gs",
            "chmod_4755",
            "outside_us",
            "outside_gs",
        ] {
            assert_ne!(step(name), "0", "{who:?}: {name} succeeded: {report}");
        }
        for name in ["py-suid", "py-sgid"] {
            assert_ne!(step(name), "created", "{who:?}: {name}: {report}");
        }
        if std::env::consts::ARCH == "x86_64" {
            assert!(step("x32").starts_with("-1/"), "{who:?}: x32: {report}");
            assert_eq!(step("openat2"), "-1/38", "{who:?}: openat2: {report}");
        }
        for name in ["chmod_755", "chmod_640", "cp_p", "tar_c", "tar_x"] {
            assert_eq!(
                step(name),
                "0",
                "{who:?}: {name} failed: {report} {}",
                stderr(&out)
            );
        }
        let modes: Vec<&str> = report
            .lines()
            .filter(|l| l.chars().all(|c| c.is_ascii_digit()))
            .collect();
        assert_eq!(modes, ["755", "640", "640", "750"], "{who:?}: {report}");
        assert!(report.lines().any(|l| l == "a"), "{who:?}: {report}");
        assert_eq!(
            fs::metadata(&outside_file).expect("stat").mode(),
            outside_mode,
            "{who:?}: the outside file's mode changed"
        );
        assert_eq!(set_id_files(&w.ws), [], "{who:?}: {report}");
        assert_eq!(w.sentinel(), "untouched", "{who:?}");
    }
}

/// A launcher started inside another launch: a process of the outer domain (outside the inner
/// monitor's tree) seizes the inner payload, so the inner monitor can never reap it. The inner
/// launcher must still return (its payload is a zombie, nothing of its tree runs) and the outer
/// one then kills the tracer. The inner payload starts no process once its pid is out: a
/// seized process stops at every signal (a child's SIGCHLD) until its tracer resumes it.
#[test]
fn a_tracer_outside_a_nested_launchers_tree_does_not_hang_it() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let tracer = format!(
            "import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
with open('{ws}/tracer-pid', 'w') as f:
    f.write(str(os.getpid()))
pid = ''
for _ in range(500):
    if os.path.exists('{ws}/p2-pid'):
        pid = open('{ws}/p2-pid').read()
        if pid.endswith('\\n'):
            break
    time.sleep(0.01)
if libc.ptrace(0x4206, int(pid), 0, 0) != 0:
    sys.exit('seize failed: %d' % ctypes.get_errno())
open('{ws}/seized', 'w').close()
while True:
    with open('{ws}/ticks', 'a') as f:
        f.write('t\\n')
    time.sleep(0.1)
"
        );
        let inner = format!(
            "echo $$ > {ws}/p2-pid
             until [ -e {ws}/seized ] || [ $SECONDS -ge 60 ]; do :; done"
        );
        let outer = format!(
            "/usr/bin/python3 -c {tracer} </dev/null >/dev/null 2>&1 &
             {launcher} --ro / --rw {ws} --rw /dev/null -- bash -c {inner}
             echo inner=$?",
            tracer = shell_quote(&tracer),
            launcher = shell_quote(launcher_path()),
            inner = shell_quote(&inner),
        );
        let mut child = launcher(who)
            .args(["--ro", "/", "--rw", ws, "--rw", "/dev/null", "--"])
            .args(["bash", "-c", &outer])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let status = wait_within(&mut child, Duration::from_secs(60), &w, who);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut out)
            .expect("read");
        assert!(
            w.ws.join("seized").exists(),
            "{who:?}: the seize never happened: {out}"
        );
        assert_eq!(status.code(), Some(0), "{who:?}: {status:?} {out}");
        // The inner launcher lost its payload's status to the tracer: a launcher failure.
        assert!(
            out.contains(&format!("inner={FAILURE_EXIT_CODE}")),
            "{who:?}: {out}"
        );
        assert_tracer_gone(&w, who);
    }
}

/// Inside a launch, `openat2` is refused (the setuid guard): a nested launcher opens its paths
/// one component at a time and still refuses a symlink anywhere in them.
#[test]
fn a_nested_launcher_works_and_still_refuses_symlinked_paths() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let link = w.ws.join("link");
        std::os::unix::fs::symlink(&w.outside, &link).expect("symlink");
        let launcher_q = shell_quote(launcher_path());
        let script = format!(
            "{launcher_q} --ro / --rw {ws} -- sh -c 'echo in > {ws}/nested'; echo plain=$?
             {launcher_q} --ro / --rw {link} -- sh -c 'echo x > {link}/through'; echo link=$?
             {launcher_q} --ro / --rw {ws}/link/sentinel -- sh -c 'echo x > {ws}/link/sentinel'; echo file=$?
             {launcher_q} --ro /proc/self/root/ --rw {ws} -- true; echo magic=$?",
            link = link.display()
        );
        let out = launch_as(who, &["--ro", "/", "--rw", ws], &script);
        let report = stdout(&out);
        assert!(
            report.contains("plain=0\n"),
            "{who:?}: {report} {}",
            stderr(&out)
        );
        for name in ["link", "file", "magic"] {
            assert!(
                report.contains(&format!("{name}={FAILURE_EXIT_CODE}\n")),
                "{who:?}: {name}: {report} {}",
                stderr(&out)
            );
        }
        assert!(
            stderr(&out).contains("a component is a symbolic link"),
            "{who:?}: {}",
            stderr(&out)
        );
        assert_eq!(
            fs::read_to_string(w.ws.join("nested")).expect("nested"),
            "in\n"
        );
        assert!(!w.outside.join("through").exists(), "{who:?}");
        assert_eq!(w.sentinel(), "untouched", "{who:?}");
    }
}

/// `chmod(path, 04755)` through the 32-bit `int 0x80` entry of x86_64 (i386 syscall 15), from
/// code in low memory so the path fits a 32-bit register. Prints `int80=<result>` if it returns.
#[cfg(target_arch = "x86_64")]
const INT80_CHMOD: &str = r#"
import ctypes, mmap, sys
path = sys.argv[1].encode() + b'\0'
m = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40,  # MAP_32BIT
              prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
assert base < 2**32, hex(base)
m[256:256 + len(path)] = path
# push rbx; mov eax, 15; mov ebx, path; mov ecx, 0o4755; int 0x80; pop rbx; ret
code = (b'\x53\xb8' + (15).to_bytes(4, 'little') + b'\xbb' + (base + 256).to_bytes(4, 'little')
        + b'\xb9' + (0o4755).to_bytes(4, 'little') + b'\xcd\x80\x5b\xc3')
m[0:len(code)] = code
print('int80=%d' % ctypes.CFUNCTYPE(ctypes.c_int)(base)(), flush=True)
"#;

/// x86_64 only (int 0x80 is its 32-bit entry point): not built, so not listed, elsewhere.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_32_bit_syscall_entry_cannot_bypass_the_setuid_guard() {
    // The premise: outside the launcher the 32-bit entry works on this host.
    let control = tempfile::NamedTempFile::new_in(SCRATCH_BASE).expect("control");
    fs::set_permissions(control.path(), fs::Permissions::from_mode(0o644)).expect("chmod");
    let direct = Command::new("/usr/bin/python3")
        .args(["-c", INT80_CHMOD])
        .arg(control.path())
        .output()
        .expect("python");
    // Without a 32-bit entry on this kernel the bypass cannot even be tried; the guarded run
    // below must still leave the mode alone, but cannot be killed by the guard.
    let has_int80 = fs::metadata(control.path()).expect("stat").mode() & 0o7777 == 0o4755;
    if !has_int80 {
        eprintln!(
            "note: no 32-bit entry on this kernel ({}); only the mode is checked",
            stdout(&direct)
        );
    }
    for who in identities() {
        let w = world();
        let target = w.ws.join("target");
        let script = format!(
            "echo x > {t}; chmod 644 {t}; /usr/bin/python3 -c {code} {t}; echo rc=$?",
            t = target.display(),
            code = shell_quote(INT80_CHMOD)
        );
        let out = launch_as(who, &["--ro", "/", "--rw", w.ws()], &script);
        let report = stdout(&out);
        assert!(!report.contains("int80=0"), "{who:?}: {report}");
        // Killed by the guard: SIGSYS (31).
        assert!(
            !has_int80 || report.contains("rc=159"),
            "{who:?}: {report} {}",
            stderr(&out)
        );
        assert_eq!(
            fs::metadata(&target).expect("stat").mode() & 0o7777,
            0o644,
            "{who:?}"
        );
    }
}

#[test]
fn protected_paths_stay_unwritten_while_the_rest_of_the_directory_is_writable() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        let git = w.ws.join(".git");
        fs::create_dir_all(git.join("hooks")).expect("hooks");
        fs::write(git.join("config"), "[core]\n").expect("config");
        for p in [&git, &git.join("hooks")] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o777)).expect("chmod");
        }
        fs::set_permissions(git.join("config"), fs::Permissions::from_mode(0o666)).expect("chmod");
        let (g, hooks, config) = (
            git.to_str().expect("utf8").to_owned(),
            format!("{}/.git/hooks", ws),
            format!("{}/.git/config", ws),
        );
        let script = format!(
            "cd {ws}; printf x > .git/hooks/pre-commit; printf evil >> .git/config; \
             printf y > .git/config.lock && mv -f .git/config.lock .git/config; \
             mv .git .git2; rm -rf .git/hooks; ln .git/config cfg; \
             umount .git/hooks; mount -o remount,rw .git/hooks; \
             printf ok > .git/index; printf ok > inside"
        );
        let out = launch_as(
            who,
            &[
                "--ro",
                "/",
                "--rw",
                ws,
                "--rw",
                "/dev/null",
                "--pin",
                &g,
                "--protect",
                &hooks,
                "--protect",
                &config,
            ],
            &script,
        );
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("Read-only file system"), "{who:?}: {err}");
        assert!(err.contains("Device or resource busy"), "{who:?}: {err}");
        assert_eq!(
            fs::read_to_string(git.join("config")).expect("config"),
            "[core]\n",
            "{who:?}"
        );
        assert!(!git.join("hooks/pre-commit").exists(), "{who:?}");
        assert!(
            !w.ws.join(".git2").exists() && !w.ws.join("cfg").exists(),
            "{who:?}"
        );
        assert_eq!(fs::read_to_string(git.join("index")).expect("index"), "ok");
        assert_eq!(
            fs::read_to_string(w.ws.join("inside")).expect("inside"),
            "ok"
        );
        // Nothing of the private namespace reached the host.
        let mounts = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        assert!(!mounts.contains(ws), "{who:?}: a bind leaked to the host");
    }
}

#[test]
fn the_probe_says_whether_this_host_lets_the_launcher_protect_paths() {
    for who in identities() {
        let out = launcher(who).arg("--probe").output().expect("probe");
        let report = ProbeReport::parse(&stdout(&out)).expect("report");
        // Root may always make a mount namespace; a user may when user namespaces are allowed,
        // as on the reference machine and in CI.
        let userns =
            fs::read_to_string("/proc/sys/user/max_user_namespaces").is_ok_and(|n| n.trim() != "0");
        if who == Who::Root || userns {
            assert!(report.protect, "{who:?}: {}", stdout(&out));
        }
        let protect_flag = format!("\"protect\":{}", report.protect);
        assert!(stdout(&out).contains(&protect_flag), "{}", stdout(&out));
    }
}

#[test]
fn the_payload_makes_no_user_namespace_of_its_own_and_threads_still_start() {
    for who in identities() {
        let w = world();
        let ws = w.ws();
        // unshare(2) with CLONE_NEWUSER (the unshare tool, and the raw call), and clone3, which
        // must say ENOSYS so that glibc falls back to clone for threads.
        let python = "import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.unshare(0x10000000)  # CLONE_NEWUSER
print('unshare=%d/%d' % (rc, ctypes.get_errno()))
rc = libc.syscall(435, None, 0)
print('clone3=%d/%d' % (rc, ctypes.get_errno()))
t = threading.Thread(target=lambda: print('thread=ran'))
t.start(); t.join()
";
        let script = format!(
            "unshare --user true 2>/dev/null; echo unshare_user=$?
             unshare --user --map-root-user true 2>/dev/null; echo map_root=$?
             /usr/bin/python3 -c {python}
             (echo subshell=ran)",
            python = shell_quote(python),
        );
        let out = launch_as(
            who,
            &["--ro", "/", "--rw", ws, "--rw", "/dev/null"],
            &script,
        );
        let report = stdout(&out);
        for line in [
            "unshare_user=1",
            "map_root=1",
            "unshare=-1/1",
            "clone3=-1/38",
            "thread=ran",
            "subshell=ran",
        ] {
            assert!(
                report.lines().any(|l| l == line),
                "{who:?}: no {line:?} in {report} {}",
                stderr(&out)
            );
        }
    }
}

/// Without Landlock's signal scoping (`--abi-cap 2`) the payload shares the monitor's uid, yet
/// it can neither stop nor kill the monitor (whose death would leave the tree running): by pid,
/// by its process group, by `kill(-1)` (only tried unprivileged: as root a broken guard would
/// kill the host), by `tgkill`, by a pidfd or a `/proc/<pid>` descriptor, or by `SIGIO`. The
/// monitor is still there afterwards to mirror the payload's exit.
#[test]
fn the_monitor_is_out_of_the_payloads_reach_without_signal_scoping() {
    let w = world();
    for who in identities() {
        let all = if who == Who::Unprivileged {
            "kill -KILL -1 2>/dev/null; echo all=$?"
        } else {
            "echo all=1"
        };
        let script = format!(
            r#"m=$PPID; g=$(ps -o pgid= -p $m | tr -d ' ')
kill -STOP $m 2>/dev/null; echo pid=$?
kill -STOP -- -$g 2>/dev/null; echo group=$?
{all}
python3 - "$m" <<'PY'
import fcntl, os, signal, sys
m = int(sys.argv[1])
def tried(name, f):
    try:
        f(); print(name + "=0")
    except OSError as e:
        print(name + "=" + str(e.errno))
tried("pidfd", lambda: os.pidfd_open(m))
d = os.open("/proc/%d" % m, os.O_RDONLY | os.O_DIRECTORY)
tried("procfd", lambda: signal.pidfd_send_signal(d, signal.SIGSTOP))
r, _ = os.pipe()
tried("setown", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, m))
PY
echo alive=$(ps -o stat= -p $m)"#
        );
        let out = launch_as(
            who,
            &["--abi-cap", "2", "--ro", "/", "--rw", w.ws()],
            &script,
        );
        let text = stdout(&out);
        assert!(out.status.success(), "{who:?}: {text} {}", stderr(&out));
        for refused in [
            "pid=1", "group=1", "all=1", "pidfd=1", "procfd=1", "setown=1",
        ] {
            assert!(
                text.lines().any(|l| l == refused),
                "{who:?}: expected {refused}: {text}"
            );
        }
        assert!(
            text.lines()
                .any(|l| l.starts_with("alive=") && !l.contains('T')),
            "{who:?}: the monitor was stopped: {text}"
        );
    }
}
