//! Nothing the caller's environment asks bash to run (BASH_ENV) runs outside the sandbox: the
//! confined argv is spawned directly, so the only bash that starts is the confined one.
//! The test re-runs itself as a child process with BASH_ENV set, so no environment is mutated.

use std::sync::Arc;

use sandbox::SandboxMode;
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_policy::{PolicyService, Session};
use sandbox_tools::fs::FileSystem;
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tools::{CallContext, Toolbox};
use serde_json::json;

#[test]
fn bash_env_runs_only_inside_the_sandbox() {
    if std::env::var_os("BASH_ENV_TEST_WS").is_some() {
        return check_under_bash_env();
    }
    std::fs::create_dir_all("/var/tmp").expect("/var/tmp");
    let dir = tempfile::Builder::new()
        .prefix("bash-env-")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&outside).expect("outside");
    let hook = base.join("hook.sh");
    std::fs::write(
        &hook,
        format!("printf escaped > {}/canary\n", outside.display()),
    )
    .expect("hook");
    let child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "bash_env_runs_only_inside_the_sandbox",
            "--nocapture",
        ])
        .env("BASH_ENV", &hook)
        .env("BASH_ENV_TEST_WS", &ws)
        .output()
        .expect("re-run");
    assert!(
        child.status.success(),
        "{}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(!outside.join("canary").exists(), "BASH_ENV ran unconfined");
    // The child proves it ran the checks (a renamed test would run zero tests and pass).
    assert_eq!(
        std::fs::read_to_string(base.join("child-checked"))
            .ok()
            .as_deref(),
        Some("bwrap landlock "),
        "the child process never ran the checks"
    );
}

/// The child: BASH_ENV is set for this whole process; run a confined command on each backend.
fn check_under_bash_env() {
    let ws = std::path::PathBuf::from(std::env::var_os("BASH_ENV_TEST_WS").expect("ws"));
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, &ws).expect("policy"));
        let tools = Toolbox::new(
            policy,
            Arc::new(ShellExecutor::confining(Arc::new(LocalProvider::new(
                LocalConfig::only(backend),
            )))),
            FileSystem::Fenced,
            None,
        );
        let session = Session::new("s", &ws);
        let ctx = CallContext {
            session: Some(&session),
            agent: None,
            call_id: "c",
        };
        let out = tools.call("bash", &json!({ "command": "true" }), &ctx);
        assert!(out.facts.to_json()["ran"] == true, "{backend}: {out:?}");
        let checked = ws.parent().expect("base").join("child-checked");
        let mut so_far = std::fs::read_to_string(&checked).unwrap_or_default();
        so_far.push_str(&format!("{backend} "));
        std::fs::write(&checked, so_far).expect("record the check");
    }
}
