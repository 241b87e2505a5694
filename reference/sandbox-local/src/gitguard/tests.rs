//! The guard against the disk: each test plays the payload's writes between the snapshot and
//! the settle, then checks what is on disk (inside and outside the workspace).
use super::paths::{Lead, is_local_url, named_git_dir};
use super::*;
use sandbox::CallGuard;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@x.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository with a commit, a linked worktree `wt` and a submodule `sub`, and a place
/// outside the workspace.
fn world() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let base = sandbox::canonical_path(d.path()).expect("canonical");
    let (ws, outside, src) = (base.join("ws"), base.join("outside"), base.join("subsrc"));
    for dir in [&ws, &outside, &src] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    git(&src, &["init", "-q"]);
    git(&src, &["commit", "-q", "--allow-empty", "-m", "s"]);
    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join("a"), "a").expect("a");
    git(&ws, &["add", "a"]);
    git(&ws, &["commit", "-qm", "init"]);
    git(
        &ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "-q",
            "add",
            src.to_str().expect("utf-8"),
            "sub",
        ],
    );
    git(&ws, &["worktree", "add", "-q", "wt", "-b", "wtb"]);
    (d, ws, outside)
}

fn guard(ws: &Path) -> Box<dyn CallGuard> {
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws);
    Box::new(GitGuard::before(&policy).expect("a guard under workspace-write"))
}

#[test]
fn every_git_route_is_reverted_and_each_is_a_denial_with_the_marker() {
    let (_d, ws, _) = world();
    let config = std::fs::read(ws.join(".git/modules/sub/config")).expect("config");
    let g = guard(&ws);
    std::fs::write(ws.join(".git/commondir"), "../.cache/g\n").expect("w");
    std::fs::write(
        ws.join(".git/worktrees/wt/commondir"),
        "../../../.cache/g\n",
    )
    .expect("w");
    std::fs::write(ws.join(".git/config.worktree"), "[core]\n\tfsmonitor = x\n").expect("w");
    std::fs::write(
        ws.join(".git/modules/sub/config"),
        "[core]\n\tfsmonitor = x\n",
    )
    .expect("w");
    std::fs::write(ws.join(".git/modules/sub/hooks/pre-commit"), "x").expect("w");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::write(ws.join("src/.git"), "gitdir: ../.cache/g\n").expect("w");
    std::fs::create_dir_all(ws.join("n/.git/hooks")).expect("mkdir");
    std::fs::write(ws.join("n/.git/hooks/post-checkout"), "x").expect("w");
    std::fs::write(ws.join(".git/info/attributes"), "* filter=x\n").expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 8, "{lines:#?}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("[sandbox: file access denied under workspace-write mode]")),
        "{lines:#?}"
    );
    for gone in [
        ".git/commondir",
        ".git/config.worktree",
        ".git/modules/sub/hooks/pre-commit",
        "src/.git",
        "n/.git/hooks/post-checkout",
        ".git/info/attributes",
    ] {
        assert!(
            std::fs::symlink_metadata(ws.join(gone)).is_err(),
            "{gone} left"
        );
    }
    assert_eq!(
        std::fs::read(ws.join(".git/modules/sub/config")).expect("config"),
        config
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/worktrees/wt/commondir")).expect("c"),
        "../..\n"
    );
    // What the guard does not watch stays as the call left it.
    assert!(ws.join("n/.git/hooks").is_dir() && ws.join("src").is_dir());
}

#[test]
fn ordinary_git_stays_worktree_add_init_clone_and_samples() {
    let (_d, ws, _) = world();
    let g = guard(&ws);
    git(&ws, &["worktree", "add", "-q", "wt2", "-b", "b2"]);
    git(&ws, &["init", "-q", "nested"]);
    git(&ws, &["clone", "-q", ".", "cloned"]);
    std::fs::write(ws.join("b"), "b").expect("b");
    git(&ws, &["add", "b"]);
    git(&ws, &["commit", "-qm", "b"]);
    git(&ws, &["checkout", "-qb", "feat"]);
    let lines = g.settle();
    assert!(lines.is_empty(), "{lines:#?}");
    assert!(ws.join("wt2/.git").is_file() && ws.join(".git/worktrees/wt2/commondir").is_file());
    assert!(ws.join("nested/.git/config").is_file() && ws.join("cloned/.git/config").is_file());
}

