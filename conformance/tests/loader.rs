//! Malformed scenario files are load errors naming `file:line:col`, and the harness turns each one
//! into a failing trial (never a skip); an empty scenario root fails too.

use std::path::{Path, PathBuf};

use conformance::backends::reference_backends;
use conformance::harness::trials;
use conformance::scenario::load::load_suite;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/malformed-scenarios")
}

fn no_expectations() -> PathBuf {
    PathBuf::from("/nonexistent-expectations")
}

fn error_for(stem: &str) -> String {
    let suite = load_suite(&fixtures());
    suite
        .errors
        .iter()
        .find(|e| e.file.file_stem().is_some_and(|s| s == stem))
        .map(|e| e.to_string())
        .unwrap_or_else(|| panic!("no load error for {stem}; errors: {:#?}", suite.errors))
}

#[test]
fn unknown_key_names_file_line_col_and_the_key() {
    let e = error_for("unknown_key");
    assert!(
        e.starts_with("malformed-scenarios/broken/unknown_key.yaml:10:11: unknown field `expectt`"),
        "{e}"
    );
}

#[test]
fn wrong_type_names_file_line_col() {
    let e = error_for("wrong_type");
    assert!(
        e.starts_with("malformed-scenarios/broken/wrong_type.yaml:9:28: "),
        "{e}"
    );
    assert!(e.contains("i32"), "{e}");
}

#[test]
fn duplicate_id_points_at_the_second_use() {
    let e = error_for("duplicate_id_b");
    assert!(
        e.starts_with("malformed-scenarios/broken/duplicate_id_b.yaml:2:5: duplicate scenario id \"BAD-DUP\" (first used in malformed-scenarios/broken/duplicate_id_a.yaml)"),
        "{e}"
    );
}

#[test]
fn unknown_capability_is_a_load_error() {
    let e = error_for("unknown_capability");
    assert!(
        e.starts_with(
            "malformed-scenarios/broken/unknown_capability.yaml:4:24: unknown variant `teleport`"
        ),
        "{e}"
    );
}

#[test]
fn undefined_matrix_variable_points_at_the_reference() {
    let e = error_for("undefined_variable");
    assert!(
        e.starts_with(
            "malformed-scenarios/broken/undefined_variable.yaml:11:28: ${cod} is not a matrix axis"
        ),
        "{e}"
    );
}

#[test]
fn case_names_must_vary_with_the_matrix() {
    let e = error_for("duplicate_case");
    assert!(
        e.starts_with("malformed-scenarios/broken/duplicate_case.yaml:8:11: duplicate case name \"same_name\" (with code=2)"),
        "{e}"
    );
}

#[test]
fn a_case_that_expands_to_the_same_trial_twice_is_a_load_error() {
    let e = error_for("duplicate_trial");
    assert!(
        e.starts_with("malformed-scenarios/broken/duplicate_trial.yaml:8:11: case \"same_check_2\" (with code=2) expands to the same trial as \"same_check_1\" (with code=1)"),
        "{e}"
    );
}

#[test]
fn unknown_level_is_a_load_error() {
    let e = error_for("unknown_mode_level");
    assert!(
        e.starts_with(
            "malformed-scenarios/broken/unknown_mode_level.yaml:3:8: unknown variant `required`"
        ),
        "{e}"
    );
}

#[test]
fn a_leftovers_case_not_planned_as_root_is_a_load_error_at_its_key() {
    let e = error_for("leftovers_not_as_root");
    assert!(
        e.starts_with("malformed-scenarios/broken/leftovers_not_as_root.yaml:8:5: case \"no_root\" looks for leftovers"),
        "{e}"
    );
    assert!(e.contains("when_host: root"), "{e}");
}

#[test]
fn only_the_first_user_of_a_duplicate_id_loads() {
    let suite = load_suite(&fixtures());
    let loaded: Vec<&str> = suite.scenarios.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(loaded, vec!["BAD-DUP"]);
    assert_eq!(suite.errors.len(), 12, "{:#?}", suite.errors);
}

