//! The confined shell as a user notices it: a broken sandbox is SANDBOX_UNAVAILABLE with the
//! runner's words (never a failed command), timeouts and cancellation kill the whole process tree,
//! long output is cut visibly.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sandbox::SandboxMode;
use sandbox_local::{Backend, LocalConfig, OperatorRunner};
use sandbox_policy::Session;
use sandbox_test_support::scratch_root;
use sandbox_tools::tools::{ToolOutput, Toolbox};
use serde_json::{Value, json};
use support::{call, confined_toolbox};

mod support;

fn fake(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/fake-runners")
        .join(name)
}

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    session: Session,
    tools: Toolbox,
}

fn setup(config: LocalConfig) -> Setup {
    let (dir, ws) = scratch_root("shell-test-");
    let tools = confined_toolbox(SandboxMode::WorkspaceWrite, &ws, config, None);
    Setup {
        session: Session::new("s", &ws),
        _dir: dir,
        ws,
        tools,
    }
}

impl Setup {
    fn call(&self, tool: &str, args: Value) -> ToolOutput {
        call(&self.tools, &self.session, Some("a"), "c", tool, &args)
    }
}

fn refusing_runner() -> LocalConfig {
    LocalConfig {
        operator: Some(
            OperatorRunner::new(vec![fake("bwrap-refuses").into()], &["bwrap: "]).expect("runner"),
        ),
        ..LocalConfig::default()
    }
}

#[test]
fn a_foreground_runner_failure_is_sandbox_unavailable_with_the_runners_words() {
    let s = setup(refusing_runner());
    let out = s.call("bash", json!({ "command": "printf ran > canary" }));
    assert_eq!(out.code, "SANDBOX_UNAVAILABLE", "{out:?}");
    assert!(
        out.text.contains("No permissions to create new namespace"),
        "{}",
        out.text
    );
    assert_eq!(out.facts.to_json()["ran"], false);
    assert!(!s.ws.join("canary").exists(), "the command must never run");
}

#[test]
fn a_background_runner_failure_is_stamped_on_the_task() {
    let s = setup(refusing_runner());
    let started = s.call(
        "bash",
        json!({ "command": "printf ran > canary", "run_in_background": true }),
    );
    assert_eq!(started.code, "STARTED");
    let out = s.call(
        "bash_output",
        json!({ "task_id": started.facts.to_json()["task_id"] }),
    );
    assert_eq!(out.code, "SANDBOX_UNAVAILABLE", "{out:?}");
    assert_eq!(out.facts.to_json()["runner_failed"], true);
    assert!(!s.ws.join("canary").exists());
}

/// A payload that leaves three writers behind (a plain background job, a `setsid` daemon and a
/// double fork), each writing into the workspace 600 ms later, then waits forever.
/// Three writers (a background job, a `setsid` daemon, a double-forked orphan) that each wait for
/// `go`, which the test makes only after the call has ended, then write: a survivor writes.
const LEAVES_WRITERS: &str = "w() { while [ ! -e go ]; do sleep 0.05; done; echo late > \"$1\"; }; (w late1) & setsid sh -c 'while [ ! -e go ]; do sleep 0.05; done; echo late > late2' & ( (w late3) & ) ; echo started > started; sleep 300";

/// True when none of the writers [`LEAVES_WRITERS`] left wrote anything once told to, after the
/// call ended. (A survivor polls `go` every 50 ms; 1.2 s gives it room on a loaded host.)
fn no_writer_survived(ws: &Path) -> Result<(), String> {
    std::fs::write(ws.join("go"), "").map_err(|e| format!("go: {e}"))?;
    std::thread::sleep(Duration::from_millis(1200));
    let late: Vec<&str> = ["late1", "late2", "late3"]
        .into_iter()
        .filter(|f| ws.join(f).exists())
        .collect();
    if late.is_empty() {
        Ok(())
    } else {
        Err(format!("processes outlived the call and wrote {late:?}"))
    }
}

#[test]
fn a_timeout_kills_the_whole_tree_setsid_daemons_included_and_says_so() {
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let s = setup(LocalConfig::only(backend));
        let out = s.call(
            "bash",
            json!({ "command": LEAVES_WRITERS, "timeout_ms": 2000 }),
        );
        assert_eq!(out.facts.to_json()["timed_out"], true, "{backend}: {out:?}");
        assert!(out.text.contains("timed out"), "{backend}: {}", out.text);
        assert!(s.ws.join("started").exists(), "{backend}: it never ran");
        no_writer_survived(&s.ws).unwrap_or_else(|e| panic!("{backend}: {e}"));
    }
}

#[test]
fn cancelling_a_background_task_kills_its_tree_setsid_daemons_included() {
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let s = setup(LocalConfig::only(backend));
        let started = s.call(
            "bash",
            json!({ "command": LEAVES_WRITERS, "run_in_background": true }),
        );
        let task = started.facts.to_json()["task_id"].clone();
        for _ in 0..500 {
            if s.ws.join("started").exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(s.ws.join("started").exists(), "{backend}: it never ran");
        assert_eq!(
            s.call("bash_cancel", json!({ "task_id": task })).code,
            "CANCELLED"
        );
        let out = s.call("bash_output", json!({ "task_id": task }));
        assert_eq!(out.facts.to_json()["cancelled"], true, "{backend}: {out:?}");
        no_writer_survived(&s.ws).unwrap_or_else(|e| panic!("{backend}: {e}"));
    }
}

