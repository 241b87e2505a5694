//! The writable set and its checks as a caller sees them: which roots a policy makes writable, in
//! which order, and which codes and words a bad root is refused with.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use rstest::rstest;
use sandbox::{
    ConfinedMode, ExecutionPolicy, PathError, ProviderPolicy, SandboxMode, canonical_path,
    system_reason, writable_roots,
};
use sandbox_test_support::scratch_root;

fn tmp() -> PathBuf {
    canonical_path(Path::new("/tmp")).expect("canonical /tmp")
}

#[rstest]
#[case::root("/", Some("the filesystem root"))]
#[case::top_level("/srv", Some("a top-level system directory"))]
#[case::home_dir_parent("/home", Some("a top-level system directory"))]
#[case::top_level_system_tree("/etc", Some("a top-level system directory"))]
#[case::inside_a_system_tree("/usr/lib", Some("inside a system directory"))]
#[case::deep_inside("/etc/ssh/keys", Some("inside a system directory"))]
#[case::macos_system("/System/Library", Some("inside a system directory"))]
#[case::tmp("/tmp", None)]
#[case::below_tmp("/tmp/ws", None)]
#[case::a_project("/home/u/project", None)]
#[case::below_a_top_level_dir("/srv/data", None)]
#[case::a_lookalike_of_a_system_tree("/etcetera/ws", None)]
fn what_is_too_broad_to_write_and_why(#[case] path: &str, #[case] why: Option<&str>) {
    assert_eq!(system_reason(Path::new(path)), why);
}

#[test]
fn a_chain_of_forty_symlinks_resolves_and_forty_one_is_a_loop() {
    let (_d, root) = scratch_root("roots-");
    std::fs::create_dir(root.join("target")).expect("mkdir");
    // link0 -> link1 -> ... -> link40 -> target: resolving link1 takes 40 hops, link0 takes 41.
    symlink(root.join("target"), root.join("link40")).expect("symlink");
    for i in (0..40).rev() {
        symlink(
            root.join(format!("link{}", i + 1)),
            root.join(format!("link{i}")),
        )
        .expect("symlink");
    }
    assert_eq!(
        canonical_path(&root.join("link1/new")).expect("40 hops"),
        root.join("target/new")
    );
    assert!(matches!(
        canonical_path(&root.join("link0/new")),
        Err(PathError::SymlinkLoop(_))
    ));
}

#[test]
fn a_component_too_long_to_name_a_file_is_an_error_not_a_new_file() {
    let (_d, root) = scratch_root("roots-");
    let long = root.join("x".repeat(300)).join("f");
    match canonical_path(&long) {
        Err(e @ PathError::Inspect { .. }) => {
            assert!(e.to_string().contains("cannot inspect"), "{e}")
        }
        other => panic!("expected an inspect error, got {other:?}"),
    }
}

#[test]
fn a_relative_symlink_resolves_against_its_directory() {
    let (_d, root) = scratch_root("roots-");
    std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
    symlink("b", root.join("a/rel")).expect("symlink");
    assert_eq!(
        canonical_path(&root.join("a/rel/f")).expect("canon"),
        root.join("a/b/f")
    );
}

fn ww(workspace: &Path, temp: Option<&Path>) -> ProviderPolicy {
    ProviderPolicy::new(ConfinedMode::WorkspaceWrite, workspace)
        .with_roots(|r| r.with_temp_dir(temp.map(Path::to_path_buf)))
}

#[test]
fn the_writable_set_is_workspace_then_tmp_then_temp_dir_each_once() {
    let (_d, root) = scratch_root("roots-");
    let ws = root.join("ws");
    let private = root.join("private-tmp");
    std::fs::create_dir(&ws).expect("mkdir");
    std::fs::create_dir(&private).expect("mkdir");
    // A private temp dir below a temp area is its own root, last.
    assert_eq!(
        writable_roots(&ww(&ws, Some(&private))).expect("roots"),
        vec![ws.clone(), tmp(), private.clone()]
    );
    // A temp dir that is the workspace adds nothing and keeps the order.
    assert_eq!(
        writable_roots(&ww(&ws, Some(&ws))).expect("roots"),
        vec![ws.clone(), tmp()]
    );
    // A temp dir inside the workspace adds nothing.
    std::fs::create_dir(ws.join("tmp")).expect("mkdir");
    assert_eq!(
        writable_roots(&ww(&ws, Some(&ws.join("tmp")))).expect("roots"),
        vec![ws.clone(), tmp()]
    );
    // No temp dir: the workspace and /tmp.
    assert_eq!(
        writable_roots(&ww(&ws, None)).expect("roots"),
        vec![ws.clone(), tmp()]
    );
}

