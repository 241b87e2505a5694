//! Extra writable roots and protected paths as a caller sees them: which roots a policy makes
//! writable, with which codes a bad extra root is refused, and what each dialect is told to keep
//! unwritten inside a repository.

use std::path::{Path, PathBuf};

use rstest::rstest;
use sandbox::{
    ConfinedMode, ExecutionPolicy, ExtraRoot, ProtectedPath, ProviderPolicy, SandboxMode,
    canonical_path, protected_plan, writable_roots,
};
use sandbox_test_support::scratch_root;

fn tmp() -> PathBuf {
    canonical_path(Path::new("/tmp")).expect("canonical /tmp")
}

/// A workspace-write policy protecting the hooks and the config only, so the plan's mechanics
/// (pins, binds, what is uncovered) read plainly; the default list is checked on its own.
fn ww(ws: &Path, extra: &[&Path]) -> ProviderPolicy {
    let two = [".git/hooks", ".git/config"].map(|p| ProtectedPath::new(p).expect("pattern"));
    ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws)
        .with_roots(|r| r.with_temp_dir(None))
        .with_roots(|r| r.with_extra_roots(extra.iter().map(|p| ExtraRoot::new(*p)).collect()))
        .with_roots(|r| r.with_protected_paths(two.to_vec()))
}

#[test]
fn an_extra_root_comes_last_once_and_only_under_workspace_write() {
    let (_d, root) = scratch_root("protected-");
    let (ws, cache) = (root.join("ws"), root.join("cache"));
    std::fs::create_dir(&ws).expect("mkdir");
    std::fs::create_dir(&cache).expect("mkdir");
    assert_eq!(
        writable_roots(&ww(&ws, &[&cache])).expect("roots"),
        vec![ws.clone(), tmp(), cache.clone()]
    );
    // Spelled through `..` or nested in the workspace: the same canonical set, no duplicate.
    let spelled = cache.join("../cache");
    assert_eq!(
        writable_roots(&ww(&ws, &[&spelled, &cache])).expect("roots"),
        vec![ws.clone(), tmp(), cache.clone()]
    );
    std::fs::create_dir(ws.join("sub")).expect("mkdir");
    assert_eq!(
        writable_roots(&ww(&ws, &[&ws.join("sub")])).expect("roots"),
        vec![ws.clone(), tmp()]
    );
    let mut ro = ww(&ws, &[&cache]);
    ro.mode = ConfinedMode::ReadOnly;
    assert!(writable_roots(&ro).expect("roots").is_empty());
}

#[rstest]
#[case::relative("rel/cache", "WRITABLE_ROOT_RELATIVE")]
#[case::missing("%ROOT%/missing", "WRITABLE_ROOT_MISSING")]
#[case::a_file("%ROOT%/file", "WRITABLE_ROOT_NOT_A_DIRECTORY")]
#[case::the_filesystem_root("/", "WRITABLE_ROOT_TOO_BROAD")]
#[case::a_system_directory("/etc", "WRITABLE_ROOT_TOO_BROAD")]
#[case::inside_a_system_tree("/usr/lib", "WRITABLE_ROOT_TOO_BROAD")]
fn a_bad_extra_root_is_refused_with_its_own_code(#[case] spelled: &str, #[case] code: &str) {
    let (_d, root) = scratch_root("protected-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    std::fs::write(root.join("file"), "x").expect("file");
    let extra = PathBuf::from(spelled.replace("%ROOT%", root.to_str().expect("utf-8")));
    let err = writable_roots(&ww(&ws, &[&extra])).expect_err(spelled);
    assert_eq!(err.code(), code, "{err}");
    assert!(err.to_string().starts_with(code), "{err}");
    assert!(err.to_string().contains(&format!("{extra:?}")), "{err}");
}

#[test]
fn the_home_directory_or_an_ancestor_is_no_extra_root() {
    let (_d, root) = scratch_root("protected-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    let home = canonical_path(Path::new(
        &std::env::var_os("HOME").unwrap_or("/root".into()),
    ))
    .expect("home");
    if home.is_dir() && home != Path::new("/") {
        let err = writable_roots(&ww(&ws, &[&home])).expect_err("home");
        assert_eq!(err.code(), "WRITABLE_ROOT_TOO_BROAD", "{err}");
    }
}