#[test]
fn the_hooks_path_folder_and_an_included_config_are_watched() {
    let (_d, ws, _) = world();
    git(&ws, &["config", "core.hooksPath", ".husky"]);
    git(&ws, &["config", "include.path", "../project.gitconfig"]);
    std::fs::write(ws.join("project.gitconfig"), "[user]\n\tname = a\n").expect("w");
    let g = guard(&ws);
    std::fs::create_dir_all(ws.join(".husky")).expect("mkdir");
    std::fs::write(ws.join(".husky/pre-commit"), "x").expect("w");
    std::fs::write(ws.join("project.gitconfig"), "[core]\n\tfsmonitor = x\n").expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(!ws.join(".husky").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("project.gitconfig")).expect("r"),
        "[user]\n\tname = a\n"
    );
}

#[test]
fn a_symlink_swapped_in_never_leads_the_revert_outside() {
    let (_d, ws, outside) = world();
    std::fs::write(outside.join("keep"), "keep").expect("w");
    let g = guard(&ws);
    // The submodule's hooks become a link to a folder outside holding a file: the revert
    // removes the link, never the file it leads to.
    let hooks = ws.join(".git/modules/sub/hooks");
    std::fs::rename(&hooks, ws.join("old-hooks")).expect("mv");
    std::os::unix::fs::symlink(&outside, &hooks).expect("ln");
    let lines = g.settle();
    assert!(!lines.is_empty());
    assert_eq!(
        std::fs::read_to_string(outside.join("keep")).expect("kept"),
        "keep"
    );
    assert!(
        hooks.is_dir()
            && !std::fs::symlink_metadata(&hooks)
                .expect("m")
                .file_type()
                .is_symlink()
    );
    assert!(
        hooks.join("pre-commit.sample").is_file(),
        "the samples are restored"
    );
}

/// Where git's discovery finds the repository when run in `dir` (outside any sandbox).
fn git_dir_seen_from(dir: &Path) -> PathBuf {
    let out = Command::new("git")
        .args(["rev-parse", "--absolute-git-dir"])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .output()
        .expect("git");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Makes `dir` the shape git takes for a bare repository, with `config` as its config.
fn make_bare_shaped(ws: &Path, dir: &Path, config: &str) {
    std::fs::create_dir_all(dir.join("objects")).expect("mkdir");
    std::fs::create_dir_all(dir.join("refs/heads")).expect("mkdir");
    std::fs::copy(ws.join(".git/HEAD"), dir.join("HEAD")).expect("HEAD");
    std::fs::write(dir.join("config"), config).expect("config");
}

const PAGER: &str =
    "[core]\n\tpager = touch /nonexistent/pwned\n[alias]\n\tst = !touch /nonexistent/pwned\n";

#[test]
fn a_folder_made_a_bare_repository_with_a_config_of_its_own_is_unmade() {
    let (_d, ws, _) = world();
    let src = ws.join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("main.rs"), "fn main() {}").expect("w");
    let g = guard(&ws);
    make_bare_shaped(&ws, &src, PAGER);
    assert_eq!(
        git_dir_seen_from(&src),
        src,
        "the attack is real: git takes src for a repository"
    );
    let lines = g.settle();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with("[sandbox: file access denied under workspace-write mode]")
            && lines[0].ends_with("src/HEAD"),
        "{lines:#?}"
    );
    assert!(!src.join("HEAD").exists());
    assert_eq!(git_dir_seen_from(&src), ws.join(".git"));
    // Nothing else of the folder is touched.
    assert!(src.join("config").is_file() && src.join("main.rs").is_file());
    assert!(src.join("objects").is_dir() && src.join("refs").is_dir());
}

#[test]
fn a_project_file_named_config_stays_when_its_folder_is_made_a_repository() {
    let (_d, ws, _) = world();
    let deploy = ws.join("deploy");
    std::fs::create_dir_all(deploy.join("refs")).expect("mkdir");
    std::fs::write(deploy.join("HEAD"), "not git\n").expect("w");
    std::fs::write(deploy.join("config"), "[core]\n\tpager = less\n").expect("w");
    let g = guard(&ws);
    // The payload adds what the folder lacked to be a repository, and a commondir.
    std::fs::create_dir_all(deploy.join("objects")).expect("mkdir");
    std::fs::write(deploy.join("HEAD"), "ref: refs/heads/main\n").expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].ends_with("deploy/objects"), "{lines:#?}");
    assert!(!deploy.join("objects").exists());
    assert_eq!(
        std::fs::read_to_string(deploy.join("config")).expect("r"),
        "[core]\n\tpager = less\n"
    );
    assert!(deploy.join("HEAD").is_file() && deploy.join("refs").is_dir());
}

