//! The product path end to end on this host's real backends: a read-only session, a denied shell
//! write with the marker and the hint, one approved wider retry that lands on disk, the next plain
//! call denied again; and every refusal leaves the disk untouched.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sandbox::SandboxMode;
use sandbox_local::{Backend, LocalConfig};
use sandbox_policy::{ApprovalPolicy, Event, PolicyService, Session};
use sandbox_test_support::scratch_root;
use sandbox_tools::approval::{Decision, ScriptedApprover};
use sandbox_tools::fs::FileSystem;
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tools::{CallContext, ToolOutput, Toolbox};
use serde_json::{Value, json};
use support::{call, confined_toolbox};

mod support;

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    session: Session,
    approver: Arc<ScriptedApprover>,
    tools: Toolbox,
}

fn setup(backend: Backend, decisions: Vec<Decision>) -> Setup {
    let (dir, root) = scratch_root("tools-test-");
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let approver = Arc::new(ScriptedApprover::new(decisions));
    let tools = confined_toolbox(
        SandboxMode::ReadOnly,
        &ws,
        LocalConfig::only(backend),
        Some(approver.clone()),
    );
    Setup {
        session: Session::new("s1", &ws),
        _dir: dir,
        ws,
        approver,
        tools,
    }
}

impl Setup {
    fn call(&self, tool: &str, args: Value) -> ToolOutput {
        call(
            &self.tools,
            &self.session,
            Some("agent-1"),
            "call-1",
            tool,
            &args,
        )
    }
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

#[test]
fn denied_then_approved_retry_lands_and_the_next_call_is_denied_again() {
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let s = setup(backend, vec![Decision::AllowedOnce]);
        let target = s.ws.join("notes.txt");
        let command = "printf hello > notes.txt";

        let denied = s.call("bash", json!({ "command": command }));
        assert_eq!(denied.code, "DENIED", "{backend}: {denied:?}");
        assert!(
            denied
                .text
                .contains("[sandbox: file access denied under read-only mode]")
        );
        assert!(
            denied.text.contains("sandbox_permissions"),
            "the hint is at the point of denial"
        );
        assert_eq!(read(&target), None);

        let granted = s.call(
            "bash",
            json!({ "command": command, "sandbox_permissions": "workspace-write",
                    "justification": "save the notes the user asked for" }),
        );
        assert_eq!(granted.code, "OK", "{backend}: {granted:?}");
        assert_eq!(granted.facts.to_json()["mode"], "workspace-write");
        assert_eq!(granted.facts.to_json()["escalated"], true);
        assert_eq!(read(&target).as_deref(), Some("hello"));
        assert_eq!(s.approver.asked().len(), 1);
        assert!(s.approver.asked()[0].reason.contains("save the notes"));

        std::fs::remove_file(&target).expect("cleanup");
        let again = s.call("bash", json!({ "command": command }));
        assert_eq!(again.code, "DENIED", "the grant was for one call only");
        assert_eq!(again.facts.to_json()["mode"], "read-only");
        assert_eq!(read(&target), None);
        let events = s.session.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::ApprovalAsked { .. }))
        );
        assert!(
            events.iter().any(
                |e| matches!(e, Event::ApprovalDecided { outcome, .. } if outcome == "granted")
            )
        );
    }
}

#[test]
fn a_rejected_escalation_runs_nothing_and_says_so_in_the_fixed_words() {
    let s = setup(Backend::Bwrap, vec![Decision::Rejected]);
    let out = s.call(
        "bash",
        json!({ "command": "printf x > f", "sandbox_permissions": "workspace-write", "justification": "need it" }),
    );
    assert_eq!(out.code, "ESCALATION_REJECTED");
    assert_eq!(
        out.text,
        "the user rejected escalating this command to \"workspace-write\""
    );
    assert_eq!(read(&s.ws.join("f")), None);
}

#[test]
fn the_write_tool_shares_the_marker_and_the_escalation() {
    let s = setup(Backend::Landlock, vec![Decision::AllowedOnce]);
    let denied = s.call("write", json!({ "path": "a.txt", "content": "A" }));
    assert_eq!(denied.code, "FS_SANDBOX_DENIED");
    assert!(
        denied
            .text
            .starts_with("[sandbox: file access denied under read-only mode]")
    );
    assert_eq!(read(&s.ws.join("a.txt")), None);
    let granted = s.call(
        "write",
        json!({ "path": "a.txt", "content": "A", "sandbox_permissions": "workspace-write", "justification": "the user asked" }),
    );
    assert_eq!(granted.code, "OK", "{granted:?}");
    assert_eq!(read(&s.ws.join("a.txt")).as_deref(), Some("A"));
}

