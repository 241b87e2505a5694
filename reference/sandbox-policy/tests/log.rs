//! The session log survives what a machine does to it: a process killed mid-append, a file cut
//! mid-line. Every earlier event reloads; a torn tail is dropped with a warning; a line that is
//! complete but wrong is an error naming its line, never reinterpreted.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sandbox::SandboxMode;
use sandbox_policy::log::LogError;
use sandbox_policy::{ApprovalPolicy, Event, PolicyService, Session, effective_sandbox_mode};

fn open(path: &Path) -> (Session, sandbox_policy::log::LoadReport) {
    Session::open("s", Path::new("/"), path).expect("open")
}

#[test]
fn events_survive_a_reopen_and_drive_resolve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl");
    {
        let (s, report) = open(&path);
        assert!(report.events.is_empty());
        s.append(Event::TurnStarted).expect("append");
        s.set_sandbox_mode(SandboxMode::WorkspaceWrite)
            .expect("append");
        s.set_approval_policy(ApprovalPolicy::Never)
            .expect("append");
        s.append(Event::TurnEnded).expect("append");
    }
    let (s, report) = open(&path);
    assert_eq!(report.dropped_tail, None);
    assert_eq!(report.events.len(), 4);
    let service = PolicyService::new(SandboxMode::ReadOnly, dir.path()).expect("service");
    assert_eq!(
        service.effective_mode(Some(&s)),
        SandboxMode::WorkspaceWrite
    );
    assert_eq!(service.effective_approval(Some(&s)), ApprovalPolicy::Never);
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(
        text.contains(r#"{"type":"sandbox/mode","mode":"workspace-write"}"#),
        "{text}"
    );
}

#[test]
fn a_log_cut_mid_line_reloads_every_earlier_event_and_stays_appendable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl");
    {
        let (s, _) = open(&path);
        for _ in 0..10 {
            s.set_sandbox_mode(SandboxMode::WorkspaceWrite)
                .expect("append");
            s.set_sandbox_mode(SandboxMode::ReadOnly).expect("append");
        }
    }
    let len = std::fs::metadata(&path).expect("meta").len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    file.set_len(len - 7).expect("truncate mid-line");
    drop(file);

    let (s, report) = open(&path);
    assert_eq!(report.events.len(), 19, "every complete event reloads");
    assert!(
        report
            .dropped_tail
            .as_deref()
            .is_some_and(|w| w.contains("torn last line"))
    );
    assert_eq!(
        effective_sandbox_mode(&report.events),
        Some(SandboxMode::WorkspaceWrite)
    );
    s.set_sandbox_mode(SandboxMode::DangerFullAccess)
        .expect("append after repair");
    drop(s);
    let (_, again) = open(&path);
    assert_eq!(again.dropped_tail, None);
    assert_eq!(again.events.len(), 20);
    assert_eq!(
        effective_sandbox_mode(&again.events),
        Some(SandboxMode::DangerFullAccess)
    );
}

#[test]
fn an_unknown_mode_in_a_durable_knob_event_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"turn/started\"}\n{\"type\":\"sandbox/mode\",\"mode\":\"full-access\"}\n",
    )
    .expect("write");
    match Session::open("s", Path::new("/"), &path) {
        Err(LogError::Invalid { line, message, .. }) => {
            assert_eq!(line, 2);
            assert!(
                message.contains("unknown sandbox mode \"full-access\""),
                "{message}"
            );
        }
        other => panic!("expected an invalid-line error, got {other:?}"),
    }
}

#[test]
fn an_unknown_network_in_a_durable_knob_event_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"sandbox/network\",\"network\":\"restricted\"}\n{\"type\":\"sandbox/network\",\"network\":\"offline\"}\n",
    )
    .expect("write");
    match Session::open("s", Path::new("/"), &path) {
        Err(LogError::Invalid { line, message, .. }) => {
            assert_eq!(line, 2);
            assert!(
                message.contains("unknown network mode \"offline\""),
                "{message}"
            );
        }
        other => panic!("expected an invalid-line error, got {other:?}"),
    }
}

/// The child half of the crash test (this same test, re-run with `SESSION_LOG_CRASH_CHILD`):
/// append forever until killed. No ignored test exists, so `--include-ignored` runs nothing
/// extra, and a renamed test fails (its child writes nothing).
fn crash_child_appends_until_killed(path: &Path) -> ! {
    let (s, _) = open(path);
    loop {
        let _ = s.set_sandbox_mode(SandboxMode::WorkspaceWrite);
        let _ = s.append(Event::RequestHeader {
            prompt: "x".repeat(4000),
        });
    }
}

#[test]
fn a_process_killed_while_appending_leaves_a_loadable_log() {
    if let Some(path) = std::env::var_os("SESSION_LOG_CRASH_CHILD") {
        crash_child_appends_until_killed(Path::new(&path));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl");
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "a_process_killed_while_appending_leaves_a_loadable_log",
                "--nocapture",
            ])
            .env("SESSION_LOG_CRASH_CHILD", &path)
            .spawn()
            .expect("spawn the writer");
        // Kill it while it writes: once the log has grown (a loaded host may take seconds to
        // start the writer), then a little later each round so the kill lands mid-append. The
        // 20 s guard is a writer that never writes (it stays under the mutation check's 30 s).
        let grown = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) <= grown
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(10 + 20 * round));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let (_, report) = open(&path);
        assert!(
            !report.events.is_empty(),
            "round {round}: the writer wrote nothing"
        );
        assert!(
            report
                .events
                .iter()
                .all(|e| matches!(e, Event::SandboxMode { .. } | Event::RequestHeader { .. }))
        );
    }
}