#[test]
fn a_pinned_extra_root_swapped_for_another_directory_fails_closed() {
    let (_d, root) = scratch_root("protected-");
    let (ws, cache) = (root.join("ws"), root.join("cache"));
    std::fs::create_dir(&ws).expect("mkdir");
    std::fs::create_dir(&cache).expect("mkdir");
    let mut policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    policy.roots.temp_dir = None;
    policy.roots.extra_roots = vec![ExtraRoot::new(&cache)];
    let policy = policy.pinned().expect("pin");
    assert!(policy.roots.extra_roots[0].pin.is_some());
    assert_eq!(policy.check().expect("roots").len(), 3);
    std::fs::rename(&cache, root.join("old")).expect("mv");
    std::fs::create_dir(&cache).expect("mkdir");
    let err = policy.check().expect_err("moved");
    assert_eq!(err.code(), "WRITABLE_ROOT_MOVED", "{err}");
}

#[rstest]
#[case::empty("")]
#[case::the_root_itself(".")]
#[case::absolute("/etc/passwd")]
#[case::dot_dot("../outside")]
#[case::dot_dot_inside(".git/../../outside")]
fn a_protected_path_that_could_escape_its_root_is_refused(#[case] pattern: &str) {
    let err = ProtectedPath::new(pattern).expect_err(pattern);
    assert!(err.to_string().starts_with("BAD_PROTECTED_PATH"), "{err}");
    assert!(err.to_string().contains(&format!("{pattern:?}")), "{err}");
}

#[test]
fn the_default_protected_paths_are_git_code_surface_and_what_editors_and_agents_run_on_open() {
    let defaults: Vec<String> = ProtectedPath::defaults()
        .into_iter()
        .map(String::from)
        .collect();
    for path in [
        ".git/hooks",
        ".git/config",
        ".git/commondir",
        ".git/config.worktree",
        ".git/info/attributes",
        ".husky",
        ".vscode",
        ".idea",
        ".devcontainer",
        ".mcp.json",
        ".claude",
        ".codex",
        ".cursor",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        ".lefthook",
        ".aider.conf.yml",
    ] {
        assert!(defaults.iter().any(|d| d == path), "{path} in {defaults:?}");
    }
    // What runs only when the person runs the project stays the agent's to change.
    for path in ["Makefile", "package.json", "build.rs", ".gitattributes"] {
        assert!(!defaults.iter().any(|d| d == path), "{path}");
    }
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, "/x");
    assert_eq!(policy.roots.protected_paths, ProtectedPath::defaults());
}

#[test]
fn the_plan_pins_git_binds_hooks_and_config_read_only_and_names_what_is_missing() {
    let (_d, root) = scratch_root("protected-");
    let (ws, cache) = (root.join("ws"), root.join("cache"));
    std::fs::create_dir_all(ws.join(".git/hooks")).expect("mkdir");
    std::fs::write(ws.join(".git/config"), "[core]\n").expect("config");
    std::fs::create_dir(&cache).expect("mkdir");
    let policy = ww(&ws, &[&cache]);
    let roots = writable_roots(&policy).expect("roots");
    let plan = protected_plan(&policy, &roots).expect("plan");
    assert_eq!(plan.pinned, vec![ws.join(".git")]);
    assert_eq!(
        plan.read_only,
        vec![ws.join(".git/hooks"), ws.join(".git/config")]
    );
    // The extra root has no repository: its paths are denied by path, but no mount covers them.
    assert_eq!(
        plan.uncovered,
        vec![cache.join(".git/hooks"), cache.join(".git/config")]
    );
    assert_eq!(plan.ancestors, vec![ws.join(".git"), cache.join(".git")]);
    for denied in [
        ws.join(".git/hooks/pre-commit"),
        ws.join(".git/config"),
        cache.join(".git/hooks/new/deeper"),
    ] {
        assert!(plan.protects(&denied), "{denied:?}");
    }
    for allowed in [
        ws.join(".git/index"),
        ws.join(".git/config.lock"),
        ws.join(".git/hooksx"),
        ws.join("src/.git/hooks"),
    ] {
        assert!(!plan.protects(&allowed), "{allowed:?}");
    }
    // Read-only protects nothing (nothing is writable), and an empty list protects nothing.
    let mut ro = policy.clone();
    ro.mode = ConfinedMode::ReadOnly;
    assert_eq!(protected_plan(&ro, &[]).expect("plan"), Default::default());
    let none = policy
        .clone()
        .with_roots(|r| r.with_protected_paths(Vec::new()));
    assert_eq!(
        protected_plan(&none, &roots).expect("plan"),
        Default::default()
    );
}

