//! The `hardening` family's own rules: every case checks its whole world, its ids are `HD-`, and
//! its step kinds reject what they do not know with `file:line:col`, like every other kind.

use std::path::{Path, PathBuf};

use conformance::scenario::load::load_suite;
use conformance::scenario::{AttackOutcome, Step};

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

#[test]
fn every_hardening_case_ends_with_a_world_diff() {
    let suite = load_suite(&scenarios());
    assert!(suite.errors.is_empty(), "{:#?}", suite.errors);
    let family: Vec<_> = suite
        .scenarios
        .iter()
        .filter(|s| s.family == "hardening")
        .collect();
    assert!(family.len() >= 9, "{} hardening scenarios", family.len());
    for scenario in family {
        assert!(scenario.id.starts_with("HD-"), "{}", scenario.id);
        for case in &scenario.cases {
            let steps = &case.case.steps;
            // A `bind-race` step diffs its own world, as an `attack` step does; a wire step that
            // expects no survivors checks the host's process table (HD-021's cancel).
            let attack = steps.iter().any(|s| match s {
                Step::Attack(_) | Step::BindRace(_) => true,
                Step::Wire(w) => w.expect.no_survivors,
                _ => false,
            });
            let world_last = matches!(steps.last(), Some(Step::World(_)));
            assert!(
                attack || world_last,
                "{} {}: a hardening case needs an attack step or a final world step",
                scenario.id,
                case.name
            );
        }
    }
}

#[test]
fn refusals_are_never_accepted_where_the_payload_must_run() {
    // A refusal is an acceptable outcome only where the scenario says so: the root escapes, the
    // descriptor and survivor cases must run the payload (a backend cannot pass them by refusing).
    let suite = load_suite(&scenarios());
    for scenario in suite
        .scenarios
        .iter()
        .filter(|s| ["HD-001", "HD-002", "HD-003", "HD-009"].contains(&s.id.as_str()))
    {
        for case in &scenario.cases {
            for step in &case.case.steps {
                if let Step::Attack(a) = step {
                    assert!(
                        matches!(
                            a.expect.outcome,
                            AttackOutcome::Ran | AttackOutcome::TimedOut
                        ),
                        "{} {}",
                        scenario.id,
                        case.name
                    );
                }
            }
        }
    }
}

fn load_one(yaml: &str) -> String {
    let root = tempfile::tempdir().expect("tempdir");
    let family = root.path().join("hardening");
    std::fs::create_dir(&family).expect("mkdir");
    std::fs::write(family.join("bad.yaml"), yaml).expect("write");
    let suite = load_suite(root.path());
    // Shown relative to the root's parent: `<tempdir name>/hardening/bad.yaml:...`.
    let shown = suite
        .errors
        .first()
        .map(ToString::to_string)
        .unwrap_or_else(|| "no error".into());
    shown
        .split_once('/')
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or(shown)
}

const HEADER: &str =
    "id: HD-900\ntitle: t\nlevel: must\nseed: s\ncases:\n  - name: c\n    steps:\n";

#[test]
fn an_unknown_attack_outcome_names_file_line_col() {
    let e = load_one(&format!(
        "{HEADER}      - attack:\n          mode: read-only\n          run: \"true\"\n          expect: {{ outcome: escaped }}\n"
    ));
    assert!(
        e.starts_with("hardening/bad.yaml:11:30: unknown variant `escaped`"),
        "{e}"
    );
}

#[test]
fn an_unknown_attack_key_names_file_line_col() {
    let e = load_one(&format!(
        "{HEADER}      - attack:\n          mode: read-only\n          run: \"true\"\n          hold_fds: true\n          expect: {{ outcome: ran }}\n"
    ));
    assert!(
        e.starts_with("hardening/bad.yaml:11:11: unknown field `hold_fds`"),
        "{e}"
    );
}

#[test]
fn an_unknown_workspace_spelling_names_file_line_col() {
    let e = load_one(&format!(
        "{HEADER}      - attack:\n          mode: read-only\n          workspace: home\n          run: \"true\"\n          expect: {{ outcome: ran }}\n"
    ));
    assert!(
        e.starts_with("hardening/bad.yaml:10:22: unknown variant `home`"),
        "{e}"
    );
}

#[test]
fn an_unknown_fence_race_key_names_file_line_col() {
    let e = load_one(&format!(
        "{HEADER}      - fence-race: {{ iterations: 3, path: a, swap: b, swaps: 4 }}\n"
    ));
    assert!(
        e.starts_with("hardening/bad.yaml:8:56: unknown field `swaps`"),
        "{e}"
    );
}