#[test]
fn a_known_bare_repository_has_its_config_and_hooks_watched() {
    let (_d, ws, _) = world();
    git(&ws, &["init", "-q", "--bare", "remote.git"]);
    let bare = ws.join("remote.git");
    let config = std::fs::read(bare.join("config")).expect("config");
    let g = guard(&ws);
    std::fs::write(bare.join("config"), PAGER).expect("w");
    std::fs::write(bare.join("hooks/post-receive"), "x").expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(std::fs::read(bare.join("config")).expect("config"), config);
    assert!(!bare.join("hooks/post-receive").exists());
}

#[test]
fn bare_clones_and_mirrors_made_by_the_call_stay() {
    let (_d, ws, _) = world();
    let g = guard(&ws);
    git(&ws, &["init", "-q", "--bare", "init.git"]);
    git(&ws, &["clone", "-q", "--bare", ".", "bare.git"]);
    git(&ws, &["clone", "-q", "--mirror", ".", "mirror.git"]);
    git(&ws, &["push", "-q", "init.git", "HEAD:refs/heads/main"]);
    let lines = g.settle();
    assert!(lines.is_empty(), "{lines:#?}");
    for dir in ["init.git", "bare.git", "mirror.git"] {
        assert_eq!(git_dir_seen_from(&ws.join(dir)), ws.join(dir));
    }
}

#[test]
fn a_gitfile_or_commondir_into_a_folder_of_the_payloads_inside_dot_git_is_reverted() {
    let (_d, ws, _) = world();
    let g = guard(&ws);
    let evil = ws.join(".git/evil");
    make_bare_shaped(&ws, &evil, PAGER);
    std::fs::create_dir_all(ws.join("inner")).expect("mkdir");
    std::fs::write(ws.join("inner/.git"), "gitdir: ../.git/evil\n").expect("w");
    std::fs::write(ws.join(".git/worktrees/wt/commondir"), "../../evil\n").expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(!ws.join("inner/.git").exists());
    // A folder holding a HEAD inside .git is a git directory whose surface is watched.
    assert!(!evil.join("config").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/worktrees/wt/commondir")).expect("c"),
        "../..\n"
    );
}

/// The person's `git status` in `dir`, outside any sandbox; true when `marker` was written.
fn host_status_runs_code(dir: &Path, marker: &Path) -> bool {
    let _ = Command::new("git")
        .args(["status", "--short"])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .output();
    marker.exists()
}

#[test]
fn a_repository_hidden_under_objects_is_no_gitfiles_target() {
    let (_d, ws, outside) = world();
    let marker = outside.join("pwned");
    let g = guard(&ws);
    // One call: a bare clone hidden where the guard never looks (objects), made the worktree
    // of a gitfile beside the project (helper's finding A).
    let evil = ws.join(".git/modules/x/objects/evil");
    git(
        &ws,
        &["clone", "-q", "--bare", ".", evil.to_str().expect("utf-8")],
    );
    std::fs::write(
        evil.join("config"),
        format!(
            "[core]\n\tbare = false\n\tworktree = ../../../../../vendor\n\tfsmonitor = \"touch {}; false #\"\n",
            marker.display()
        ),
    )
    .expect("w");
    std::fs::create_dir_all(ws.join("vendor")).expect("mkdir");
    std::fs::write(
        ws.join("vendor/.git"),
        "gitdir: ../.git/modules/x/objects/evil\n",
    )
    .expect("w");
    let lines = g.settle();
    assert!(!ws.join("vendor/.git").exists(), "{lines:#?}");
    assert!(!host_status_runs_code(&ws.join("vendor"), &marker));
}

#[test]
fn a_gitfile_is_read_byte_for_byte_as_git_reads_it_and_never_through_a_link() {
    let (_d, ws, outside) = world();
    let g = guard(&ws);
    // Helper's finding B: `.git/modules/sub<TAB>` is a link to a copy of the submodule's
    // git directory; trimming the tab would make the gitfile look like the real one's.
    let copy = ws.join(".git/evil-copy");
    std::fs::create_dir_all(&copy).expect("mkdir");
    std::os::unix::fs::symlink("evil-copy", ws.join(".git/modules/sub\t")).expect("ln");
    std::fs::write(ws.join("sub/.git"), "gitdir: ../.git/modules/sub\t\n").expect("w");
    // Finding D: a gitfile through a link in /tmp, swappable after the check.
    let tmp_link = outside.join("g");
    std::os::unix::fs::symlink(ws.join(".git/modules/sub"), &tmp_link).expect("ln");
    std::fs::create_dir_all(ws.join("wt2")).expect("mkdir");
    std::fs::write(
        ws.join("wt2/.git"),
        format!("gitdir: {}\n", tmp_link.display()),
    )
    .expect("w");
    let lines = g.settle();
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/.git")).expect("gitfile"),
        "gitdir: ../.git/modules/sub\n",
        "{lines:#?}"
    );
    assert!(std::fs::symlink_metadata(ws.join(".git/modules/sub\t")).is_err());
    assert!(!ws.join("wt2/.git").exists(), "{lines:#?}");
    assert_eq!(
        named_git_dir(Path::new("/b"), b"gitdir: x\t\r\n", Lead::GitFile),
        Some(PathBuf::from("/b/x\t"))
    );
    assert_eq!(
        named_git_dir(Path::new("/b"), b"gitdir: x\n\0", Lead::GitFile),
        Some(PathBuf::from("/b/x\n"))
    );
    assert_eq!(
        named_git_dir(Path::new("/b"), b"gitdir:x", Lead::GitFile),
        None
    );
    assert_eq!(
        named_git_dir(Path::new("/b"), b"../..\0junk\n", Lead::CommonDir),
        Some(PathBuf::from("/b/../.."))
    );
}