#[test]
fn bad_escalation_input_gets_its_own_error_and_no_side_effect() {
    let s = setup(Backend::Bwrap, vec![Decision::AllowedOnce; 8]);
    let cases = [
        (
            json!({ "command": "printf x > f", "sandbox_permissions": "root" , "justification": "j" }),
            "ESCALATION_UNKNOWN_MODE",
        ),
        (
            json!({ "command": "printf x > f", "sandbox_permissions": "read-only" , "justification": "j" }),
            "ESCALATION_UNKNOWN_MODE",
        ),
        (
            json!({ "command": "printf x > f", "sandbox_permissions": "workspace-write", "justification": "" }),
            "ESCALATION_EMPTY_JUSTIFICATION",
        ),
        (
            json!({ "command": "printf x > f", "sandbox_permissions": "workspace-write", "justification": " \t\n" }),
            "ESCALATION_EMPTY_JUSTIFICATION",
        ),
        (
            json!({ "command": "printf x > f", "sandbox_permissions": "workspace-write" }),
            "ESCALATION_BAD_PAIRING",
        ),
        (
            json!({ "command": "printf x > f", "justification": "j" }),
            "ESCALATION_BAD_PAIRING",
        ),
        (
            json!({ "command": "printf x > f", "sandbox_permissions": 3, "justification": "j" }),
            "BAD_ARGUMENTS",
        ),
        (
            json!({ "command": "printf x > f", "extra": true }),
            "BAD_ARGUMENTS",
        ),
    ];
    for (args, code) in cases {
        let out = s.call("bash", args.clone());
        assert_eq!(out.code, code, "{args}: {out:?}");
        assert_eq!(read(&s.ws.join("f")), None, "{args} had a side effect");
    }
    assert!(
        s.approver.asked().is_empty(),
        "nobody may be asked for a malformed request"
    );
}

#[test]
fn a_non_confining_composition_advertises_no_fields_and_refuses_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, dir.path()).expect("policy"));
    let tools = Toolbox::new(
        policy,
        Arc::new(ShellExecutor::unconfined()),
        FileSystem::Local,
        Some(Arc::new(ScriptedApprover::new([Decision::AllowedOnce]))),
    );
    let schemas = tools.schemas().to_string();
    assert!(!schemas.contains("sandbox_permissions"), "{schemas}");
    let session = Session::new("s", dir.path());
    let ctx = CallContext {
        session: Some(&session),
        agent: Some("a"),
        call_id: "c",
    };
    let out = tools.call(
        "bash",
        &json!({ "command": "printf x > f", "sandbox_permissions": "workspace-write", "justification": "j" }),
        &ctx,
    );
    assert_eq!(out.code, "ESCALATION_NOT_ADVERTISED");
    assert!(!dir.path().join("f").exists());
    let plain = tools.call("bash", &json!({ "command": "printf x > f" }), &ctx);
    assert_eq!(
        plain.code, "OK",
        "an unconfined shell is honestly unconfined"
    );
    assert_eq!(plain.facts.to_json()["mode"], "danger-full-access");
}

#[test]
fn policy_never_refuses_without_asking_and_says_nobody_was_asked() {
    let s = setup(Backend::Bwrap, vec![Decision::AllowedOnce]);
    s.session
        .set_approval_policy(ApprovalPolicy::Never)
        .expect("append");
    let out = s.call(
        "bash",
        json!({ "command": "printf x > f", "sandbox_permissions": "workspace-write", "justification": "j" }),
    );
    assert_eq!(out.code, "ESCALATION_POLICY_NEVER");
    assert!(out.text.contains("nobody was asked"));
    assert!(!out.text.contains("user rejected"));
    assert!(s.approver.asked().is_empty());
}

#[test]
fn a_nul_byte_in_a_path_or_command_is_refused_cleanly() {
    let s = setup(Backend::Bwrap, vec![]);
    assert_eq!(
        s.call("write", json!({ "path": "a\u{0}b", "content": "x" }))
            .code,
        "BAD_ARGUMENTS"
    );
    assert_eq!(
        s.call("bash", json!({ "command": "true\u{0}" })).code,
        "BAD_ARGUMENTS"
    );
}

#[test]
fn the_fence_denies_an_escape_through_a_symlink_created_inside_the_workspace() {
    let s = setup(Backend::Bwrap, vec![]);
    s.session
        .set_sandbox_mode(SandboxMode::WorkspaceWrite)
        .expect("append");
    let outside = s.ws.parent().expect("parent").join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::os::unix::fs::symlink(&outside, s.ws.join("link")).expect("symlink");
    for path in ["link/x", "../outside/x"] {
        let out = s.call("write", json!({ "path": path, "content": "x" }));
        assert_eq!(out.code, "FS_SANDBOX_DENIED", "{path}");
    }
    assert!(!outside.join("x").exists());
    let inside = s.call(
        "write",
        json!({ "path": "deep/new/file.txt", "content": "y" }),
    );
    assert_eq!(inside.code, "OK", "{inside:?}");
    assert_eq!(read(&s.ws.join("deep/new/file.txt")).as_deref(), Some("y"));
}