#[test]
fn a_pinned_temp_dir_must_still_be_the_same_directory() {
    let (_d, root) = scratch_root("roots-");
    let ws = root.join("ws");
    let temp = root.join("private-tmp");
    std::fs::create_dir(&ws).expect("mkdir");
    std::fs::create_dir(&temp).expect("mkdir");
    let mut policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    policy.roots.temp_dir = Some(temp.clone());
    let policy = policy.pinned().expect("pin");
    assert_eq!(
        policy.roots.temp_dir_pin.as_ref().map(|p| p.path.as_path()),
        Some(temp.as_path())
    );
    assert_eq!(
        policy.check().expect("unchanged"),
        vec![ws.clone(), tmp(), temp.clone()]
    );
    std::fs::rename(&temp, root.join("moved")).expect("mv");
    std::fs::create_dir(&temp).expect("mkdir");
    let err = policy.check().expect_err("swapped");
    assert_eq!(err.code(), "TEMP_DIR_MOVED");
    let text = err.to_string();
    let pinned = policy.roots.temp_dir_pin.as_ref().expect("pinned").id;
    assert!(
        text.contains(&format!("device {} inode {}", pinned.dev, pinned.ino)),
        "{text}"
    );
}

#[test]
fn a_moved_workspace_names_both_directories_by_identity() {
    let (_d, root) = scratch_root("roots-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    let policy = ExecutionPolicy::new(SandboxMode::ReadOnly, &ws)
        .pinned()
        .expect("pin");
    let pinned = policy.roots.workspace_pin.as_ref().expect("pinned").id;
    assert_eq!(
        pinned.to_string(),
        format!("device {} inode {}", pinned.dev, pinned.ino)
    );
    std::fs::rename(&ws, root.join("old")).expect("mv");
    std::fs::create_dir(&ws).expect("mkdir");
    let now = sandbox::DirIdentity::of(&ws).expect("identity");
    assert_ne!(now, pinned);
    let text = policy.check().expect_err("moved").to_string();
    assert!(text.contains(&pinned.to_string()), "{text}");
    assert!(text.contains(&now.to_string()), "{text}");
}

#[rstest]
#[case::read_only(SandboxMode::ReadOnly, 0)]
#[case::workspace_write(SandboxMode::WorkspaceWrite, 2)]
#[case::full_access_grants_nothing_through_the_sandbox(SandboxMode::DangerFullAccess, 0)]
fn check_returns_the_writable_set_of_the_mode(#[case] mode: SandboxMode, #[case] roots: usize) {
    let (_d, root) = scratch_root("roots-");
    let mut policy = ExecutionPolicy::new(mode, &root);
    policy.roots.temp_dir = None;
    assert_eq!(policy.check().expect("roots").len(), roots);
    assert_eq!(
        policy
            .for_provider()
            .map(|p| (p.mode, p.roots.workspace_root)),
        mode.confined().map(|m| (m, root.clone()))
    );
    // Every mode still refuses a workspace that is not there.
    let gone = ExecutionPolicy::new(mode, root.join("gone"));
    assert_eq!(
        gone.check().expect_err("missing").code(),
        "WORKSPACE_MISSING"
    );
}

#[test]
fn only_an_existing_absolute_temp_dir_is_pinned() {
    let (_d, root) = scratch_root("roots-");
    for (temp, pinned) in [
        (PathBuf::from("."), false),
        (root.join("missing"), false),
        (root.clone(), true),
    ] {
        let mut policy = ExecutionPolicy::new(SandboxMode::ReadOnly, &root);
        policy.roots.temp_dir = Some(temp.clone());
        let policy = policy.pinned().expect("pin");
        assert_eq!(policy.roots.temp_dir_pin.is_some(), pinned, "{temp:?}");
    }
}
