//! `docs/contract.md` names every scenario of the suite, and names no scenario that does not
//! exist, so the contract a reader sees is the one the suite checks.

use std::collections::BTreeSet;
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Every `id:` of the scenario files.
fn scenario_ids() -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for family in std::fs::read_dir(repo().join("scenarios")).expect("scenarios/") {
        let family = family.expect("entry").path();
        if !family.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&family).expect("family") {
            let file = file.expect("entry").path();
            if file.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("scenario");
            let id = text
                .lines()
                .find_map(|l| l.strip_prefix("id:"))
                .unwrap_or_else(|| panic!("{} has no id", file.display()));
            ids.insert(id.trim().trim_matches('"').to_owned());
        }
    }
    ids
}

/// Every token of `text` shaped like a scenario id (`CT-001`, `ANC-010`, ...).
fn ids_named(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|t| {
            t.split_once('-').is_some_and(|(prefix, number)| {
                (2..=4).contains(&prefix.len())
                    && prefix.chars().all(|c| c.is_ascii_uppercase())
                    && number.len() == 3
                    && number.chars().all(|c| c.is_ascii_digit())
            })
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_contract_names_every_scenario_and_only_real_ones() {
    let doc = std::fs::read_to_string(repo().join("docs/contract.md")).expect("docs/contract.md");
    let named = ids_named(&doc);
    let ids = scenario_ids();
    let missing: Vec<&String> = ids.difference(&named).collect();
    let unknown: Vec<&String> = named.difference(&ids).collect();
    assert!(
        missing.is_empty(),
        "docs/contract.md does not name {missing:?}: say which promise each holds the backend to"
    );
    assert!(
        unknown.is_empty(),
        "docs/contract.md names {unknown:?}, which no scenario has"
    );
}

#[test]
fn off_macos_seatbelt_lists_only_what_runs_here() {
    if cfg!(target_os = "macos") {
        // On macOS every Seatbelt trial is listed and runs; this test is about other hosts.
        assert!(conformance::backends::foreign_platform("seatbelt").is_none());
        return;
    }
    let root = repo().join("scenarios");
    let trials = conformance::harness::trials(
        &root,
        &repo().join("fixtures/expectations"),
        conformance::backends::reference_backend("seatbelt")
            .into_iter()
            .collect(),
        &[],
    );
    let seatbelt: Vec<_> = trials
        .iter()
        .filter(|t| t.name.contains("::seatbelt::"))
        .collect();
    assert!(
        !seatbelt.is_empty(),
        "Seatbelt's classifier cases still run here"
    );
    let skipped: Vec<&str> = seatbelt
        .iter()
        .filter(|t| t.skip_reason.is_some() || t.ignored)
        .map(|t| t.name.as_str())
        .collect();
    assert!(skipped.is_empty(), "listed only to be skipped: {skipped:?}");
    assert!(
        seatbelt
            .iter()
            .all(|t| t.name.starts_with("runner-failure::")),
        "only the classifier family runs without macOS"
    );
}