#[test]
fn a_git_directory_swapped_for_a_link_is_put_back() {
    let (_d, ws, _) = world();
    let config = std::fs::read(ws.join(".git/modules/sub/config")).expect("config");
    let g = guard(&ws);
    let sub = ws.join(".git/modules/sub");
    std::fs::rename(&sub, ws.join(".git/evil")).expect("mv");
    std::os::unix::fs::symlink("../evil", &sub).expect("ln");
    let lines = g.settle();
    assert!(!lines.is_empty());
    let meta = std::fs::symlink_metadata(&sub).expect("sub");
    assert!(meta.is_dir(), "{lines:#?}");
    assert_eq!(std::fs::read(sub.join("config")).expect("config"), config);
}

#[test]
fn a_new_link_into_a_writable_place_outside_the_roots_is_reverted() {
    let (_d, ws, outside) = world();
    std::os::unix::fs::symlink("/usr/share", ws.join("docs-link")).expect("ln");
    let g = guard(&ws);
    // Helper's finding D, the other way: a repository in /tmp the person's git would find
    // when they enter the link (filled now or in a later call).
    std::os::unix::fs::symlink(&outside, ws.join("vendored")).expect("ln");
    std::os::unix::fs::symlink(outside.join("not-yet"), ws.join("later")).expect("ln");
    std::os::unix::fs::symlink("a", ws.join("inside")).expect("ln");
    let lines = g.settle();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(std::fs::symlink_metadata(ws.join("vendored")).is_err());
    assert!(std::fs::symlink_metadata(ws.join("later")).is_err());
    assert!(std::fs::symlink_metadata(ws.join("inside")).is_ok());
    assert!(std::fs::symlink_metadata(ws.join("docs-link")).is_ok());
}

#[test]
fn a_folder_made_unlistable_still_has_its_repositories_judged() {
    let (_d, ws, _) = world();
    let g = guard(&ws);
    // Helper's finding E: git passes through a folder it cannot list; the guard must look.
    git(&ws, &["clone", "-q", ".", "p/lib"]);
    git(&ws.join("p/lib"), &["config", "core.fsmonitor", "touch x"]);
    std::fs::set_permissions(ws.join("p"), std::fs::Permissions::from_mode(0o111)).expect("chmod");
    let lines = g.settle();
    assert!(
        lines.iter().any(|l| l.ends_with("p/lib/.git/config")),
        "{lines:#?}"
    );
    let config = std::fs::read_to_string(ws.join("p/lib/.git/config")).unwrap_or_default();
    assert!(!config.contains("fsmonitor"), "{config}");
}

#[test]
fn a_worktree_setting_may_only_name_the_repositorys_own_worktree() {
    let (_d, ws, outside) = world();
    let config = ws.join(".git/modules/sub/config");
    let original = std::fs::read_to_string(&config).expect("c");
    let set = |value: &str| {
        git(
            &ws,
            &[
                "config",
                "--file",
                ".git/modules/sub/config",
                "core.worktree",
                value,
            ],
        )
    };
    // The submodule's own folder, spelt otherwise (what `git submodule` writes): it stays.
    let g = guard(&ws);
    set("../../.././sub");
    let lines = g.settle();
    assert!(lines.is_empty(), "{lines:#?}");
    std::fs::write(&config, &original).expect("w");
    // Helper's finding 5: the person's `git restore .` in `sub` would write outside; the
    // second round's E1 hid the outside behind a comment git stops at; E2 named the
    // workspace's own hooks folder, and a root's folder holds its protected files.
    for value in [
        outside.to_str().expect("utf-8").to_owned(),
        format!("{}#/../../../sub", outside.display()),
        "../../hooks".to_owned(),
        "../../..".to_owned(),
        "../../../wt".to_owned(),
    ] {
        let g = guard(&ws);
        set(&value);
        let lines = g.settle();
        assert_eq!(lines.len(), 1, "{value}: {lines:#?}");
        assert_eq!(
            std::fs::read_to_string(&config).expect("c"),
            original,
            "{value}"
        );
    }
}

