//! The fs note: "a direct write with no per-call stamp is confined at the deployment
//! default". A caller cannot hand the filesystem a policy of its own (`write` takes a
//! `Stamp`, which only the policy service makes); one without a stamp writes as the
//! deployment default says.
use super::*;

#[test]
fn a_direct_write_is_confined_at_the_deployment_default() {
    let dir = sandbox_test_support::scratch_dir("unit-");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&outside).expect("outside");
    let code = |r: Result<(), FsError>| r.map(|()| "OK").unwrap_or_else(|e| e.code());
    let read_only = PolicyService::new(SandboxMode::ReadOnly, &ws)
        .expect("service")
        .with_temp_dir(None);
    assert_eq!(
        code(FileSystem::Fenced.write_direct(&ws.join("a"), "x", &read_only)),
        FS_SANDBOX_DENIED
    );
    let workspace_write = PolicyService::new(SandboxMode::WorkspaceWrite, &ws)
        .expect("service")
        .with_temp_dir(None);
    assert_eq!(
        code(FileSystem::Fenced.write_direct(&ws.join("a"), "x", &workspace_write)),
        "OK"
    );
    assert_eq!(
        code(FileSystem::Fenced.write_direct(&outside.join("b"), "x", &workspace_write)),
        FS_SANDBOX_DENIED
    );
    assert_eq!(
        code(FileSystem::Fenced.edit_direct(&ws.join("a"), "x", "y", &read_only)),
        FS_SANDBOX_DENIED
    );
    assert_eq!(std::fs::read_to_string(ws.join("a")).expect("a"), "x");
    assert!(!outside.join("b").exists());
}
