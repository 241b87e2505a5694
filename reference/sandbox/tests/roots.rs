//! `sandbox::Roots`, the one home of the writable set and its pins: what each constructor and
//! builder sets, and what pinning pins (a temp dir only when it is an absolute existing
//! directory; an extra root already pinned is kept as it was).

use std::path::PathBuf;

use sandbox::{ExtraRoot, ProtectedPath, Roots};
use sandbox_test_support::scratch_root;

#[test]
fn new_reads_nothing_and_from_env_takes_tmpdir() {
    let roots = Roots::new("/w", Some(PathBuf::from("/t")));
    assert_eq!(roots.workspace_root, PathBuf::from("/w"));
    assert_eq!(roots.temp_dir, Some(PathBuf::from("/t")));
    assert!(roots.workspace_pin.is_none() && roots.temp_dir_pin.is_none());
    assert!(roots.extra_roots.is_empty() && roots.allow_unix_sockets.is_empty());
    assert_eq!(roots.protected_paths, ProtectedPath::defaults());
    let from_env = Roots::from_env("/w");
    assert_eq!(
        from_env.temp_dir,
        std::env::var_os("TMPDIR").map(PathBuf::from)
    );
}

#[test]
fn each_builder_sets_its_field_and_only_it() {
    let base = Roots::new("/w", None);
    let t = base.clone().with_temp_dir(Some(PathBuf::from("/t")));
    assert_eq!(t.temp_dir, Some(PathBuf::from("/t")));
    assert!(t.temp_dir_pin.is_none());
    let e = base.clone().with_extra_roots(vec![ExtraRoot::new("/e")]);
    assert_eq!(e.extra_roots, vec![ExtraRoot::new("/e")]);
    let p = base.clone().with_protected_paths(Vec::new());
    assert!(p.protected_paths.is_empty());
    let s = base
        .clone()
        .with_allow_unix_sockets(vec![PathBuf::from("/s")]);
    assert_eq!(s.allow_unix_sockets, vec![PathBuf::from("/s")]);
    assert_eq!(s.workspace_root, base.workspace_root);
    assert_eq!(s.protected_paths, base.protected_paths);
}

#[test]
fn pinning_pins_what_exists_and_leaves_a_pinned_extra_root_alone() {
    let (_ws_dir, ws) = scratch_root("roots-ws-");
    let (_tmp_dir, tmp) = scratch_root("roots-tmp-");
    let (_extra_dir, extra) = scratch_root("roots-extra-");
    let pinned_extra = ExtraRoot::new(&extra).pinned().expect("pin the extra root");
    let roots = Roots::new(&ws, Some(tmp.clone()))
        .with_extra_roots(vec![pinned_extra.clone(), ExtraRoot::new(&extra)])
        .pinned()
        .expect("pin");
    assert!(roots.workspace_pin.is_some());
    assert!(roots.temp_dir_pin.is_some());
    assert_eq!(roots.temp_dir, Some(tmp.clone()));
    assert_eq!(roots.extra_roots[0], pinned_extra);
    assert!(roots.extra_roots[1].pin.is_some());
    // A temp dir that is relative, or absent, is kept but never pinned.
    for temp in [PathBuf::from("."), ws.join("missing")] {
        let r = Roots::new(&ws, None).with_pinned_temp_dir(Some(temp.clone()));
        assert_eq!(r.temp_dir, Some(temp.clone()));
        assert!(r.temp_dir_pin.is_none(), "{temp:?} was pinned");
    }
    let r = Roots::new(&ws, None).with_pinned_temp_dir(Some(tmp.clone()));
    assert!(r.temp_dir_pin.is_some());
    // A workspace that does not exist cannot be pinned.
    assert!(Roots::new(ws.join("missing"), None).pinned().is_err());
    // Nor can an extra root that does not exist.
    assert!(
        Roots::new(&ws, None)
            .with_extra_roots(vec![ExtraRoot::new(ws.join("missing"))])
            .pinned()
            .is_err()
    );
}

/// Under `danger-full-access` only the workspace is checked: an extra root that is gone does not
/// refuse the call (it is not writable through the sandbox, there is no sandbox).
#[test]
fn full_access_checks_the_workspace_and_not_the_extra_roots() {
    let (_ws_dir, ws) = scratch_root("roots-full-");
    let mut policy = sandbox::ExecutionPolicy::new(sandbox::SandboxMode::DangerFullAccess, &ws);
    policy.roots.extra_roots = vec![ExtraRoot::new(ws.join("missing"))];
    assert_eq!(
        policy.check().expect("only the workspace is checked"),
        Vec::<PathBuf>::new()
    );
}
