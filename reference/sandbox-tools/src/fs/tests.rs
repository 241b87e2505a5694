//! The fence matrix of the fs note, on the fence itself: what each spelling and edge of a
//! root does, checked on disk.
use super::*;

struct World {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn world() -> World {
    let dir = sandbox_test_support::scratch_dir("unit-");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&outside).expect("outside");
    World {
        _dir: dir,
        ws,
        outside,
    }
}

/// The deployment `mode` in `root`, and its stamp for a call with no session and no grant.
fn service(mode: SandboxMode, root: &Path) -> PolicyService {
    PolicyService::new(mode, root)
        .expect("service")
        .with_temp_dir(None)
}

fn policy(mode: SandboxMode, root: &Path) -> Stamp {
    service(mode, root).default_stamp().expect("stamp")
}

fn code(r: Result<(), FsError>) -> &'static str {
    r.map(|()| "OK").unwrap_or_else(|e| e.code())
}

#[test]
fn the_read_tool_refuses_fifos_devices_links_out_and_endless_files_at_once() {
    let w = world();
    std::fs::write(w.ws.join("a"), "inside").expect("a");
    std::fs::write(w.outside.join("secret"), "key").expect("secret");
    nix::unistd::mkfifo(
        &w.ws.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    std::os::unix::fs::symlink("/dev/zero", w.ws.join("notes.md")).expect("link");
    std::os::unix::fs::symlink(w.outside.join("secret"), w.ws.join("key")).expect("link");
    std::os::unix::fs::symlink(w.ws.join("a"), w.ws.join("same")).expect("link");
    let big = std::fs::File::create(w.ws.join("big")).expect("big");
    big.set_len(READ_LIMIT + 1).expect("sparse");
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let stamp = policy(mode, &w.ws);
        let read = |p: &Path| FileSystem::Fenced.read(p, &stamp).map_err(|e| e.code());
        // No writer: a blocking open would hold the turn forever.
        assert_eq!(read(&w.ws.join("pipe")), Err("FS_NOT_A_FILE"), "{mode}");
        assert_eq!(read(Path::new("/dev/zero")), Err("FS_NOT_A_FILE"), "{mode}");
        assert_eq!(read(&w.ws.join("notes.md")), Err("FS_LINK_OUT"), "{mode}");
        assert_eq!(read(&w.ws.join("key")), Err("FS_LINK_OUT"), "{mode}");
        assert_eq!(read(&w.ws.join("big")), Err("FS_TOO_LARGE"), "{mode}");
        // Named itself, the target outside is read; a link within the workspace is followed.
        assert_eq!(
            read(&w.outside.join("secret")),
            Ok("key".to_owned()),
            "{mode}"
        );
        assert_eq!(read(&w.ws.join("same")), Ok("inside".to_owned()), "{mode}");
    }
    // The diffs the agent shows read through the same door.
    assert_eq!(
        read_regular(&w.ws.join("pipe")).map_err(|e| e.code()),
        Err("FS_NOT_A_FILE")
    );
    // An edit of a FIFO is refused the same way, after the fence.
    let stamp = policy(SandboxMode::WorkspaceWrite, &w.ws);
    assert_eq!(
        code(FileSystem::Fenced.edit(&w.ws.join("pipe"), "a", "b", &stamp)),
        "FS_NOT_A_FILE"
    );
}

#[test]
fn the_root_itself_is_never_replaced_by_a_file() {
    let w = world();
    let ww = policy(SandboxMode::WorkspaceWrite, &w.ws);
    assert_ne!(code(FileSystem::Fenced.write(&w.ws, "x", &ww)), "OK");
    let mut slash = w.ws.clone().into_os_string();
    slash.push("/");
    assert_ne!(
        code(FileSystem::Fenced.write(Path::new(&slash), "x", &ww)),
        "OK"
    );
    assert!(w.ws.is_dir());
}

#[test]
fn a_root_spelled_with_a_trailing_separator_or_through_a_link_is_the_same_root() {
    let w = world();
    let mut slash = w.ws.clone().into_os_string();
    slash.push("/");
    let ww = policy(SandboxMode::WorkspaceWrite, Path::new(&slash));
    assert_eq!(
        code(FileSystem::Fenced.write(&w.ws.join("a"), "a", &ww)),
        "OK"
    );
    let link = w.ws.with_file_name("ws-link");
    std::os::unix::fs::symlink(&w.ws, &link).expect("link");
    let via_link = policy(SandboxMode::WorkspaceWrite, &link);
    assert_eq!(
        code(FileSystem::Fenced.write(&link.join("b"), "b", &via_link)),
        "OK"
    );
    assert_eq!(std::fs::read_to_string(w.ws.join("a")).expect("a"), "a");
    assert_eq!(std::fs::read_to_string(w.ws.join("b")).expect("b"), "b");
    assert!(
        std::fs::read_dir(&w.outside)
            .expect("outside")
            .next()
            .is_none()
    );
}

#[test]
fn the_filesystem_root_is_never_a_writable_workspace_and_read_only_writes_nothing() {
    let w = world();
    let fs_root = policy(SandboxMode::WorkspaceWrite, Path::new("/"));
    let target = w.outside.join("f");
    assert_eq!(
        code(FileSystem::Fenced.write(&target, "x", &fs_root)),
        "WORKSPACE_TOO_BROAD"
    );
    let ro = policy(SandboxMode::ReadOnly, &w.ws);
    assert_eq!(
        code(FileSystem::Fenced.write(&w.ws.join("f"), "x", &ro)),
        FS_SANDBOX_DENIED
    );
    assert!(!target.exists() && !w.ws.join("f").exists());
}

#[test]
fn a_write_the_host_refuses_is_a_permission_error_not_a_sandbox_denial() {
    // sysfs refuses to create files even for root; danger-full-access fences nothing, so the
    // refusal is the host's.
    let w = world();
    let full = policy(SandboxMode::DangerFullAccess, &w.ws);
    let err = FileSystem::Fenced
        .write(Path::new("/sys/kernel/sandbox-fence-test"), "x", &full)
        .expect_err("the host refuses");
    assert_eq!(err.code(), FS_PERMISSION_DENIED, "{err}");
    assert!(err.to_string().starts_with(FS_PERMISSION_DENIED), "{err}");
}

#[test]
fn two_sessions_with_different_roots_cannot_write_each_others() {
    let (a, b) = (world(), world());
    let pa = policy(SandboxMode::WorkspaceWrite, &a.ws);
    let pb = policy(SandboxMode::WorkspaceWrite, &b.ws);
    assert_eq!(
        code(FileSystem::Fenced.write(&b.ws.join("f"), "x", &pa)),
        FS_SANDBOX_DENIED
    );
    assert_eq!(
        code(FileSystem::Fenced.write(&a.ws.join("f"), "x", &pb)),
        FS_SANDBOX_DENIED
    );
    assert_eq!(
        code(FileSystem::Fenced.write(&a.ws.join("f"), "x", &pa)),
        "OK"
    );
    assert!(!b.ws.join("f").exists());
}
