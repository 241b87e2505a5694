//! The escalation ladder and the closed mode vocabularies: what may be asked for, which mode is
//! wider, and the exact wire names a config file, a log or the protocol carries.

use rstest::rstest;
use sandbox::{ConfinedMode, SandboxEnforcement, SandboxMode, denial_marker};

use SandboxMode::{DangerFullAccess, ReadOnly, WorkspaceWrite};

#[rstest]
#[case(ReadOnly, ReadOnly, false)]
#[case(ReadOnly, WorkspaceWrite, false)]
#[case(ReadOnly, DangerFullAccess, false)]
#[case(WorkspaceWrite, ReadOnly, true)]
#[case(WorkspaceWrite, WorkspaceWrite, false)]
#[case(WorkspaceWrite, DangerFullAccess, false)]
#[case(DangerFullAccess, ReadOnly, true)]
#[case(DangerFullAccess, WorkspaceWrite, true)]
#[case(DangerFullAccess, DangerFullAccess, false)]
fn the_ladder_is_strict(
    #[case] mode: SandboxMode,
    #[case] other: SandboxMode,
    #[case] wider: bool,
) {
    assert_eq!(
        mode.is_wider_than(other),
        wider,
        "{mode} wider than {other}"
    );
}

#[test]
fn the_ladder_runs_narrowest_first() {
    assert_eq!(
        SandboxMode::ALL,
        [ReadOnly, WorkspaceWrite, DangerFullAccess]
    );
    for pair in SandboxMode::ALL.windows(2) {
        assert!(pair[1].is_wider_than(pair[0]), "{pair:?}");
    }
}

#[rstest]
#[case(ReadOnly, "read-only", Some(ConfinedMode::ReadOnly))]
#[case(WorkspaceWrite, "workspace-write", Some(ConfinedMode::WorkspaceWrite))]
#[case(DangerFullAccess, "danger-full-access", None)]
fn each_mode_has_one_wire_name_and_only_confined_ones_reach_a_provider(
    #[case] mode: SandboxMode,
    #[case] wire: &str,
    #[case] confined: Option<ConfinedMode>,
) {
    assert_eq!(mode.as_str(), wire);
    assert_eq!(mode.to_string(), wire);
    assert_eq!(wire.parse::<SandboxMode>(), Ok(mode));
    assert_eq!(
        serde_json::to_string(&mode).expect("serialize"),
        format!("\"{wire}\"")
    );
    assert_eq!(
        serde_json::from_str::<SandboxMode>(&format!("\"{wire}\"")).expect("deserialize"),
        mode
    );
    assert_eq!(mode.confined(), confined);
    match confined {
        Some(c) => {
            assert_eq!(c.as_str(), wire);
            assert_eq!(c.to_string(), wire);
            assert_eq!(wire.parse::<ConfinedMode>(), Ok(c));
            assert_eq!(SandboxMode::from(c), mode);
            assert_eq!(
                serde_json::to_string(&c).expect("serialize"),
                format!("\"{wire}\"")
            );
        }
        None => {
            let err = wire.parse::<ConfinedMode>().expect_err("not confined");
            assert_eq!(err.given, wire);
            assert_eq!(err.expected, "read-only, workspace-write");
        }
    }
}

#[rstest]
#[case("")]
#[case("readonly")]
#[case("Read-Only")]
#[case("workspace_write")]
#[case("full-access")]
#[case(" read-only")]
fn a_name_outside_the_vocabulary_is_refused_and_named(#[case] given: &str) {
    let err = given.parse::<SandboxMode>().expect_err("unknown");
    assert_eq!(err.given, given);
    assert_eq!(
        err.to_string(),
        format!(
            "unknown sandbox mode {given:?}; expected one of read-only, workspace-write, danger-full-access"
        )
    );
    assert!(given.parse::<ConfinedMode>().is_err());
    assert!(serde_json::from_str::<SandboxMode>(&format!("{given:?}")).is_err());
}

#[rstest]
#[case(SandboxEnforcement::Full, "full")]
#[case(SandboxEnforcement::Partial, "partial")]
fn enforcement_wire_names(#[case] enforcement: SandboxEnforcement, #[case] wire: &str) {
    assert_eq!(enforcement.as_str(), wire);
    assert_eq!(enforcement.to_string(), wire);
    assert_eq!(wire.parse::<SandboxEnforcement>(), Ok(enforcement));
    assert_eq!(
        serde_json::from_str::<SandboxEnforcement>(&format!("\"{wire}\"")).expect("deserialize"),
        enforcement
    );
}

#[test]
fn an_unknown_enforcement_is_refused() {
    let err = "Full".parse::<SandboxEnforcement>().expect_err("unknown");
    assert_eq!(
        (err.given.as_str(), err.expected),
        ("Full", "full, partial")
    );
}

#[rstest]
#[case(ReadOnly, "[sandbox: file access denied under read-only mode]")]
#[case(
    WorkspaceWrite,
    "[sandbox: file access denied under workspace-write mode]"
)]
fn the_denial_marker_names_the_mode(#[case] mode: SandboxMode, #[case] marker: &str) {
    assert_eq!(denial_marker(mode), marker);
}