#[test]
fn references_in_mapping_keys_expand_in_every_assignment() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("fam")).expect("family");
    std::fs::write(
        dir.path().join("fam/keys.yaml"),
        "id: K-1\ntitle: t\nlevel: must\nseed: s\nmatrix:\n  n: [a, b, c]\ncases:\n  - name: c_${n}\n    steps:\n      - tool:\n          name: read\n          args: { path: x }\n          expect: { code: OK, files: { \"dir-${n}/f\": y } }\n",
    )
    .expect("write");
    let suite = load_suite(dir.path());
    assert!(suite.errors.is_empty(), "{:#?}", suite.errors);
    let keys: Vec<String> = suite.scenarios[0]
        .cases
        .iter()
        .map(|c| match &c.case.steps[0] {
            conformance::scenario::Step::Tool(t) => {
                t.expect.files.keys().cloned().collect::<String>()
            }
            _ => String::new(),
        })
        .collect();
    assert_eq!(keys, ["dir-a/f", "dir-b/f", "dir-c/f"]);
}

/// Runs every trial directly and counts (failed, ignored).
fn outcomes(trials: Vec<conformance::harness::HarnessTrial>) -> (usize, usize) {
    let mut failed = 0;
    let mut ignored = 0;
    for t in trials {
        if t.ignored {
            ignored += 1;
        } else if (t.run)().is_err() {
            failed += 1;
        }
    }
    (failed, ignored)
}

#[test]
fn every_load_error_is_a_failing_trial_not_a_skip() {
    let all = trials(&fixtures(), &no_expectations(), reference_backends(), &[]);
    let names: Vec<String> = all.iter().map(|t| t.name.clone()).collect();
    assert!(
        names.contains(&"broken::load-error::unknown_key".to_owned()),
        "{names:#?}"
    );
    assert_eq!(outcomes(all), (12, 0));
}

#[test]
fn an_empty_scenario_root_fails() {
    let empty = tempfile::tempdir().expect("tempdir");
    let all = trials(empty.path(), &no_expectations(), reference_backends(), &[]);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].name, "suite::no_scenarios_found");
    assert_eq!(outcomes(all), (1, 0));
}

#[test]
fn a_required_backend_that_is_not_in_the_run_fails() {
    let empty = tempfile::tempdir().expect("tempdir");
    let all = trials(
        empty.path(),
        &no_expectations(),
        reference_backends(),
        &["hyperv".to_owned()],
    );
    assert_eq!(outcomes(all), (2, 0));
}

#[test]
fn a_typo_in_a_closed_vocabulary_is_a_load_error_with_its_place() {
    let e = error_for("unknown_composition");
    assert!(
        e.starts_with(
            "malformed-scenarios/broken/unknown_composition.yaml:8:27: unknown variant `confinning`"
        ),
        "{e}"
    );
}

#[test]
fn an_unknown_network_mode_is_a_load_error_with_its_place() {
    let e = error_for("unknown_network");
    assert!(
        e.starts_with("malformed-scenarios/broken/unknown_network.yaml:9:"),
        "{e}"
    );
    assert!(
        e.contains("unknown network mode \"offline\"; expected one of restricted, enabled"),
        "{e}"
    );
}

#[test]
fn every_world_path_in_a_shell_command_is_spelled_quoted() {
    // World names hold quotes, `$`-free shell characters, backslashes and glob characters in a
    // share of cases: a shell command that spells `%OUTSIDE%` raw (even inside quotes) breaks on
    // them, so every one is `%sh(...)`.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let suite = load_suite(&root);
    assert!(suite.errors.is_empty(), "{:#?}", suite.errors);
    let mut commands = 0;
    let mut raw = Vec::new();
    for scenario in &suite.scenarios {
        for case in &scenario.cases {
            for step in &case.case.steps {
                let conformance::scenario::Step::Tool(tool) = step else {
                    continue;
                };
                let Some(command) = tool.args.get("command").and_then(|c| c.as_str()) else {
                    continue;
                };
                commands += 1;
                let found = conformance::world::raw_placeholders(command);
                if !found.is_empty() {
                    raw.push(format!(
                        "{} {}: {command:?} {found:?}",
                        scenario.id, case.name
                    ));
                }
            }
        }
    }
    assert!(commands > 50, "only {commands} shell commands found");
    assert!(
        raw.is_empty(),
        "raw world paths in shell commands:\n{}",
        raw.join("\n")
    );
}

#[test]
fn a_tool_code_no_call_ends_with_is_a_load_error() {
    let e = error_for("unknown_tool_code");
    assert!(
        e.starts_with("malformed-scenarios/broken/unknown_tool_code.yaml:12:"),
        "{e}"
    );
    assert!(
        e.contains("\"DENIDE\" is no code a tool call ends with"),
        "{e}"
    );
}
