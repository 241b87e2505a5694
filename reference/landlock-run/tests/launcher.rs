//! The launcher on the real Landlock kernel of this host: what lands on disk, what does not, and
//! how it reports failure. Landlock is a hard requirement of these tests (kernel 6.18, ABI 7 on
//! the reference machine); a host without it fails them loudly rather than skipping.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use landlock_run::{FAILURE_EXIT_CODE, PARTIAL_NOTICE, ProbeReport};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_landlock-run");

struct World {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = fs::canonicalize(dir.path()).expect("canonical");
    let ws = root.join("ws");
    let outside = root.join("outside");
    fs::create_dir_all(&ws).expect("mkdir ws");
    fs::create_dir_all(&outside).expect("mkdir outside");
    fs::write(outside.join("sentinel"), "untouched").expect("sentinel");
    World {
        _dir: dir,
        ws,
        outside,
    }
}

fn launch(args: &[&str], script: &str) -> Output {
    Command::new(LAUNCHER)
        .args(args)
        .args(["--", "bash", "-c", script])
        .output()
        .expect("spawn launcher")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn inside_lands_outside_is_denied_and_the_sentinel_is_untouched() {
    let w = world();
    let ws = w.ws.to_str().expect("utf8");
    let script = format!(
        "printf new > {ws}/inside; printf evil > {out}/sentinel; printf new > {out}/created; printf x > /dev/null",
        out = w.outside.display()
    );
    let out = launch(&["--ro", "/", "--rw", ws, "--rw", "/dev/null"], &script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(w.ws.join("inside")).expect("inside"),
        "new"
    );
    assert_eq!(
        fs::read_to_string(w.outside.join("sentinel")).expect("sentinel"),
        "untouched"
    );
    assert!(!w.outside.join("created").exists());
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains(PARTIAL_NOTICE));
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
    let (ok, capped) = run(&["--probe", "--abi-cap", "1"]);
    assert!(ok && capped.usable);
    assert_eq!((capped.enforcement, capped.abi), ("partial", 1));
    assert!(!Path::new(&format!("/tmp/landlock-run-probe-{}", std::process::id())).exists());
}

#[test]
fn rules_follow_execve_into_grandchildren() {
    let w = world();
    let script = format!(
        "bash -c 'sh -c \"printf x > {}/deep\"'",
        w.outside.display()
    );
    let out = launch(
        &["--ro", "/", "--rw", w.ws.to_str().expect("utf8")],
        &script,
    );
    assert!(!out.status.success());
    assert!(!w.outside.join("deep").exists());
}