#[test]
fn a_finished_call_leaves_no_daemon_behind() {
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let s = setup(LocalConfig::only(backend));
        let out = s.call(
            "bash",
            json!({ "command": "setsid sh -c 'while [ ! -e go ]; do sleep 0.05; done; echo late > late2' & ( (while [ ! -e go ]; do sleep 0.05; done; echo late > late3) & ) ; echo started > started" }),
        );
        assert_eq!(out.code, "OK", "{backend}: {out:?}");
        no_writer_survived(&s.ws).unwrap_or_else(|e| panic!("{backend}: {e}"));
    }
}

#[test]
fn long_output_is_cut_visibly() {
    let s = setup(LocalConfig::only(Backend::Bwrap));
    let out = s.call(
        "bash",
        json!({ "command": "head -c 2000000 /dev/zero | tr '\\0' a" }),
    );
    assert_eq!(out.code, "OK");
    assert!(
        out.text.contains("[output cut: "),
        "the cut must be visible"
    );
    assert!(out.text.len() < 600_000);
    // What was cut is a fact too, machine-readable: the bytes read and not kept.
    assert_eq!(
        out.facts.to_json()["dropped"]["stdout"],
        2_000_000 - sandbox_tools::shell::OUTPUT_LIMIT as u64,
        "{}",
        out.facts
    );
    assert_eq!(out.facts.to_json()["dropped"]["stderr"], 0);
}

#[test]
fn a_finished_task_reads_the_same_every_time() {
    let s = setup(LocalConfig::only(Backend::Landlock));
    let started = s.call(
        "bash",
        json!({ "command": "echo done", "run_in_background": true }),
    );
    let task = started.facts.to_json()["task_id"].clone();
    let first = s.call("bash_output", json!({ "task_id": task, "wait_ms": 10000 }));
    let second = s.call("bash_output", json!({ "task_id": task, "wait_ms": 0 }));
    assert_eq!(first.code, "OK", "{first:?}");
    assert_eq!(
        second.code, "OK",
        "a finished task read RUNNING again: {second:?}"
    );
    assert_eq!(first.text, second.text);
}

#[test]
fn waiting_on_one_task_never_blocks_starting_or_cancelling_another() {
    let s = Arc::new(setup(LocalConfig::only(Backend::Landlock)));
    let slow = s.call(
        "bash",
        json!({ "command": "sleep 30", "run_in_background": true }),
    );
    let slow_id = slow.facts.to_json()["task_id"].clone();
    let reader = {
        let s = Arc::clone(&s);
        let id = slow_id.clone();
        std::thread::spawn(move || {
            s.call("bash_output", json!({ "task_id": id, "wait_ms": 20000 }))
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let started_at = std::time::Instant::now();
    let other = s.call(
        "bash",
        json!({ "command": "true", "run_in_background": true }),
    );
    assert_eq!(other.code, "STARTED", "{other:?}");
    let cancelled = s.call("bash_cancel", json!({ "task_id": slow_id }));
    assert_eq!(cancelled.code, "CANCELLED", "{cancelled:?}");
    // Blocked on the reader, start and cancel would return only when its 20 s wait ran out,
    // and the reader would then have read the task still running, not cancelled: the order of
    // events decides, the clock is only a guard with room for a loaded host.
    assert!(
        started_at.elapsed() < Duration::from_secs(20),
        "start and cancel waited on a reader: {:?}",
        started_at.elapsed()
    );
    let read = reader.join().expect("reader");
    assert_eq!(
        read.facts.to_json()["cancelled"],
        true,
        "the reader did not see the cancel end its wait: {read:?}"
    );
}

/// A payload planting git's code surface where no mount covers it: a new `.git/commondir` and a
/// nested repository's hook, both pointing git at code of its own.
const PLANTS_GIT: &str = "mkdir -p .cache/g inner/.git/hooks && printf '../.cache/g\\n' > .git/commondir && printf x > inner/.git/hooks/pre-commit; echo planted";

fn git_init(ws: &Path) {
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(ws)
        .output()
        .expect("git");
    assert!(out.status.success());
}

#[test]
fn git_surface_planted_in_the_foreground_or_the_background_is_reverted_and_denied_before_the_result()
 {
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let s = setup(LocalConfig::only(backend));
        git_init(&s.ws);
        let fg = s.call("bash", json!({ "command": PLANTS_GIT }));
        assert!(fg.text.contains("planted"), "{backend:?}: {fg:?}");
        assert!(
            fg.text
                .contains("[sandbox: file access denied under workspace-write mode]"),
            "{backend:?}: {fg:?}"
        );
        assert!(!s.ws.join(".git/commondir").exists(), "{backend:?}");
        assert!(
            !s.ws.join("inner/.git/hooks/pre-commit").exists(),
            "{backend:?}"
        );
        let started = s.call(
            "bash",
            json!({ "command": PLANTS_GIT, "run_in_background": true }),
        );
        let task = started.facts.to_json()["task_id"].clone();
        let bg = s.call("bash_output", json!({ "task_id": task, "wait_ms": 20000 }));
        assert!(bg.text.contains("planted"), "{backend:?}: {bg:?}");
        assert!(
            bg.text
                .contains("[sandbox: file access denied under workspace-write mode]"),
            "{backend:?}: {bg:?}"
        );
        assert!(!s.ws.join(".git/commondir").exists(), "{backend:?}");
        assert!(
            !s.ws.join("inner/.git/hooks/pre-commit").exists(),
            "{backend:?}"
        );
    }
}
