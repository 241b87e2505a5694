//! Where state a payload must never reach may live ([`sandbox::check_state_dir`]), tried as a
//! hostile payload's host would be laid out: inside the workspace, through a symlink, under a
//! directory that does not exist yet, in /tmp, in $TMPDIR, in an extra root, under a directory
//! others may write; and the places that must pass (a private directory beside the workspace,
//! below the sticky /var/tmp). Real directories, real modes, as root and as a user.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use sandbox::{ConfinedMode, ExtraRoot, ProviderPolicy, check_state_dir, check_state_file};
use sandbox_test_support::scratch_root;

struct Base {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
}

fn base() -> Base {
    let (dir, root) = scratch_root("state-dir-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("ws");
    Base {
        _dir: dir,
        root,
        ws,
    }
}

fn policy(mode: ConfinedMode, ws: &Path) -> ProviderPolicy {
    ProviderPolicy::new(mode, ws).with_roots(|r| r.with_temp_dir(None))
}

fn code(dir: &Path, policies: &[ProviderPolicy]) -> &'static str {
    match check_state_dir("the sessions directory", dir, policies) {
        Ok(_) => "OK",
        Err(e) => e.code(),
    }
}

#[test]
fn a_directory_beside_the_workspace_passes_and_comes_back_canonical() {
    let b = base();
    let state = b.root.join("state/sessions");
    for mode in [ConfinedMode::ReadOnly, ConfinedMode::WorkspaceWrite] {
        let got = check_state_dir("the sessions directory", &state, &[policy(mode, &b.ws)]);
        assert_eq!(got.expect("beside the workspace"), state, "{mode:?}");
    }
    // Spelled through a symlink: what comes back is where it really is.
    std::fs::create_dir(b.root.join("real")).expect("real");
    symlink(b.root.join("real"), b.root.join("link")).expect("link");
    let got = check_state_dir(
        "the sessions directory",
        &b.root.join("link/sessions"),
        &[policy(ConfinedMode::WorkspaceWrite, &b.ws)],
    );
    assert_eq!(got.expect("via a link"), b.root.join("real/sessions"));
}

#[test]
fn inside_the_workspace_is_refused_in_every_mode_however_it_is_spelled() {
    let b = base();
    std::fs::create_dir_all(b.ws.join(".agent")).expect("dir");
    symlink(&b.ws, b.root.join("alias")).expect("alias");
    for mode in [ConfinedMode::ReadOnly, ConfinedMode::WorkspaceWrite] {
        let policies = [policy(mode, &b.ws)];
        // Existing, not existing yet (several levels), the workspace itself, through a symlink.
        for dir in [
            b.ws.join(".agent"),
            b.ws.join("not/there/yet"),
            b.ws.clone(),
            b.root.join("alias/sessions"),
            b.root.join("ws/../ws/sessions"),
        ] {
            let err = check_state_dir("the sessions directory", &dir, &policies)
                .expect_err(&dir.display().to_string());
            assert_eq!(err.code(), "STATE_DIR_IN_WRITABLE_ROOT", "{err}");
            let text = err.to_string();
            // Both paths are named.
            assert!(text.contains(&format!("{:?}", dir)), "{text}");
            assert!(text.contains(&format!("{:?}", b.ws)), "{text}");
        }
    }
}

#[test]
fn tmp_tmpdir_and_extra_roots_are_refused_even_for_a_read_only_policy() {
    let b = base();
    let ro = policy(ConfinedMode::ReadOnly, &b.ws);
    assert_eq!(
        code(Path::new("/tmp/sessions"), std::slice::from_ref(&ro)),
        "STATE_DIR_IN_WRITABLE_ROOT"
    );
    assert_eq!(code(Path::new("/tmp"), &[]), "STATE_DIR_IN_WRITABLE_ROOT");
    // $TMPDIR, strictly below /var/tmp as a temp dir must be.
    let tmpdir = b.root.join("tmpdir");
    std::fs::create_dir(&tmpdir).expect("tmpdir");
    let with_tmp = ro
        .clone()
        .with_roots(|r| r.with_temp_dir(Some(tmpdir.clone())));
    assert_eq!(
        code(&tmpdir.join("s"), &[with_tmp]),
        "STATE_DIR_IN_WRITABLE_ROOT"
    );
    // An extra writable root.
    let extra = b.root.join("extra");
    std::fs::create_dir(&extra).expect("extra");
    let with_extra = ro.with_roots(|r| r.with_extra_roots(vec![ExtraRoot::new(&extra)]));
    assert_eq!(
        code(&extra.join("cache"), &[with_extra]),
        "STATE_DIR_IN_WRITABLE_ROOT"
    );
    // Any of several policies.
    let other = b.root.join("other");
    std::fs::create_dir(&other).expect("other");
    assert_eq!(
        code(
            &other.join("s"),
            &[
                policy(ConfinedMode::ReadOnly, &b.ws),
                policy(ConfinedMode::ReadOnly, &other)
            ]
        ),
        "STATE_DIR_IN_WRITABLE_ROOT"
    );
}