#[test]
fn a_remote_url_into_an_unwatched_writable_place_is_reverted_and_the_old_remote_files_too() {
    let (_d, ws, outside) = world();
    let g = guard(&ws);
    // Helper's E5: a push to a repository in /tmp runs its hooks; E6: `.git/remotes/origin`.
    git(
        &ws.join("sub"),
        &[
            "config",
            "remote.origin.pushurl",
            outside.join("evil.git").to_str().expect("utf-8"),
        ],
    );
    std::fs::create_dir_all(ws.join(".git/remotes")).expect("mkdir");
    std::fs::write(
        ws.join(".git/remotes/origin"),
        format!("URL: {}\n", outside.join("evil.git").display()),
    )
    .expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(!ws.join(".git/remotes/origin").exists());
    let config = std::fs::read_to_string(ws.join(".git/modules/sub/config")).expect("c");
    assert!(!config.contains("pushurl"), "{config}");
    // Into the workspace (its hooks are judged) or a remote host: it stays.
    let g = guard(&ws);
    git(
        &ws.join("sub"),
        &[
            "config",
            "remote.origin.pushurl",
            ws.join("remote.git").to_str().expect("utf-8"),
        ],
    );
    git(
        &ws.join("sub"),
        &["config", "remote.other.url", "git@example.invalid:x/y.git"],
    );
    let lines = g.settle();
    assert!(lines.is_empty(), "{lines:#?}");
    assert!(is_local_url("/a/b") && is_local_url("../x") && is_local_url("./a:b"));
    assert!(!is_local_url("host:x") && !is_local_url("https://h/x") && !is_local_url("h:/x"));
}

#[test]
fn ordinary_config_keys_of_a_new_clone_keep_it_whole() {
    let (_d, ws, _) = world();
    let g = guard(&ws);
    git(&ws, &["clone", "-q", ".", "c"]);
    git(&ws.join("c"), &["config", "user.email", "a@x.invalid"]);
    git(&ws.join("c"), &["config", "pull.rebase", "true"]);
    git(
        &ws.join("c"),
        &["sparse-checkout", "set", "--skip-checks", "a"],
    );
    let lines = g.settle();
    assert!(lines.is_empty(), "{lines:#?}");
    assert!(
        std::fs::read_to_string(ws.join("c/.git/config"))
            .expect("c")
            .contains("[remote")
    );
}

#[test]
fn a_repository_under_a_bare_repositorys_objects_is_judged() {
    let (_d, ws, _) = world();
    git(&ws, &["init", "-q", "--bare", "hidden.git"]);
    let g = guard(&ws);
    // Helper's E3: a gitlink's worktree inside a bare repository's objects folder.
    git(&ws, &["init", "-q", "hidden.git/objects/m"]);
    git(
        &ws.join("hidden.git/objects/m"),
        &["config", "core.fsmonitor", "touch x"],
    );
    let lines = g.settle();
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("hidden.git/objects/m/.git/config")),
        "{lines:#?}"
    );
    // The same with the bare repository made in the call and unmade for a hook of its own:
    // what its folders hold is judged all the same.
    let g = guard(&ws);
    git(&ws, &["init", "-q", "--bare", "new.git"]);
    std::fs::write(ws.join("new.git/hooks/pre-receive"), "x").expect("w");
    git(&ws, &["init", "-q", "new.git/objects/m"]);
    git(
        &ws.join("new.git/objects/m"),
        &["config", "core.fsmonitor", "touch x"],
    );
    let lines = g.settle();
    assert!(
        lines.iter().any(|l| l.ends_with("new.git/HEAD")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("new.git/objects/m/.git/config")),
        "{lines:#?}"
    );
}

#[test]
fn a_link_through_a_missing_folder_and_dot_dot_is_reverted() {
    let (_d, ws, outside) = world();
    let g = guard(&ws);
    // Helper's E4: `<missing>/../..` reads as the workspace now and as anything once a later
    // call makes `<missing>` a symlink.
    let target = format!(
        "{}/n/../../{}/vendor",
        outside.display(),
        ws.strip_prefix("/").expect("abs").display()
    );
    std::os::unix::fs::symlink(&target, ws.join("vendor-link")).expect("ln");
    let lines = g.settle();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(std::fs::symlink_metadata(ws.join("vendor-link")).is_err());
}

