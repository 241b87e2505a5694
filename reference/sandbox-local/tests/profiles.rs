//! The profiles each backend emits, pinned. Seatbelt cannot run on Linux, so its exact profile and
//! argv are snapshots (reviewed with `cargo insta review`); on macOS the conformance suite runs it
//! for real.

use std::ffi::OsString;
use std::path::PathBuf;

/// Where the launcher bwrap runs the payload through lives in these snapshots.
const GUARD: &str = "/opt/sandbox/bin/landlock-run";

use sandbox::{
    ClassEnforcement, ConfinedMode, EnforcementClass, NetworkMode, ProviderPolicy,
    SandboxEnforcement, SandboxProvider,
};
use sandbox_local::profile::{self, WritableSet};
use sandbox_local::seatbelt;
use sandbox_local::{Backend, LocalConfig, LocalProvider, OperatorRunner};

fn set() -> WritableSet {
    WritableSet {
        workspace: Some(PathBuf::from("/work/my \"project\"")),
        temp: vec![PathBuf::from("/tmp"), PathBuf::from("/var/folders/xy/T")],
        ..WritableSet::default()
    }
}

/// The same set with an extra root and the default protected paths of a repository whose
/// `.git` exists with its hooks and config.
fn protected_set() -> WritableSet {
    let ws = PathBuf::from("/work/my \"project\"");
    WritableSet {
        extra: vec![PathBuf::from("/srv/cache")],
        protected: sandbox::ProtectedPlan {
            paths: vec![ws.join(".git/hooks"), ws.join(".git/config")],
            ancestors: vec![ws.join(".git")],
            pinned: vec![ws.join(".git")],
            read_only: vec![ws.join(".git/hooks"), ws.join(".git/config")],
            uncovered: Vec::new(),
        },
        ..set()
    }
}

#[test]
fn every_dialect_carries_the_extra_roots_and_the_protected_paths() {
    let set = protected_set();
    insta::assert_snapshot!(
        "seatbelt_args_protected",
        lines(&profile::seatbelt_args(
            &set,
            NetworkMode::Enabled,
            Some(profile::STATUS_FD)
        ))
    );
    insta::assert_snapshot!(
        "bwrap_args_protected",
        lines(&profile::bwrap_args(
            &set,
            &binds(&set),
            NetworkMode::Enabled,
            Some(profile::STATUS_FD),
            Some(std::path::Path::new(GUARD))
        ))
    );
    insta::assert_snapshot!(
        "landlock_args_protected",
        lines(&profile::landlock_args(
            &set,
            NetworkMode::Enabled,
            None,
            Some(profile::STATUS_FD)
        ))
    );
}

/// The binds bwrap gets for `set`, numbered as the provider numbers them (descriptors from
/// [`sandbox::LaunchFds::FIRST`] on, in order); no descriptor is opened here.
fn binds(set: &WritableSet) -> Vec<profile::FdBind> {
    profile::bwrap_binds(set)
        .into_iter()
        .zip(sandbox::LaunchFds::FIRST..)
        .map(|(t, fd)| profile::FdBind {
            fd,
            writable: t.writable(),
            dest: t.path,
            identity: None,
        })
        .collect()
}

