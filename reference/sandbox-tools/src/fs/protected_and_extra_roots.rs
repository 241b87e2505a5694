//! The fence keeps the protected paths of every writable root unwritten, existing or not and
//! through any spelling, and writes the deployment's extra roots as the shell does.
use super::*;

fn code(r: Result<(), FsError>) -> &'static str {
    r.map(|()| "OK").unwrap_or_else(|e| e.code())
}

#[test]
fn hooks_and_config_are_denied_existing_or_not_and_the_rest_of_git_is_not() {
    let dir = sandbox_test_support::scratch_dir("unit-");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let (ws, bare) = (base.join("ws"), base.join("bare"));
    std::fs::create_dir_all(ws.join(".git/hooks")).expect("hooks");
    std::fs::write(ws.join(".git/config"), "[core]\n").expect("config");
    std::fs::create_dir_all(&bare).expect("bare");
    let service = PolicyService::new(SandboxMode::WorkspaceWrite, &ws)
        .expect("service")
        .with_temp_dir(None)
        .with_writable_roots(std::slice::from_ref(&bare))
        .expect("extra root");
    let stamp = service.default_stamp().expect("stamp");
    let fs = FileSystem::Fenced;
    std::os::unix::fs::symlink(ws.join(".git/hooks"), ws.join("hooks-link")).expect("ln");
    for denied in [
        ws.join(".git/hooks/pre-commit"),
        ws.join(".git/config"),
        ws.join("hooks-link/post-checkout"),
        ws.join("sub/../.git/hooks/x"),
        // Not there yet: a repository the payload would make in the extra root.
        bare.join(".git/hooks/pre-commit"),
        bare.join(".git/config"),
    ] {
        assert_eq!(
            code(fs.write(&denied, "x", &stamp)),
            FS_SANDBOX_DENIED,
            "{denied:?}"
        );
    }
    assert_eq!(
        code(fs.edit(
            &ws.join(".git/config"),
            "[core]",
            "[core]\n\thooksPath = /x",
            &stamp
        )),
        FS_SANDBOX_DENIED
    );
    for allowed in [ws.join(".git/info/exclude"), ws.join("f"), bare.join("f")] {
        assert_eq!(code(fs.write(&allowed, "ok", &stamp)), "OK", "{allowed:?}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).expect("config"),
        "[core]\n"
    );
    assert!(
        std::fs::read_dir(ws.join(".git/hooks"))
            .expect("hooks")
            .next()
            .is_none()
    );
    assert!(!bare.join(".git").exists());
    assert_eq!(std::fs::read_to_string(bare.join("f")).expect("f"), "ok");
    // A deployment that protects nothing writes the config like any file.
    let open = service.with_protected_paths(Vec::new());
    let stamp = open.default_stamp().expect("stamp");
    assert_eq!(code(fs.write(&ws.join(".git/config"), "y", &stamp)), "OK");
}

#[test]
fn git_surface_found_per_repository_is_denied_and_the_commondir_route_stops_at_its_last_write() {
    let dir = sandbox_test_support::scratch_dir("unit-");
    let ws = std::fs::canonicalize(dir.path())
        .expect("canonical")
        .join("ws");
    for d in [
        ".git/hooks",
        ".git/worktrees/wt",
        ".git/modules/sub/hooks",
        "src",
    ] {
        std::fs::create_dir_all(ws.join(d)).expect("mkdir");
    }
    std::fs::write(ws.join(".git/config"), "[core]\n\thooksPath = .githooks\n").expect("config");
    std::fs::write(ws.join(".git/worktrees/wt/commondir"), "../..\n").expect("commondir");
    let service = PolicyService::new(SandboxMode::WorkspaceWrite, &ws)
        .expect("service")
        .with_temp_dir(None);
    let stamp = service.default_stamp().expect("stamp");
    let fs = FileSystem::Fenced;
    // The agent's own four writes that moved config and hooks into the workspace: the
    // first three are ordinary files, the last is git's.
    for allowed in [
        ".cache/g/config",
        ".cache/g/HEAD",
        ".cache/g/hooks/pre-commit",
    ] {
        assert_eq!(
            code(fs.write(&ws.join(allowed), "x", &stamp)),
            "OK",
            "{allowed}"
        );
    }
    for denied in [
        ".git/commondir",
        ".git/worktrees/wt/commondir",
        ".git/worktrees/wt/config.worktree",
        ".git/config.worktree",
        ".git/info/attributes",
        ".git/modules/sub/config",
        ".git/modules/sub/hooks/pre-commit",
        "src/.git",
        "src/.git/config",
        ".githooks/pre-commit",
        ".husky/pre-commit",
        ".vscode/tasks.json",
        ".mcp.json",
        ".claude/settings.json",
        ".pre-commit-config.yaml",
        "lefthook.yml",
    ] {
        assert_eq!(
            code(fs.write(&ws.join(denied), "x", &stamp)),
            FS_SANDBOX_DENIED,
            "{denied}"
        );
    }
    assert!(!ws.join(".git/commondir").exists() && !ws.join("src/.git").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/worktrees/wt/commondir")).expect("c"),
        "../..\n"
    );
    for allowed in [
        "Makefile",
        "package.json",
        "build.rs",
        ".gitattributes",
        ".git/info/exclude",
    ] {
        assert_eq!(
            code(fs.write(&ws.join(allowed), "x", &stamp)),
            "OK",
            "{allowed}"
        );
    }
    // A folder made into a bare repository, one ordinary file at a time: the write that
    // would complete the shape git discovers (its HEAD) is git's.
    for allowed in ["v/config", "v/objects/info/x", "v/refs/heads/x"] {
        assert_eq!(
            code(fs.write(&ws.join(allowed), "x", &stamp)),
            "OK",
            "{allowed}"
        );
    }
    assert_eq!(
        code(fs.write(&ws.join("v/HEAD"), "ref: refs/heads/x\n", &stamp)),
        FS_SANDBOX_DENIED
    );
    assert!(!ws.join("v/HEAD").exists());
}
