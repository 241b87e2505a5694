//! `sandbox-agent --allow-socket PATH`: a bad socket allowance (relative, missing, not a socket,
//! inside the workspace) is refused before the agent starts, with its stable code on stderr, and
//! nothing is created (the sessions directory stays absent).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use sandbox_test_support::scratch_root;

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

#[test]
fn a_bad_socket_allowance_is_refused_before_the_agent_starts() {
    let (_dir, root) = scratch_root("agent-socket-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("ws");
    let in_ws = ws.join("own.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&in_ws).expect("bind");
    std::fs::write(root.join("plain"), "x").expect("write");
    let sessions = root.join("sessions");
    for (socket, code) in [
        (PathBuf::from("agent.sock"), "UNIX_SOCKET_RELATIVE"),
        (root.join("gone.sock"), "UNIX_SOCKET_MISSING"),
        (root.join("plain"), "UNIX_SOCKET_NOT_A_SOCKET"),
        (in_ws.clone(), "UNIX_SOCKET_NOT_GRANTABLE"),
    ] {
        let out = Command::new(AGENT)
            .arg("--sessions")
            .arg(&sessions)
            .arg("--workspace")
            .arg(&ws)
            .arg("--allow-socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .output()
            .expect("agent");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{socket:?}: {stderr}");
        assert!(stderr.contains(code), "{socket:?}: {stderr}");
        assert!(!sessions.exists(), "{socket:?}: the agent made its state");
    }
}
