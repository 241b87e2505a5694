//! `sandbox::TempArea`, the session's private temp area, as the writable set sees it: which
//! directory it names, the `$TMPDIR` a command gets, where a path in `/tmp` lies on the host, and
//! every area `writable_roots` refuses before anything runs (the call would otherwise write the
//! host's `/tmp` or its own workspace through it).

use std::path::{Path, PathBuf};

use sandbox::{ConfinedMode, ProviderPolicy, RootError, Roots, TempArea};
use sandbox_test_support::scratch_root;

#[test]
fn a_private_area_names_its_tmp_and_a_shared_one_nothing() {
    assert_eq!(TempArea::Shared.dir(), None);
    assert!(TempArea::Shared.is_shared());
    let private = TempArea::Private(PathBuf::from("/c/area"));
    assert_eq!(private.dir(), Some(PathBuf::from("/c/area/tmp")));
    assert!(!private.is_shared());
}

#[test]
fn a_command_gets_the_areas_tmp_else_the_callers_temp_dir() {
    let roots = Roots::new("/w", Some(PathBuf::from("/t")));
    assert_eq!(roots.command_tmpdir(), Some(PathBuf::from("/t")));
    assert_eq!(Roots::new("/w", None).command_tmpdir(), None);
    let private = roots.with_temp_area(TempArea::Private(PathBuf::from("/c/area")));
    assert_eq!(private.command_tmpdir(), Some(PathBuf::from("/c/area/tmp")));
}

#[test]
fn a_path_in_tmp_lies_in_the_area_only_where_a_mount_shows_it_there() {
    let roots = Roots::new("/tmp/ws", None)
        .with_extra_roots(vec![sandbox::ExtraRoot::new("/tmp/extra")])
        .with_temp_area(TempArea::Private(PathBuf::from("/c/area")));
    let at = |p: &str, at_tmp| roots.host_path(Path::new(p), at_tmp);
    assert_eq!(at("/tmp/x/../y", true), PathBuf::from("/c/area/tmp/y"));
    assert_eq!(
        at("/tmp/./.cargo/config.toml", true),
        PathBuf::from("/c/area/tmp/.cargo/config.toml")
    );
    // The workspace and the extra roots below /tmp stay the host's own.
    assert_eq!(at("/tmp/ws/f", true), PathBuf::from("/tmp/ws/f"));
    assert_eq!(at("/tmp/extra/f", true), PathBuf::from("/tmp/extra/f"));
    // Outside /tmp, or with no mount showing the area there, a path is itself.
    assert_eq!(at("/var/tmp/f", true), PathBuf::from("/var/tmp/f"));
    assert_eq!(at("/tmp/y", false), PathBuf::from("/tmp/y"));
    let shared = Roots::new("/w", None);
    assert_eq!(
        shared.host_path(Path::new("/tmp/y"), true),
        PathBuf::from("/tmp/y")
    );
}

/// An area (`tmp` and `work` made) in a scratch directory outside /tmp, and a workspace.
fn area_and_workspace() -> (Vec<tempfile::TempDir>, PathBuf, PathBuf) {
    let (area_dir, area) = scratch_root("temp-area-");
    let (ws_dir, ws) = scratch_root("temp-area-ws-");
    for part in ["tmp", "work"] {
        std::fs::create_dir(area.join(part)).expect("part");
    }
    (vec![area_dir, ws_dir], area, ws)
}

fn policy(ws: &Path, area: TempArea) -> ProviderPolicy {
    ProviderPolicy::from_roots(
        ConfinedMode::WorkspaceWrite,
        Roots::new(ws, Some(PathBuf::from("/tmp"))).with_temp_area(area),
    )
}

fn refused(ws: &Path, area: PathBuf) -> String {
    match sandbox::writable_roots(&policy(ws, TempArea::Private(area))) {
        Err(RootError::TempAreaUnusable { why, .. }) => why,
        other => panic!("expected TEMP_AREA_UNUSABLE, got {other:?}"),
    }
}

#[test]
fn a_private_area_replaces_tmp_and_the_temp_dir_in_the_writable_set() {
    let (_keep, area, ws) = area_and_workspace();
    let roots = sandbox::writable_roots(&policy(&ws, TempArea::Private(area.clone())))
        .expect("a usable area");
    assert_eq!(roots, vec![ws.clone(), area.join("tmp")]);
    let shared = sandbox::writable_roots(&policy(&ws, TempArea::Shared)).expect("shared");
    assert!(shared.contains(&PathBuf::from("/tmp")), "{shared:?}");
}

#[test]
fn an_area_that_would_expose_the_host_or_the_workspace_is_refused_before_anything_runs() {
    let (_keep, area, ws) = area_and_workspace();
    assert_eq!(
        refused(&ws, PathBuf::from("relative/area")),
        "is not absolute"
    );
    assert!(refused(&ws, PathBuf::from("/tmp")).starts_with("lies in /tmp"));
    let in_tmp = tempfile::Builder::new()
        .prefix("temp-area-in-tmp-")
        .tempdir_in("/tmp")
        .expect("a folder in /tmp");
    assert!(refused(&ws, in_tmp.path().to_path_buf()).starts_with("lies in /tmp"));
    assert!(
        refused(&ws, PathBuf::from("/")).starts_with("lies in /tmp"),
        "it holds /tmp"
    );
    let in_ws = ws.join("area");
    for part in ["tmp", "work"] {
        std::fs::create_dir_all(in_ws.join(part)).expect("part");
    }
    assert!(refused(&ws, in_ws).starts_with("lies in the workspace"));
    let holding_ws = ws.parent().expect("the workspace's parent").to_path_buf();
    assert!(refused(&ws, holding_ws).starts_with("lies in the workspace"));
    std::fs::remove_dir(area.join("work")).expect("rmdir work");
    assert_eq!(refused(&ws, area.clone()), "has no work directory");
    std::fs::write(area.join("work"), b"").expect("work as a file");
    assert_eq!(refused(&ws, area), "has a work that is not a directory");
}