#[test]
fn a_relative_hooks_path_is_watched_in_every_worktree_and_protected_paths_in_nested_ones() {
    let (_d, ws, _) = world();
    git(&ws, &["config", "core.hooksPath", ".husky/_"]);
    git(&ws, &["clone", "-q", ".", "inner"]);
    let g = guard(&ws);
    // Helper's E7: git runs hooks from `.husky/_` of the worktree it works in.
    std::fs::create_dir_all(ws.join("wt/.husky/_")).expect("mkdir");
    std::fs::write(ws.join("wt/.husky/_/pre-commit"), "x").expect("w");
    // A nested repository's and a linked worktree's own hook manager configs.
    std::fs::write(ws.join("inner/.pre-commit-config.yaml"), "x").expect("w");
    std::fs::write(ws.join("wt/lefthook.yml"), "x").expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    for gone in [
        "wt/.husky/_/pre-commit",
        "inner/.pre-commit-config.yaml",
        "wt/lefthook.yml",
    ] {
        assert!(!ws.join(gone).exists(), "{gone}");
    }
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws);
    let g = GitGuard::before(&policy).expect("guard");
    assert!(g.watches(&ws.join("inner/.vscode/tasks.json")));
    assert!(g.watches(&ws.join("wt/.husky/_/pre-commit")));
    assert!(!g.watches(&ws.join("inner/src/main.rs")));
}

#[test]
fn the_fence_denies_what_would_make_a_folder_a_repository_and_a_bare_repositorys_config() {
    let (_d, ws, _) = world();
    let src = ws.join("src");
    std::fs::create_dir_all(src.join("objects")).expect("mkdir");
    std::fs::create_dir_all(src.join("refs")).expect("mkdir");
    git(&ws, &["init", "-q", "--bare", "remote.git"]);
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws);
    let g = GitGuard::before(&policy).expect("guard");
    assert!(g.watches(&src.join("HEAD")));
    assert!(g.watches(&ws.join("remote.git/config")));
    assert!(g.watches(&ws.join("remote.git/hooks/pre-receive")));
    for free in [
        "src/config",
        "src/main.rs",
        "src/objects/x",
        "remote.git/description",
        "lib/HEAD",
    ] {
        assert!(!g.watches(&ws.join(free)), "{free}");
    }
    std::fs::write(src.join("HEAD"), "ref: refs/heads/main\n").expect("w");
    std::fs::remove_dir(src.join("objects")).expect("rmdir");
    let g = GitGuard::before(&policy).expect("guard");
    assert!(
        g.watches(&src.join("objects/ab/cd")),
        "the objects folder would complete it"
    );
    assert!(g.watches(&src.join("commondir")));
}

#[test]
fn nothing_is_guarded_read_only_or_when_nothing_is_protected() {
    let (_d, ws, _) = world();
    assert!(GitGuard::before(&ProviderPolicy::new(ConfinedMode::ReadOnly, &ws)).is_none());
    let none = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws)
        .with_roots(|r| r.with_protected_paths(Vec::new()));
    assert!(GitGuard::before(&none).is_none());
}

#[test]
fn a_concurrent_call_never_puts_back_what_another_calls_guard_removed() {
    let (_d, ws, _) = world();
    git(&ws, &["clone", "-q", ".", "nr"]);
    let hook = ws.join("nr/.git/hooks/post-checkout");
    // Helper's third round, E3: call A plants a hook and sleeps; call B starts (its snapshot
    // would hold the hook); A's guard removes it; B's must not restore it.
    let a = guard(&ws);
    std::fs::write(&hook, "x").expect("w");
    let b = guard(&ws);
    let lines = a.settle();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let lines = b.settle();
    assert!(lines.is_empty(), "{lines:#?}");
    assert!(!hook.exists());
    // With both gone, the next call takes a fresh snapshot: the person's own hook stays.
    std::fs::write(&hook, "mine").expect("w");
    let c = guard(&ws);
    assert!(c.settle().is_empty());
    assert_eq!(std::fs::read_to_string(&hook).expect("r"), "mine");
}