fn lines(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A profile shape with `roots` writable roots, `protected` paths, `ancestors` and `sockets`.
fn shape(
    roots: usize,
    protected: usize,
    ancestors: usize,
    sockets: usize,
    network: NetworkMode,
) -> seatbelt::Shape {
    seatbelt::Shape {
        roots,
        protected,
        ancestors,
        // The ancestors strictly below their root: one fewer than all (the root itself).
        folded_ancestors: ancestors.saturating_sub(1),
        sockets,
        network,
    }
}

#[test]
fn seatbelt_profile_names_no_path_at_all() {
    insta::assert_snapshot!(
        "seatbelt_profile_read_only",
        profile::seatbelt_profile(&shape(0, 0, 0, 0, NetworkMode::Enabled))
    );
    insta::assert_snapshot!(
        "seatbelt_profile_three_roots",
        profile::seatbelt_profile(&shape(3, 0, 0, 0, NetworkMode::Enabled))
    );
    insta::assert_snapshot!(
        "seatbelt_profile_protected",
        profile::seatbelt_profile(&shape(2, 2, 2, 1, NetworkMode::Enabled))
    );
    for network in [NetworkMode::Enabled, NetworkMode::Restricted] {
        let text = profile::seatbelt_profile(&shape(3, 2, 2, 1, network));
        assert!(!text.contains("/work") && !text.contains("/tmp"), "{text}");
        assert!(!text.contains("(allow default)"), "{text}");
        let first = text
            .lines()
            .find(|l| l.starts_with('(') && !l.starts_with("(version"));
        assert_eq!(first, Some(seatbelt::DENY_DEFAULT), "{text}");
    }
}

#[test]
fn a_restricted_network_is_denied_by_every_profile() {
    insta::assert_snapshot!(
        "seatbelt_profile_network_restricted",
        profile::seatbelt_profile(&shape(1, 0, 0, 0, NetworkMode::Restricted))
    );
    // Restricted, the profile names no network operation but the allowed sockets.
    let restricted = profile::seatbelt_profile(&shape(1, 0, 0, 0, NetworkMode::Restricted));
    let rules: Vec<&str> = restricted.lines().filter(|l| !l.starts_with(';')).collect();
    assert!(
        !rules
            .iter()
            .any(|r| r.contains("network-") || r.contains("AF_INET")),
        "{restricted}"
    );
    let bwrap = profile::bwrap_args(
        &set(),
        &binds(&set()),
        NetworkMode::Restricted,
        Some(profile::STATUS_FD),
        Some(std::path::Path::new(GUARD)),
    );
    insta::assert_snapshot!("bwrap_args_network_restricted", lines(&bwrap));
    let landlock = profile::landlock_args(&set(), NetworkMode::Restricted, None, None);
    let pair = landlock
        .windows(2)
        .any(|w| w[0] == "--net" && w[1] == "restricted");
    assert!(pair, "{landlock:?}");
    for enabled in [
        profile::bwrap_args(&set(), &binds(&set()), NetworkMode::Enabled, None, None),
        profile::landlock_args(&set(), NetworkMode::Enabled, None, None),
    ] {
        assert!(
            !enabled.iter().any(|a| a == "--unshare-net" || a == "--net"),
            "{enabled:?}"
        );
    }
}

#[test]
fn a_sole_seatbelt_candidate_reports_the_network_class_it_was_asked_for() {
    let provider = LocalProvider::new(LocalConfig::only(Backend::Seatbelt));
    let argv = ["true".into()];
    let policy = ProviderPolicy::new(ConfinedMode::ReadOnly, "/");
    let enabled = provider.confine(&argv, &policy).expect("confine");
    assert_eq!(
        enabled.class_report(EnforcementClass::Network).enforcement,
        ClassEnforcement::NotGoverned
    );
    assert_eq!(enabled.enforcement, SandboxEnforcement::Full);
    let restricted = provider
        .confine(&argv, &policy.with_network(NetworkMode::Restricted))
        .expect("confine");
    assert_eq!(
        restricted
            .class_report(EnforcementClass::Network)
            .enforcement,
        ClassEnforcement::Full
    );
    assert_eq!(restricted.enforcement, SandboxEnforcement::Full);
}

#[test]
fn seatbelt_argv_passes_paths_as_parameters_and_wraps_the_trampoline() {
    let args = profile::seatbelt_args(&set(), NetworkMode::Enabled, Some(profile::STATUS_FD));
    insta::assert_snapshot!("seatbelt_args_workspace_write", lines(&args));
}

#[test]
fn bwrap_argv_binds_only_the_writable_set() {
    insta::assert_snapshot!(
        "bwrap_args_workspace_write",
        lines(&profile::bwrap_args(
            &set(),
            &binds(&set()),
            NetworkMode::Enabled,
            Some(profile::STATUS_FD),
            Some(std::path::Path::new(GUARD))
        ))
    );
    let read_only = WritableSet::default();
    insta::assert_snapshot!(
        "bwrap_args_read_only",
        lines(&profile::bwrap_args(
            &read_only,
            &binds(&read_only),
            NetworkMode::Enabled,
            Some(profile::STATUS_FD),
            Some(std::path::Path::new(GUARD))
        ))
    );
}

#[test]
fn landlock_argv_grants_dev_null_and_existing_temp_roots_only() {
    let args = profile::landlock_args(
        &set(),
        NetworkMode::Enabled,
        Some(2),
        Some(profile::STATUS_FD),
    );
    // /var/folders/xy/T does not exist on this host, so it is not granted (a missing root would
    // make the launcher refuse every command).
    insta::assert_snapshot!("landlock_args_workspace_write_capped", lines(&args));
}

#[test]
fn an_empty_chain_fails_closed() {
    let provider = LocalProvider::new(LocalConfig {
        chain: Vec::new(),
        ..LocalConfig::default()
    });
    let err = provider
        .confine(
            &["true".into()],
            &ProviderPolicy::new(ConfinedMode::ReadOnly, "/"),
        )
        .expect_err("no chain, no sandbox");
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
    assert!(
        err.detail
            .contains("no sandbox backend exists for this platform"),
        "{err}"
    );
}

#[test]
fn a_sole_seatbelt_candidate_is_selected_without_probing() {
    let provider = LocalProvider::new(LocalConfig::only(Backend::Seatbelt));
    let launch = provider
        .confine(
            &["bash".into(), "-c".into(), "true".into()],
            &ProviderPolicy::new(ConfinedMode::ReadOnly, "/"),
        )
        .expect("selected without probing");
    assert_eq!(launch.argv[0], "/usr/bin/sandbox-exec");
    assert_eq!(launch.backend, "seatbelt");
    assert!(launch.status_channel.is_some());
}

#[test]
fn an_empty_argv_is_refused() {
    let provider = LocalProvider::new(LocalConfig::only(Backend::Seatbelt));
    let err = provider
        .confine(&[], &ProviderPolicy::new(ConfinedMode::ReadOnly, "/"))
        .expect_err("empty argv");
    assert!(err.detail.contains("empty"), "{err}");
}

#[test]
fn operator_runners_need_a_command_and_valid_signatures() {
    assert!(OperatorRunner::new(vec!["/usr/bin/jail".into()], &["jail: "]).is_ok());
    assert!(OperatorRunner::new::<&str>(vec!["/usr/bin/jail".into()], &[]).is_err());
    assert!(OperatorRunner::new(vec!["/usr/bin/jail".into()], &["a\nb"]).is_err());
    assert!(OperatorRunner::new(Vec::new(), &["jail: "]).is_err());
}

#[test]
fn the_selection_is_probed_once_per_provider() {
    // A launcher that counts its own invocations, then is the real one.
    let real = sandbox_local::probe::locate_launcher().expect("landlock-run is built");
    let dir = tempfile::tempdir().expect("tempdir");
    let (counter, wrapper) = (dir.path().join("runs"), dir.path().join("landlock-run"));
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            counter.display(),
            real.display()
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let runs = || {
        std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let provider = LocalProvider::new(LocalConfig {
        launcher: Some(wrapper),
        ..LocalConfig::only(Backend::Landlock)
    });
    provider.selection().expect("landlock is usable here");
    let probes = runs();
    assert!(probes > 0, "selecting ran no probe");
    for _ in 0..3 {
        provider.selection().expect("selected");
        provider
            .confine(
                &["true".into()],
                &ProviderPolicy::new(ConfinedMode::ReadOnly, "/"),
            )
            .expect("confine");
    }
    assert_eq!(runs(), probes, "a later call probed again");
}

#[test]
fn a_runner_that_confines_nothing_is_broken_not_unusable() {
    // The fake bwrap runs the payload unconfined: the probe's write lands.
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/fake-runners/bwrap-passthrough");
    let verdict = sandbox_local::probe::probe(
        Backend::Bwrap,
        &LocalConfig {
            bwrap: Some(fake),
            ..LocalConfig::only(Backend::Bwrap)
        },
    );
    let err = verdict
        .result
        .expect_err("a passthrough runner is not usable");
    assert!(err.confines_nothing(), "{err:?}");
    assert!(err.to_string().contains("confines nothing"), "{err}");
}

/// The launcher is told `--allow-unix-sockets` exactly when the policy allows named sockets, and
/// no dialect ever emits the benchmark's switch that skips its guard, whatever the set says.
#[test]
fn the_socket_allowance_reaches_the_launcher_and_the_unguarded_switch_never_does() {
    for sockets in [
        Vec::new(),
        vec![PathBuf::from("/run/user/1000/ssh-agent.sock")],
    ] {
        let set = WritableSet {
            unix_sockets: sockets.clone(),
            ..protected_set()
        };
        for network in [NetworkMode::Enabled, NetworkMode::Restricted] {
            let dialects = [
                profile::seatbelt_args(&set, network, Some(profile::STATUS_FD)),
                profile::bwrap_args(
                    &set,
                    &binds(&set),
                    network,
                    Some(profile::STATUS_FD),
                    Some(std::path::Path::new(GUARD)),
                ),
                profile::bwrap_args(&set, &binds(&set), network, None, None),
                profile::landlock_args(&set, network, None, Some(profile::STATUS_FD)),
                profile::landlock_args(&set, network, Some(2), None),
            ];
            for (i, argv) in dialects.iter().enumerate() {
                assert!(
                    !argv.iter().any(|a| a == landlock_run::BENCH_UNGUARDED_FLAG),
                    "dialect {i}: {argv:?}"
                );
                let allows = argv.iter().any(|a| a == profile::ALLOW_UNIX_SOCKETS_FLAG);
                // Seatbelt and bwrap without the launcher have no such switch.
                let launcher = matches!(i, 1 | 3 | 4);
                assert_eq!(
                    allows,
                    launcher && !sockets.is_empty(),
                    "dialect {i} {sockets:?}: {argv:?}"
                );
            }
        }
    }
}

/// Seatbelt allows a named socket by path (`network-outbound` on its `literal`), so a launch that
/// allows one names no unix-socket gap in its host-IPC class (only the shared temp area every
/// workspace-write launch reports) and lists the path under `allowed`; every other
/// socket stays closed (the model test in `conformance::seatbelt_model` judges that).
#[test]
fn a_seatbelt_launch_allows_a_named_socket_precisely() {
    let ws = tempfile::tempdir().expect("workspace");
    let elsewhere = tempfile::tempdir().expect("socket dir");
    let socket = elsewhere.path().join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let provider = LocalProvider::new(LocalConfig::only(Backend::Seatbelt));
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws.path())
        .with_roots(|r| r.with_allow_unix_sockets(vec![socket.clone()]));
    let launch = provider
        .confine(&["true".into()], &policy)
        .expect("confine");
    let report = launch.class_report(EnforcementClass::HostIpc);
    assert_eq!(
        report.ungoverned,
        [sandbox_local::probe::HOST_IPC_SHARED_TEMP],
        "{report:?}"
    );
    assert_eq!(report.allowed, vec![socket.display().to_string()]);
    let defines: Vec<String> = launch
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .filter(|a| a.starts_with("UNIX_SOCKET_"))
        .collect();
    assert!(
        defines
            .iter()
            .any(|d| d.ends_with(&*socket.to_string_lossy())),
        "{defines:?}"
    );
}

/// The profile's rule lines for `shape`, each index of a parameter written `_N`, in order and
/// without repeats (one row per kind of rule).
fn rule_lines(shape: &seatbelt::Shape) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in profile::seatbelt_profile(shape).lines() {
        if !line.starts_with('(') || line.starts_with("(version") {
            continue;
        }
        let mut normal = String::new();
        let mut rest = line;
        while let Some(at) = rest.find('_') {
            let (head, tail) = rest.split_at(at + 1);
            normal.push_str(head);
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && tail[digits..].starts_with('"') {
                normal.push('N');
            } else {
                normal.push_str(&tail[..digits]);
            }
            rest = &tail[digits..];
        }
        normal.push_str(rest);
        if !out.contains(&normal) {
            out.push(normal);
        }
    }
    out
}

