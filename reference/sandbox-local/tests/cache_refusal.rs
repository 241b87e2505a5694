//! The provider's probe cache is refused, for the provider's lifetime, as soon as a policy it
//! confines could write it: nothing is read from it or stored in it, and the provider still
//! confines (it probes). A cache beside the workspace is used as before.

use std::ffi::OsString;

use sandbox::{ConfinedMode, ProviderPolicy, SandboxProvider};
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_test_support::scratch_root;

fn argv() -> Vec<OsString> {
    vec!["true".into()]
}

#[test]
fn a_cache_inside_a_served_policys_writable_roots_is_never_used_and_confinement_goes_on() {
    let (base, root) = scratch_root("cache-refusal-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("ws");
    for mode in [ConfinedMode::ReadOnly, ConfinedMode::WorkspaceWrite] {
        let inside = ws.join(".cache/probes");
        let mut config = LocalConfig::only(Backend::Landlock);
        config.verdict_cache = Some(inside.clone());
        let provider = LocalProvider::new(config);
        assert!(
            provider.cache_refusal().is_none(),
            "refused before any policy"
        );
        let confined = provider
            .confine(&argv(), &ProviderPolicy::new(mode, &ws))
            .expect("it still confines");
        assert_eq!(confined.backend, "landlock");
        let refusal = provider.cache_refusal().expect("refused");
        assert_eq!(refusal.code(), "STATE_DIR_IN_WRITABLE_ROOT", "{refusal}");
        assert!(!inside.exists(), "{mode:?}: the refused cache was written");
        let selection = provider.selection().expect("selected");
        assert!(!selection.cached);
        provider.forget_cached_selection();
        assert!(!inside.exists());
    }
    // Beside the workspace: used (a verdict is stored), and a later provider reads it.
    let beside = base.path().join("cache");
    let mut config = LocalConfig::only(Backend::Landlock);
    config.verdict_cache = Some(beside.clone());
    let provider = LocalProvider::new(config.clone());
    provider
        .confine(
            &argv(),
            &ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws),
        )
        .expect("confine");
    assert!(provider.cache_refusal().is_none());
    assert_eq!(std::fs::read_dir(&beside).expect("stored").count(), 1);
    let again = LocalProvider::new(config);
    again
        .confine(
            &argv(),
            &ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws),
        )
        .expect("confine");
    assert!(again.selection().expect("selected").cached);
    // In /tmp: refused when the provider is made.
    let mut config = LocalConfig::only(Backend::Landlock);
    config.verdict_cache = Some("/tmp/sandbox-cache-refusal-test".into());
    let provider = LocalProvider::new(config);
    assert_eq!(
        provider.cache_refusal().map(|e| e.code()),
        Some("STATE_DIR_IN_WRITABLE_ROOT")
    );
}
