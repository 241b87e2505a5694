//! The built agent driven by the official ACP clients, pinned: the TypeScript SDK
//! (`@agentclientprotocol/sdk` 2.4.0) and the Python SDK (`agent-client-protocol` 0.12.1), each
//! through its own driver in `tests/clients/`: new, select, prompt, escalate (allow and reject),
//! cancel (a `sleep 30` stops, and nothing of it remains when the agent answers), kill, load
//! (history replayed, ids unique). Every agent message is validated by the driver against its SDK's schema; the wire
//! transcripts are the named snapshots `typescript_client_transcript` and
//! `python_client_transcript`.
//!
//! The clients are installed by `ci/install-clients.sh` (what `.ci/run` calls). A missing or
//! different client fails these tests, naming that command; it never skips them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sandbox_test_support::scratch_dir;
use serde_json::Value;

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn not_installed(what: &str) -> ! {
    panic!(
        "{what}: the pinned official ACP clients are not installed; run `ci/install-clients.sh` \
         from the workspace root (npm ci + a Python venv under reference/sandbox-agent/tests/clients)"
    )
}

/// Runs a driver and checks what it reports; returns its transcript.
fn drive(label: &str, program: &Path, script: &str) -> Value {
    let work = scratch_dir("sandbox-agent-official-clients-");
    let started = Instant::now();
    let out = Command::new(program)
        .arg(clients().join(script))
        .arg(AGENT)
        .arg(work.path())
        .current_dir(clients())
        .output()
        .unwrap_or_else(|e| {
            not_installed(&format!("{label}: cannot run {}: {e}", program.display()))
        });
    let wall = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{label} driver failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{label} driver printed no report ({e}): {stderr}"));
    let failures = report["failures"].as_array().cloned().unwrap_or_default();
    assert!(
        failures.is_empty(),
        "{label} client saw the agent misbehave:\n{}",
        failures
            .iter()
            .map(|f| f.as_str().unwrap_or("?").to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "{label}: driver wall time {} ms, agent timings {}",
        wall.as_millis(),
        report["timings"]
    );
    stable_ids(report["transcript"].clone())
}

/// The agent's own request ids are random (the SDK makes UUIDs): each is named by its order.
fn stable_ids(mut transcript: Value) -> Value {
    let mut names: Vec<String> = Vec::new();
    if let Some(entries) = transcript.as_array_mut() {
        for entry in entries {
            // (`get_mut`, not indexing: indexing a missing id would insert a null one.)
            let Some(id) = entry.get_mut("message").and_then(|m| m.get_mut("id")) else {
                continue;
            };
            if let Some(text) = id
                .as_str()
                .filter(|t| t.len() == 36 && t.matches('-').count() == 4)
            {
                let n = match names.iter().position(|x| x == text) {
                    Some(n) => n,
                    None => {
                        names.push(text.to_owned());
                        names.len() - 1
                    }
                };
                *id = Value::String(format!("[agent request {}]", n + 1));
            }
        }
    }
    transcript
}

#[test]
fn typescript_sdk_client_drives_the_agent() {
    let manifest = clients().join("node_modules/@agentclientprotocol/sdk/package.json");
    let version = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned));
    if version.as_deref() != Some("2.4.0") {
        not_installed(&format!(
            "@agentclientprotocol/sdk is {version:?}, not 2.4.0"
        ));
    }
    let node = which::which("node").unwrap_or_else(|_| not_installed("node is not on PATH"));
    let transcript = drive("typescript", &node, "typescript_driver.mjs");
    insta::assert_json_snapshot!("typescript_client_transcript", transcript);
}

#[test]
fn python_sdk_client_drives_the_agent() {
    let python = clients().join(".venv/bin/python");
    let version = Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('agent-client-protocol'))",
        ])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if version.as_deref() != Some("0.12.1") {
        not_installed(&format!("agent-client-protocol is {version:?}, not 0.12.1"));
    }
    let transcript = drive("python", &python, "python_driver.py");
    insta::assert_json_snapshot!("python_client_transcript", transcript);
}