#[test]
fn a_push_target_in_tmp_is_refused_however_it_is_spelt() {
    let (_d, ws, outside) = world();
    let evil = outside.join("evil.git");
    let e = evil.to_str().expect("utf-8");
    let relative_e = e.trim_start_matches('/');
    // Helper's third round, E1: `file://localhost/...` (git drops the host), `%74` (git
    // decodes it), and a branch whose remote is a path (git pushes there directly).
    for (key, value) in [
        (
            "remote.origin.url",
            format!("file://localhost/{relative_e}"),
        ),
        (
            "remote.origin.url",
            format!("FILE:///{}", relative_e.replacen('t', "%74", 1)),
        ),
        ("branch.main.remote", e.to_owned()),
        ("branch.main.pushRemote", format!("file://{e}")),
    ] {
        let g = guard(&ws);
        git(&ws.join("sub"), &["config", key, &value]);
        let lines = g.settle();
        assert_eq!(lines.len(), 1, "{key} = {value}: {lines:#?}");
    }
    // A remote's name, the repository itself, a host: they stay.
    let g = guard(&ws);
    git(
        &ws.join("sub"),
        &["config", "branch.main.remote", "upstream"],
    );
    git(&ws.join("sub"), &["config", "branch.other.remote", "."]);
    git(
        &ws.join("sub"),
        &["config", "remote.up.url", "https://example.invalid/x.git"],
    );
    let lines = g.settle();
    assert!(lines.is_empty(), "{lines:#?}");
}

#[test]
fn worktrees_and_submodules_named_like_data_folders_are_judged_and_kept() {
    let (_d, ws, _) = world();
    // Helper's third round, E2 and its spurious revert: a worktree named `logs` is ordinary
    // git, and its git directory is judged like any other.
    let g = guard(&ws);
    git(&ws, &["worktree", "add", "-q", "wt/logs", "-b", "b1"]);
    let lines = g.settle();
    assert!(lines.is_empty(), "{lines:#?}");
    assert!(ws.join("wt/logs/.git").is_file());
    let g = guard(&ws);
    std::fs::write(
        ws.join(".git/worktrees/logs/config.worktree"),
        "[core]\n\tfsmonitor = x\n",
    )
    .expect("w");
    let lines = g.settle();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    // A bare clone inside .git/logs reached through a link: the link goes.
    let g = guard(&ws);
    git(&ws, &["clone", "-q", "--bare", ".", ".git/logs/docs"]);
    std::os::unix::fs::symlink(".git/logs/docs", ws.join("docs")).expect("ln");
    let lines = g.settle();
    assert!(
        std::fs::symlink_metadata(ws.join("docs")).is_err(),
        "{lines:#?}"
    );
}

#[test]
fn a_file_of_gits_surface_with_a_second_name_gets_an_inode_of_its_own_again() {
    let (_d, ws, outside) = world();
    let module_config = ws.join(".git/modules/sub/config");
    let before = std::fs::read(&module_config).expect("the submodule's config");
    let g = guard(&ws);
    // Attack round 4, under Landlock (bwrap's binds make a link across them EXDEV): a hard
    // link between the workspace and /tmp is a name a later call in another workspace may
    // write, where no guard of this one looks. Both ways: a second name outside for a
    // config that stays byte for byte the same, and a new repository's config that is a link
    // to a file outside.
    std::fs::hard_link(&module_config, outside.join("alias")).expect("ln out");
    git(&ws, &["init", "-q", "nested"]);
    let nested_config = ws.join("nested/.git/config");
    let planted = outside.join("planted");
    std::fs::copy(&nested_config, &planted).expect("copy");
    std::fs::remove_file(&nested_config).expect("rm");
    std::fs::hard_link(&planted, &nested_config).expect("ln in");
    let lines = g.settle();
    for path in [&module_config, &nested_config] {
        assert!(
            lines
                .iter()
                .any(|l| l.contains("reverted") && l.ends_with(path.to_str().expect("utf-8"))),
            "{}: {lines:#?}",
            path.display()
        );
    }
    // The later call elsewhere: it writes the names outside.
    let marker = outside.join("ran");
    for name in ["alias", "planted"] {
        let mut text = std::fs::read_to_string(outside.join(name)).expect("outside name");
        text.push_str(&format!(
            "[core]\n\tfsmonitor = touch {}\n",
            marker.display()
        ));
        std::fs::write(outside.join(name), text).expect("write outside");
    }
    assert_eq!(std::fs::read(&module_config).expect("config"), before);
    assert!(!std::fs::read_to_string(&nested_config).is_ok_and(|c| c.contains("fsmonitor")));
    assert!(!host_status_runs_code(&ws, &marker));
    assert!(!host_status_runs_code(&ws.join("nested"), &marker));
}

