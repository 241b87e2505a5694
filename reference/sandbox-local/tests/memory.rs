//! The per-process memory limit of a confined call (`LocalConfig::memory_limit`, the launcher's
//! `--memory`): on the real bwrap and Landlock backends a payload cannot hold more than the
//! limit in one process, cannot raise it, and works normally below it; the default is the one
//! the README states.

use std::ffi::OsString;

use sandbox::{ConfinedMode, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::{Backend, DEFAULT_MEMORY_LIMIT, LocalConfig, LocalProvider};
use sandbox_test_support::scratch_dir;

/// What the payload tries, one line each: allocate and touch 64 MiB (fits), 512 MiB (does not),
/// then raise its own limit.
const PROBE: &str = r#"
import resource
def attempt(name, act):
    try:
        act()
        print(name, "ok", flush=True)
    except (MemoryError, OSError, ValueError) as e:
        print(name, "refused", type(e).__name__, flush=True)
attempt("small", lambda: bytearray(64 << 20))
attempt("large", lambda: bytearray(512 << 20))
attempt("raise", lambda: resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)))
print("limit", resource.getrlimit(resource.RLIMIT_DATA)[1], flush=True)
"#;

#[test]
fn a_payload_holds_no_more_than_the_limit_and_cannot_raise_it() {
    const LIMIT: u64 = 256 << 20;
    let ws = scratch_dir("memory-");
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let provider = LocalProvider::new(LocalConfig {
            memory_limit: Some(LIMIT),
            ..LocalConfig::only(backend)
        });
        let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws.path());
        let argv: Vec<OsString> = vec!["python3".into(), "-c".into(), PROBE.into()];
        let confined = provider.confine(&argv, &policy).expect("confine");
        let done = launch::run(&confined, &LaunchOptions::in_dir(ws.path()));
        let out = String::from_utf8_lossy(&done.stdout);
        assert_eq!(
            done.exit_code(),
            Some(0),
            "{backend:?}: {out} {:?}",
            done.stderr
        );
        assert!(out.contains("small ok"), "{backend:?}: {out}");
        assert!(
            out.contains("large refused MemoryError"),
            "{backend:?}: {out}"
        );
        assert!(out.contains("raise refused"), "{backend:?}: {out}");
        assert!(
            out.contains(&format!("limit {LIMIT}")),
            "{backend:?}: {out}"
        );
    }
}

#[test]
fn the_default_limit_is_8_gib_per_process_and_none_sets_none() {
    assert_eq!(DEFAULT_MEMORY_LIMIT, 8 << 30);
    assert_eq!(
        LocalConfig::default().memory_limit,
        Some(DEFAULT_MEMORY_LIMIT)
    );
    let ws = scratch_dir("memory-");
    let provider = LocalProvider::new(LocalConfig {
        memory_limit: None,
        ..LocalConfig::only(Backend::Landlock)
    });
    let policy = ProviderPolicy::new(ConfinedMode::ReadOnly, ws.path());
    let argv: Vec<OsString> = vec!["python3".into(), "-c".into(), PROBE.into()];
    let confined = provider.confine(&argv, &policy).expect("confine");
    assert!(
        !confined.argv.iter().any(|a| a == "--memory"),
        "{:?}",
        confined.argv
    );
    let provider = LocalProvider::new(LocalConfig::only(Backend::Landlock));
    let confined = provider.confine(&argv, &policy).expect("confine");
    let at = confined
        .argv
        .iter()
        .position(|a| a == "--memory")
        .expect("--memory");
    assert_eq!(
        confined.argv[at + 1],
        OsString::from((8u64 << 30).to_string())
    );
}