#[test]
fn a_workspace_that_can_never_be_writable_adds_nothing() {
    // `/` is refused for workspace-write: nothing ever runs writable there, so only /tmp counts.
    let b = base();
    assert_eq!(
        code(
            &b.root.join("state"),
            &[policy(ConfinedMode::ReadOnly, Path::new("/"))]
        ),
        "OK"
    );
}

#[test]
fn writable_by_others_is_refused_for_the_directory_and_its_ancestors_but_not_a_sticky_root_dir() {
    let b = base();
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
    };
    let policies = [policy(ConfinedMode::WorkspaceWrite, &b.ws)];
    // An open ancestor (not sticky): anyone could rename the tree below it.
    let shared = b.root.join("shared");
    std::fs::create_dir_all(shared.join("mine")).expect("dirs");
    mode(&shared, 0o777);
    let err = check_state_dir("the sessions directory", &shared.join("mine/s"), &policies)
        .expect_err("open ancestor");
    assert_eq!(err.code(), "STATE_DIR_WRITABLE_BY_OTHERS");
    assert!(err.to_string().contains(&format!("{shared:?}")), "{err}");
    assert!(err.to_string().contains("0777"), "{err}");
    // Group-writable is writable by others too.
    mode(&shared, 0o775);
    assert_eq!(
        code(&shared.join("mine/s"), &policies),
        "STATE_DIR_WRITABLE_BY_OTHERS"
    );
    // A sticky ancestor we own is no excuse; a sticky root-owned one (/var/tmp) is.
    mode(&shared, 0o1777);
    let sticky_ours = nix_uid() != 0;
    assert_eq!(
        code(&shared.join("mine/s"), &policies),
        if sticky_ours {
            "STATE_DIR_WRITABLE_BY_OTHERS"
        } else {
            "OK"
        }
    );
    mode(&shared, 0o755);
    assert_eq!(code(&shared.join("mine/s"), &policies), "OK");
    // The directory itself: no write bit for anyone else, sticky or not.
    mode(&shared.join("mine"), 0o1777);
    assert_eq!(
        code(&shared.join("mine"), &policies),
        "STATE_DIR_WRITABLE_BY_OTHERS"
    );
    mode(&shared.join("mine"), 0o755);
    assert_eq!(code(&shared.join("mine"), &policies), "OK");
    // /var/tmp is sticky and root's: a private directory below it passes.
    assert_eq!(
        std::fs::metadata("/var/tmp")
            .expect("/var/tmp")
            .permissions()
            .mode()
            & 0o1000,
        0o1000
    );
    assert_eq!(code(&b.root.join("private"), &policies), "OK");
}

#[test]
fn a_directory_or_entry_another_user_owns_is_refused() {
    // Only root can give a directory away; as a user, a directory of root's that others cannot
    // write is fine, and /var/tmp/<someone else's> cannot be made here.
    let b = base();
    let theirs = b.root.join("theirs");
    std::fs::create_dir(&theirs).expect("dir");
    let log = b.root.join("log.jsonl");
    std::fs::write(&log, "{}\n").expect("log");
    assert!(check_state_file("a session log", &log).is_ok());
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    assert_eq!(
        check_state_file("a session log", &log)
            .expect_err("open log")
            .code(),
        "STATE_DIR_WRITABLE_BY_OTHERS"
    );
    let link = b.root.join("link.jsonl");
    symlink(&log, &link).expect("link");
    assert_eq!(
        check_state_file("a session log", &link)
            .expect_err("symlinked log")
            .code(),
        "STATE_DIR_WRITABLE_BY_OTHERS"
    );
    if nix_uid() == 0 {
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        let err = check_state_dir("the sessions directory", &theirs.join("s"), &[])
            .expect_err("another user's directory");
        assert_eq!(err.code(), "STATE_DIR_WRITABLE_BY_OTHERS");
        assert!(err.to_string().contains("uid 65534"), "{err}");
    } else {
        // A user cannot give a directory away; a root-owned system directory passes the owner
        // rule (it is refused as a writable root or by mode only).
        assert_eq!(code(Path::new("/var/lib/none-such"), &[]), "OK");
    }
}

fn nix_uid() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap_or(0)
}

#[test]
fn a_directory_below_a_regular_file_is_refused_as_unresolvable() {
    // Only a tail that does not exist yet may be skipped on the way up: an ancestor that cannot
    // be inspected for another reason (here ENOTDIR, a path through a regular file; EACCES for a
    // user) is an error, never a pass.
    let b = base();
    let file = b.root.join("file");
    std::fs::write(&file, "x").expect("file");
    let under = file.join("sessions");
    let got = check_state_dir(
        "the sessions directory",
        &under,
        &[policy(ConfinedMode::WorkspaceWrite, &b.ws)],
    );
    let err = got.expect_err("a directory below a regular file cannot be created");
    assert_eq!(err.code(), "STATE_DIR_UNRESOLVABLE", "{err}");
}