#[test]
fn a_removal_counts_as_done_only_where_its_folder_is_really_gone() {
    let (_d, ws, outside) = world();
    std::os::unix::fs::symlink(&outside, ws.join("away")).expect("ln");
    assert!(revert::is_directory_chain(&ws, Path::new(".git/hooks")));
    assert!(revert::is_directory_chain(&ws, Path::new("")));
    // Gone, or not a real directory: nothing of the entry is left there to remove.
    assert!(!revert::is_directory_chain(
        &ws,
        Path::new(".git/nothing/here")
    ));
    assert!(!revert::is_directory_chain(&ws, Path::new("away")));
    assert!(!revert::is_directory_chain(&ws, Path::new("a")));
}

#[test]
fn a_repository_made_at_the_top_of_the_temp_dir_goes_and_one_that_was_there_stays() {
    let (_d, ws, outside) = world();
    // A temp dir strictly below a temp area, so it is a writable place outside the roots.
    let temp = sandbox_test_support::scratch_dir("gitguard-tmpdir-");
    let temp = sandbox::canonical_path(temp.path()).expect("canonical");
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws)
        .with_roots(|r| r.with_temp_dir(Some(temp.clone())));
    let g: Box<dyn CallGuard> = Box::new(GitGuard::before(&policy).expect("a guard"));
    // Attack round 4: a bare repository made a worktree's, with an fsmonitor, at the top of
    // $TMPDIR; the person's git in any folder below it that is no repository ran it.
    let marker = outside.join("ran");
    git(&temp, &["init", "-q", "--bare", ".git"]);
    git(
        &temp,
        &["--git-dir", ".git", "config", "core.bare", "false"],
    );
    git(
        &temp,
        &["--git-dir", ".git", "config", "core.worktree", ".."],
    );
    let monitor = format!("touch {}; false", marker.display());
    git(
        &temp,
        &["--git-dir", ".git", "config", "core.fsmonitor", &monitor],
    );
    std::fs::create_dir(temp.join("build-1")).expect("mkdir");
    let lines = g.settle();
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with(temp.join(".git").to_str().expect("utf-8"))),
        "{lines:#?}"
    );
    assert!(std::fs::symlink_metadata(temp.join(".git")).is_err());
    assert!(!host_status_runs_code(&temp.join("build-1"), &marker));
    // One that was there before the call is the person's: it stays.
    git(&temp, &["init", "-q"]);
    let g: Box<dyn CallGuard> = Box::new(GitGuard::before(&policy).expect("a guard"));
    assert_eq!(g.settle(), Vec::<String>::new());
    assert!(temp.join(".git/HEAD").exists());
}

#[test]
fn a_toolchain_file_in_any_folder_is_judged_and_the_fence_denies_it() {
    let (_d, ws, _) = world();
    std::fs::create_dir_all(ws.join("member/deep")).expect("mkdir");
    std::fs::write(ws.join("member/deep/mise.toml"), "[tools]\n").expect("the person's");
    let g = guard(&ws);
    // Attack round 5: cargo in member/ takes member/rust-toolchain.toml, whose `path` names
    // the folder its cargo then runs from; the person's `rustc --version` there ran it.
    let planted = ws.join("member/rust-toolchain.toml");
    std::fs::write(&planted, "[toolchain]\npath = \"/var/tmp/tc\"\n").expect("plant");
    std::fs::write(
        ws.join("member/deep/.tool-versions"),
        "nodejs path:/var/tmp/tc\n",
    )
    .expect("plant");
    std::fs::write(ws.join("member/deep/mise.toml"), "[hooks]\nenter = \"x\"\n").expect("edit");
    std::fs::write(ws.join("member/notes.toml"), "ok\n").expect("ordinary");
    let lines = g.settle();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(std::fs::symlink_metadata(&planted).is_err());
    assert!(std::fs::symlink_metadata(ws.join("member/deep/.tool-versions")).is_err());
    assert_eq!(
        std::fs::read_to_string(ws.join("member/deep/mise.toml")).expect("restored"),
        "[tools]\n"
    );
    assert!(ws.join("member/notes.toml").exists());
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws);
    let fence = GitGuard::before(&policy).expect("a guard");
    assert!(fence.watches(&ws.join("member/rust-toolchain")));
    assert!(!fence.watches(&ws.join("member/Cargo.toml")));
    // A deployment that does not protect them: judged nowhere below the top.
    let narrow = policy.with_roots(|r| {
        r.with_protected_paths(vec![
            sandbox::ProtectedPath::new(".git/hooks").expect("pattern"),
        ])
    });
    let fence = GitGuard::before(&narrow).expect("a guard");
    assert!(!fence.watches(&ws.join("member/rust-toolchain.toml")));
}
