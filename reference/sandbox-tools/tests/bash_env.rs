//! Nothing the caller's environment asks bash to run (BASH_ENV) runs outside the sandbox: the
//! confined argv is spawned directly, so the only bash that starts is the confined one.
//! The test re-runs itself as a child process with BASH_ENV set, so no environment is mutated.

use sandbox::SandboxMode;
use sandbox_local::{Backend, LocalConfig};
use sandbox_policy::Session;
use sandbox_test_support::Dirs;
use serde_json::json;
use support::{call, confined_toolbox};

mod support;

#[test]
fn bash_env_runs_only_inside_the_sandbox() {
    if std::env::var_os("BASH_ENV_TEST_WS").is_some() {
        return check_under_bash_env();
    }
    let dirs = Dirs::new("bash-env-");
    let (base, ws, outside) = (&dirs.root, &dirs.ws, &dirs.outside);
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
        .env("BASH_ENV_TEST_WS", ws)
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
        let tools = confined_toolbox(SandboxMode::ReadOnly, &ws, LocalConfig::only(backend), None);
        let session = Session::new("s", &ws);
        let out = call(
            &tools,
            &session,
            None,
            "c",
            "bash",
            &json!({ "command": "true" }),
        );
        assert!(out.facts.to_json()["ran"] == true, "{backend}: {out:?}");
        let checked = ws.parent().expect("base").join("child-checked");
        let mut so_far = std::fs::read_to_string(&checked).unwrap_or_default();
        so_far.push_str(&format!("{backend} "));
        std::fs::write(&checked, so_far).expect("record the check");
    }
}
