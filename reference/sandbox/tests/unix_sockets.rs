//! A deployment's allowed unix sockets ([`sandbox::check_unix_sockets`]), checked before anything
//! runs: real sockets, files and directories; each bad path refused with its own code, a good one
//! handed back canonical.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use sandbox::{ConfinedMode, ProviderPolicy, check_unix_sockets};
use sandbox_test_support::scratch_root;

fn policy(ws: &std::path::Path, sockets: Vec<PathBuf>) -> ProviderPolicy {
    let mut p =
        ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws).with_roots(|r| r.with_temp_dir(None));
    p.roots.allow_unix_sockets = sockets;
    p
}

fn refusal(p: &ProviderPolicy) -> String {
    check_unix_sockets(p).expect_err("refused").to_string()
}

#[test]
fn each_bad_socket_path_is_refused_with_its_code_and_a_good_one_comes_back_canonical() {
    let (_base, root) = scratch_root("sockets-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("ws");
    let outside = root.join("agent.sock");
    let _listener = UnixListener::bind(&outside).expect("bind outside");
    let inside = ws.join("inner.sock");
    let _inner = UnixListener::bind(&inside).expect("bind inside");
    let file = root.join("plain");
    std::fs::write(&file, "x").expect("file");

    assert_eq!(check_unix_sockets(&policy(&ws, vec![])).ok(), Some(vec![]));
    assert_eq!(
        check_unix_sockets(&policy(&ws, vec![outside.clone()])).ok(),
        Some(vec![outside.clone()])
    );
    let relative = refusal(&policy(&ws, vec![PathBuf::from("agent.sock")]));
    assert!(relative.contains("UNIX_SOCKET_RELATIVE"), "{relative}");
    let missing = refusal(&policy(&ws, vec![root.join("none.sock")]));
    assert!(missing.contains("UNIX_SOCKET_MISSING"), "{missing}");
    let plain = refusal(&policy(&ws, vec![file]));
    assert!(plain.contains("UNIX_SOCKET_NOT_A_SOCKET"), "{plain}");
    let in_ws = refusal(&policy(&ws, vec![inside]));
    assert!(in_ws.contains("UNIX_SOCKET_NOT_GRANTABLE"), "{in_ws}");
    // Spelled through /proc: another process's view of the tree, whatever it resolves to.
    let via_proc = PathBuf::from(format!("/proc/{}/root", std::process::id()))
        .join(outside.strip_prefix("/").expect("absolute"));
    let proc_ = refusal(&policy(&ws, vec![via_proc]));
    assert!(proc_.contains("UNIX_SOCKET_NOT_GRANTABLE"), "{proc_}");
}