fn doc(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// docs/macos.md lists every rule of the profile, in order, one row per kind: a rule added,
/// dropped or moved without the table (or the other way round) fails here.
#[test]
fn the_macos_doc_lists_the_seatbelt_profile_rule_by_rule() {
    let text = doc("macos.md");
    let table = text
        .split("<!-- seatbelt-rules:start -->")
        .nth(1)
        .and_then(|t| t.split("<!-- seatbelt-rules:end -->").next())
        .expect("docs/macos.md has the seatbelt-rules table");
    let documented: Vec<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(rule, _)| rule.to_owned()))
        .collect();
    let generated = rule_lines(&shape(2, 2, 2, 1, NetworkMode::Enabled));
    assert_eq!(
        documented, generated,
        "docs/macos.md's table against the profile"
    );
}

/// Every SBPL rule the other docs name in their Seatbelt columns is a rule of the profile (a
/// form ending in ` ...)` names the start of one).
#[test]
fn the_docs_name_only_rules_the_seatbelt_profile_has() {
    let mut rules = rule_lines(&shape(2, 2, 2, 1, NetworkMode::Enabled));
    rules.extend(rule_lines(&shape(2, 2, 2, 1, NetworkMode::Restricted)));
    for name in ["threat-model.md", "network.md", "host-ipc.md", "macos.md"] {
        let text = doc(name);
        let forms = text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|f| f.starts_with("(allow ") || f.starts_with("(deny "));
        for form in forms {
            let known = match form.strip_suffix(" ...)") {
                Some(start) => rules.iter().any(|r| r.starts_with(start)),
                None => rules.iter().any(|r| r == form),
            };
            assert!(
                known,
                "docs/{name} names {form:?}, which the profile does not have"
            );
        }
    }
}
