//! `sandboxctl` as a person uses it, on this host's real bwrap and Landlock: the JSON facts and
//! what is on disk afterwards.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const SANDBOXCTL: &str = env!("CARGO_BIN_EXE_sandboxctl");

/// A workspace and an outside directory under /var/tmp (outside /tmp, which workspace-write may
/// write).
struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    std::fs::create_dir_all("/var/tmp").expect("/var/tmp");
    let root = tempfile::Builder::new()
        .prefix("sandboxctl-test-")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let base = std::fs::canonicalize(root.path()).expect("canonical");
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&outside).expect("outside");
    Dirs {
        _root: root,
        ws,
        outside,
    }
}

fn run(args: &[&str], ws: &Path, script: &str) -> (Option<i32>, Value) {
    let out = Command::new(SANDBOXCTL)
        .arg("run")
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "bash", "-c", script])
        .output()
        .expect("run sandboxctl");
    let facts = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), facts)
}

#[test]
fn read_only_denies_a_workspace_write_and_the_file_stays_absent() {
    let d = dirs();
    let target = d.ws.join("f");
    let (code, facts) = run(
        &["--mode", "read-only"],
        &d.ws,
        &format!("printf x > {}", target.display()),
    );
    assert!(!target.exists());
    assert_ne!(code, Some(0));
    assert_eq!(facts["denied"], true, "{facts}");
    assert_eq!(facts["runner_failed"], false);
    assert_eq!(
        facts["marker"],
        "[sandbox: file access denied under read-only mode]"
    );
    assert_eq!(facts["mode"], "read-only");
}

#[test]
fn workspace_write_lands_inside_and_denies_outside_on_each_backend() {
    for backend in ["bwrap", "landlock"] {
        let d = dirs();
        let (inside, outside) = (d.ws.join("in"), d.outside.join("out"));
        let (code, facts) = run(
            &["--mode", "workspace-write", "--backend", backend],
            &d.ws,
            &format!("printf x > {}", inside.display()),
        );
        assert_eq!(code, Some(0), "{facts}");
        assert_eq!(std::fs::read_to_string(&inside).expect("inside"), "x");
        assert_eq!(facts["backend"], backend);
        assert_eq!(facts["enforcement"], "full");
        assert_eq!(facts["denied"], false);

        let (code, facts) = run(
            &["--mode", "workspace-write", "--backend", backend],
            &d.ws,
            &format!("printf x > {}", outside.display()),
        );
        assert_ne!(code, Some(0));
        assert!(!outside.exists(), "{backend} let a write escape");
        assert_eq!(facts["denied"], true, "{facts}");
        assert_eq!(facts["backend"], backend);
    }
}

#[test]
fn a_capped_launcher_reports_partial() {
    let d = dirs();
    let (_, facts) = run(
        &[
            "--mode",
            "read-only",
            "--backend",
            "landlock",
            "--abi-cap",
            "2",
        ],
        &d.ws,
        "true",
    );
    assert_eq!(facts["enforcement"], "partial", "{facts}");
}

#[test]
fn danger_full_access_never_reaches_a_provider() {
    let d = dirs();
    let target = d.outside.join("free");
    let (code, facts) = run(
        &[
            "--mode",
            "danger-full-access",
            "--bwrap",
            "/nonexistent/bwrap",
        ],
        &d.ws,
        &format!("printf x > {}", target.display()),
    );
    assert_eq!(code, Some(0));
    assert_eq!(facts["backend"], "none");
    assert!(target.exists());
}

#[test]
fn an_unknown_mode_is_refused_before_anything_runs() {
    let d = dirs();
    let canary = d.ws.join("canary");
    let out = Command::new(SANDBOXCTL)
        .args(["run", "--mode", "full-access", "--workspace"])
        .arg(&d.ws)
        .args(["--", "bash", "-c"])
        .arg(format!("printf x > {}", canary.display()))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown sandbox mode \"full-access\"")
            && stderr.contains("read-only, workspace-write, danger-full-access"),
        "{stderr}"
    );
    assert!(!canary.exists());
}

#[test]
fn a_signature_without_a_runner_command_is_bad_configuration() {
    let out = Command::new(SANDBOXCTL)
        .args([
            "run",
            "--mode",
            "read-only",
            "--runner-failure-signature",
            "x",
            "--",
            "true",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --runner-command"));
}

#[test]
fn probe_reports_both_linux_backends_usable_here() {
    let out = Command::new(SANDBOXCTL)
        .arg("probe")
        .output()
        .expect("probe");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let backend = |name: &str| {
        report["backends"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["backend"] == name))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(backend("bwrap")["usable"], true, "{report}");
    assert!(
        backend("bwrap")["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("bubblewrap"))
    );
    assert_eq!(backend("landlock")["usable"], true, "{report}");
    assert!(
        backend("landlock")["kernel_landlock_abi"]
            .as_u64()
            .is_some_and(|abi| abi >= 3)
    );
    assert_eq!(backend("seatbelt")["usable"], cfg!(target_os = "macos"));
    assert_eq!(report["selected"]["backend"], "bwrap");
}