#[test]
fn a_protected_path_the_kernel_cannot_look_at_fails_the_plan() {
    // A workspace whose path leaves no room for `/.git` under PATH_MAX: `lstat` answers
    // ENAMETOOLONG, not "not there", so the plan is refused (a call confined without knowing
    // whether the repository is there could leave it writable).
    let (_d, root) = scratch_root("protected-");
    let mut ws = root.clone();
    while ws.as_os_str().len() < 4092 - 201 {
        ws.push("d".repeat(200));
    }
    let room = 4092 - ws.as_os_str().len() - 1;
    ws.push("w".repeat(room));
    assert_eq!(ws.as_os_str().len(), 4092);
    std::fs::create_dir_all(&ws).expect("mkdir");
    let policy = ww(&ws, &[]);
    let roots = writable_roots(&policy).expect("roots");
    let refused = protected_plan(&policy, &roots).expect_err("the plan must be refused");
    assert!(
        refused.to_string().contains("too long") || refused.to_string().contains("File name"),
        "{refused}"
    );
}

#[test]
fn a_git_file_is_kept_read_only_and_a_symlink_on_the_way_is_uncovered_but_denied() {
    let (_d, root) = scratch_root("protected-");
    let (ws, real) = (root.join("ws"), root.join("ws/real.git"));
    std::fs::create_dir_all(real.join("hooks")).expect("mkdir");
    std::fs::write(ws.join(".git"), "gitdir: elsewhere\n").expect(".git file");
    let policy = ww(&ws, &[]);
    let roots = writable_roots(&policy).expect("roots");
    let plan = protected_plan(&policy, &roots).expect("plan");
    assert_eq!(plan.read_only, vec![ws.join(".git")]);
    assert!(plan.uncovered.is_empty() && plan.pinned.is_empty());
    std::fs::remove_file(ws.join(".git")).expect("rm");
    std::os::unix::fs::symlink(&real, ws.join(".git")).expect("symlink");
    let plan = protected_plan(&policy, &roots).expect("plan");
    assert_eq!(
        plan.uncovered,
        vec![ws.join(".git/hooks"), ws.join(".git/config")]
    );
    // The fence and Seatbelt still deny both spellings.
    assert!(plan.protects(&real.join("hooks/pre-commit")));
    assert!(plan.protects(&ws.join(".git/hooks/pre-commit")));
}

#[test]
fn a_policy_without_protected_paths_reads_as_the_defaults_and_an_empty_list_survives_a_round_trip()
{
    let default = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, "/w")
        .with_roots(|r| r.with_temp_dir(None));
    let text = serde_json::to_string(&default).expect("json");
    assert!(!text.contains("protected_paths"), "{text}");
    let back: ProviderPolicy = serde_json::from_str(&text).expect("back");
    assert_eq!(back.roots.protected_paths, ProtectedPath::defaults());
    let none = default
        .clone()
        .with_roots(|r| r.with_protected_paths(Vec::new()));
    let text = serde_json::to_string(&none).expect("json");
    assert!(text.contains("\"protected_paths\":[]"), "{text}");
    let back: ProviderPolicy = serde_json::from_str(&text).expect("back");
    assert!(back.roots.protected_paths.is_empty());
    let one = default
        .with_roots(|r| r.with_protected_paths(vec![ProtectedPath::new(".envrc").expect("ok")]));
    let text = serde_json::to_string(&one).expect("json");
    assert!(text.contains("\"protected_paths\":[\".envrc\"]"), "{text}");
    assert_eq!(ProtectedPath::new("./a//b").expect("ok").to_string(), "a/b");
}

#[test]
fn a_symlink_leading_out_of_the_writable_set_adds_no_outside_path_to_deny() {
    let (_d, root) = scratch_root("protected-");
    let (ws, elsewhere) = (root.join("ws"), root.join("elsewhere"));
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(elsewhere.join("hooks")).expect("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, ws.join(".git")).expect("symlink");
    let policy = ww(&ws, &[]);
    let roots = writable_roots(&policy).expect("roots");
    let plan = protected_plan(&policy, &roots).expect("plan");
    assert_eq!(
        plan.paths,
        vec![ws.join(".git/hooks"), ws.join(".git/config")]
    );
}
