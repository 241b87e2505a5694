//! Discovery, parsing and matrix expansion of scenario files.
//!
//! A scenario file is read twice: once for its header (matrix, exclusions, derivations, with the
//! cases left unread), then once per matrix assignment with every `${name}` replaced in the text,
//! fully typed. Substitution happens in the text so that every error still points at the file's
//! own line and column.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::error::{describe, locate, position, yaml_error};
use super::matrix::{expand_matrix, placeholders, raw_vars, substitute, substitute_value};
use super::{Capability, Case, Level, ScenarioFile};

pub use super::error::LoadError;

/// A scenario that loaded, with its cases expanded.
#[derive(Debug)]
pub struct Scenario {
    /// The folder under the scenario root (`runner-failure`, `containment`, ...).
    pub family: String,
    /// The file stem, used in trial names.
    pub slug: String,
    /// The file, relative to the scenario root's parent (as shown in messages).
    pub file: PathBuf,
    /// Stable identifier.
    pub id: String,
    /// What it pins.
    pub title: String,
    /// How binding it is.
    pub level: Level,
    /// Required capabilities.
    pub requires: Vec<Capability>,
    /// Specification trace.
    pub seed: String,
    /// Backends it applies to (`None`: all).
    pub backends: Option<Vec<String>>,
    /// The classes its cases rest on (see [`crate::scenario::Governs`]).
    pub governs: Vec<crate::scenario::Governs>,
    /// Expanded cases in file order.
    pub cases: Vec<ExpandedCase>,
}

impl Scenario {
    /// The classes `case` rests on: a backend reporting one of them short of `full` is judged
    /// on this case at `should` for that gap.
    pub fn gap_classes(&self, case: &ExpandedCase) -> Vec<sandbox::EnforcementClass> {
        let mut classes: Vec<_> = self
            .governs
            .iter()
            .filter(|g| g.covers(&case.vars))
            .map(|g| g.class)
            .collect();
        classes.sort();
        classes.dedup();
        classes
    }
}

/// One case after matrix expansion.
#[derive(Debug, Clone)]
pub struct ExpandedCase {
    /// Its unique name within the scenario.
    pub name: String,
    /// The matrix and derived values it was expanded with.
    pub vars: BTreeMap<String, String>,
    /// The typed case.
    pub case: Case,
}

/// Everything found under a scenario root.
#[derive(Debug, Default)]
pub struct Suite {
    /// Scenarios that loaded.
    pub scenarios: Vec<Scenario>,
    /// Files that did not (each becomes a failing trial).
    pub errors: Vec<LoadError>,
}

/// Loads every `<family>/*.yaml` under `root`, checking ids are unique across the suite.
pub fn load_suite(root: &Path) -> Suite {
    let mut suite = Suite::default();
    let display_base = root.parent().unwrap_or(root);
    let mut files = match scenario_files(root) {
        Ok(files) => files,
        Err(e) => {
            suite.errors.push(LoadError {
                file: root.to_path_buf(),
                line: 0,
                column: 0,
                message: format!("cannot read the scenario folder: {e}"),
                snippet: None,
            });
            return suite;
        }
    };
    files.sort();
    let mut seen_ids: HashMap<String, PathBuf> = HashMap::new();
    for path in files {
        let shown = path
            .strip_prefix(display_base)
            .unwrap_or(&path)
            .to_path_buf();
        match load_file(root, &path, &shown) {
            Ok((scenario, id_at)) => {
                if let Some(first) = seen_ids.get(&scenario.id) {
                    suite.errors.push(LoadError {
                        file: shown,
                        line: id_at.0,
                        column: id_at.1,
                        message: format!(
                            "duplicate scenario id {:?} (first used in {}); ids are never reused",
                            scenario.id,
                            first.display()
                        ),
                        snippet: None,
                    });
                } else {
                    seen_ids.insert(scenario.id.clone(), shown);
                    suite.scenarios.push(scenario);
                }
            }
            Err(e) => suite.errors.push(e),
        }
    }
    suite
}

fn scenario_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for family in std::fs::read_dir(root)? {
        let family = family?.path();
        if !family.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&family)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    Ok(out)
}

