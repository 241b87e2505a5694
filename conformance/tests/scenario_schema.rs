//! The scenario schema, `scenarios/scenario.schema.json`, is exactly what the loader's types say,
//! and every scenario file points editors at it. After a deliberate change to the scenario types
//! regenerate it with `CONFORMANCE_WRITE_SCHEMA=1 cargo test -p conformance --test
//! scenario_schema` and review the diff (CI never writes it).

use std::path::{Path, PathBuf};

/// The first line of every scenario file: the hint YAML editors read the schema from.
const HINT: &str = "# yaml-language-server: $schema=../scenario.schema.json";

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

#[test]
fn the_published_scenario_schema_matches_the_types() {
    let path = scenarios().join("scenario.schema.json");
    let text =
        serde_json::to_string_pretty(&conformance::scenario::schema()).expect("schema") + "\n";
    if std::env::var_os("CONFORMANCE_WRITE_SCHEMA").is_some() {
        std::fs::write(&path, &text).expect("write schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is stale; regenerate it with CONFORMANCE_WRITE_SCHEMA=1 and review the diff",
        path.display()
    );
    // What an author most needs from it: the closed vocabularies, not only the shapes.
    for word in [
        "\"must\"",
        "\"workspace-write\"",
        "\"FS_SANDBOX_DENIED\"",
        "\"attack\"",
    ] {
        assert!(text.contains(word), "the schema lacks {word}");
    }
}

#[test]
fn every_scenario_file_points_editors_at_the_schema() {
    let mut files = Vec::new();
    for family in std::fs::read_dir(scenarios()).expect("scenarios") {
        let family = family.expect("entry").path();
        if !family.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&family).expect("family") {
            let file = file.expect("entry").path();
            if file.extension().is_some_and(|e| e == "yaml") {
                files.push(file);
            }
        }
    }
    assert!(files.len() > 50, "{} scenario files", files.len());
    let without: Vec<&PathBuf> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).map_or(true, |t| t.lines().next() != Some(HINT)))
        .collect();
    assert!(
        without.is_empty(),
        "no schema hint on the first line: {without:#?}"
    );
}