/// Loads one scenario file. `root` is the scenario root (its first folder below it is the family);
/// `shown` is how the file is named in errors. Returns the scenario and where its id is written.
#[expect(
    clippy::too_many_lines,
    reason = "one pass over a file, each check pointing at its line and column: split, the checks would pass the parsed document and its spans between them"
)]
pub fn load_file(
    root: &Path,
    path: &Path,
    shown: &Path,
) -> Result<(Scenario, (u64, u64)), LoadError> {
    let whole_file = |message: String| LoadError {
        file: shown.to_path_buf(),
        line: 0,
        column: 0,
        message,
        snippet: None,
    };
    let bytes = std::fs::read(path).map_err(|e| whole_file(format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let (line, column) = position(
            &String::from_utf8_lossy(e.as_bytes()),
            e.utf8_error().valid_up_to(),
        );
        LoadError {
            line,
            column,
            ..whole_file("scenario files must be UTF-8 (use YAML escapes for other bytes)".into())
        }
    })?;
    let family = path
        .strip_prefix(root)
        .ok()
        .and_then(|rel| rel.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    let slug = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    for (what, name) in [("family folder", &family), ("file name", &slug)] {
        if !is_trial_segment(name) {
            return Err(whole_file(format!(
                "{what} {name:?} must be lowercase letters, digits, '_' or '-'"
            )));
        }
    }

    // Read once with every `${name}` as a plain placeholder (so `{ exit: ${code} }` is valid YAML):
    // the header, and the cases as untyped trees to expand.
    let placeholder_text = placeholders(&text);
    let raw: ScenarioFile<serde_json::Value> =
        read_yaml(&placeholder_text).map_err(|e| yaml_error(shown, &placeholder_text, &e, None))?;
    let assignments = expand_matrix(&raw, &text, shown)?;
    let Some(first) = assignments.first() else {
        return Err(whole_file(
            "the matrix and its exclusions leave no case to run".into(),
        ));
    };
    // One typed read of the text itself, with the first assignment substituted, so that unknown
    // keys and wrong types are reported at their own line and column.
    let substituted = substitute(&text, first, shown)?;
    let file: ScenarioFile<Case> =
        read_yaml(&substituted).map_err(|e| yaml_error(shown, &substituted, &e, Some(first)))?;
    // A `governs` rule naming a variable the scenario does not have would cover no case.
    for rule in &file.governs {
        if let Some(unknown) = rule
            .when
            .keys()
            .find(|k| !raw.matrix.contains_key(*k) && !raw.derive.contains_key(*k))
        {
            let (line, column) = locate(&text, "governs");
            return Err(LoadError {
                line,
                column,
                ..whole_file(format!(
                    "governs {}: `when` names {unknown:?}, which is neither a matrix axis nor a derived variable",
                    rule.class.as_str()
                ))
            });
        }
    }

    let mut cases: Vec<ExpandedCase> = Vec::new();
    for vars in &assignments {
        let typed = raw_vars(&raw, vars);
        for (index, raw_case) in raw.cases.iter().enumerate() {
            let case: Case = if vars == first {
                file.cases[index].clone()
            } else {
                serde_json::from_value(substitute_value(raw_case, vars, &typed)).map_err(|e| {
                    let name = file.cases[index].name.as_str();
                    let (line, column) = locate(&text, name);
                    LoadError {
                        line,
                        column,
                        ..whole_file(format!("case {name:?}: {e}{}", describe(vars)))
                    }
                })?
            };
            if !is_trial_segment(&case.name) {
                let (line, column) = locate(&text, &file.cases[index].name);
                return Err(LoadError {
                    line,
                    column,
                    ..whole_file(format!(
                        "case name {:?} must be lowercase letters, digits, '_' or '-'",
                        case.name
                    ))
                });
            }
            if case.leftovers && case.when_host != Some(super::HostFact::Root) {
                let (line, column) = locate(&text, "leftovers:");
                return Err(LoadError {
                    line,
                    column,
                    ..whole_file(format!(
                        "case {:?} looks for leftovers, which needs a mount namespace of the harness's: plan it `when_host: root`",
                        case.name
                    ))
                });
            }
            match cases.iter().find(|c| c.name == case.name) {
                Some(existing) if existing.case == case => {}
                Some(_) => {
                    let (line, column) = locate(&text, &file.cases[index].name);
                    return Err(LoadError {
                        line,
                        column,
                        ..whole_file(format!(
                            "duplicate case name {:?}{}; put every matrix axis the case depends on in its name",
                            case.name,
                            describe(vars)
                        ))
                    });
                }
                None => {
                    // The same trial under another name: a case named after an axis it ignores
                    // would count one check several times.
                    let same = cases.iter().find(|c| {
                        let mut renamed = c.case.clone();
                        renamed.name.clone_from(&case.name);
                        renamed == case
                    });
                    if let Some(twin) = same {
                        // Where the name is written: the part both expansions share.
                        let shared: String = case
                            .name
                            .chars()
                            .zip(twin.name.chars())
                            .take_while(|(a, b)| a == b)
                            .map(|(a, _)| a)
                            .collect();
                        let (line, column) = locate(&text, &format!("name: {shared}"));
                        let column = column + 6;
                        return Err(LoadError {
                            line,
                            column,
                            ..whole_file(format!(
                                "case {:?}{} expands to the same trial as {:?}{}; it ignores an axis its name varies with (name it without that axis, or use it)",
                                case.name,
                                describe(vars),
                                twin.name,
                                describe(&twin.vars)
                            ))
                        });
                    }
                    cases.push(ExpandedCase {
                        name: case.name.clone(),
                        vars: vars.clone(),
                        case,
                    });
                }
            }
        }
    }
    if cases.is_empty() {
        let (line, column) = locate(&text, "cases");
        return Err(LoadError {
            line,
            column,
            ..whole_file("a scenario needs at least one case".into())
        });
    }
    let id_at = (file.id.referenced.line(), file.id.referenced.column());
    let id = file.id.value;
    if id.trim().is_empty() {
        return Err(LoadError {
            line: id_at.0,
            column: id_at.1,
            ..whole_file("scenario id must not be empty".into())
        });
    }
    Ok((
        Scenario {
            family,
            slug,
            file: shown.to_path_buf(),
            id,
            title: file.title,
            level: file.level,
            requires: file.requires,
            seed: file.seed,
            backends: file.backends,
            governs: file.governs,
            cases,
        },
        id_at,
    ))
}

/// Reads YAML as the suite does everywhere: YAML 1.2 booleans only, so `yes`, `no`, `y` and `on`
/// stay strings whether a field is typed or not (a typed and an untyped read must agree).
pub fn read_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, serde_saphyr::options! { strict_booleans: true })
}

/// Lowercase letters, digits, `_`, `-`; starting with a letter or digit.
fn is_trial_segment(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}
