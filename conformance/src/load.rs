//! Discovery, parsing and matrix expansion of scenario files.
//!
//! A scenario file is read twice: once for its header (matrix, exclusions, derivations, with the
//! cases left unread), then once per matrix assignment with every `${name}` replaced in the text,
//! fully typed. Substitution happens in the text so that every error still points at the file's
//! own line and column.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::model::{Capability, Case, Level, ScenarioFile};

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
    /// The classes its cases rest on (see [`crate::model::Governs`]).
    pub governs: Vec<crate::model::Governs>,
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

/// A scenario file that could not be loaded. Displays as `file:line:col: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file, as shown.
    pub file: PathBuf,
    /// 1-based line (0 when the error is about the whole file).
    pub line: u64,
    /// 1-based column.
    pub column: u64,
    /// What is wrong.
    pub message: String,
    /// The offending lines with a caret, when available.
    pub snippet: Option<String>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )?;
        if let Some(snippet) = &self.snippet {
            write!(f, "\n{snippet}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

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

fn describe(vars: &BTreeMap<String, String>) -> String {
    if vars.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(" (with {})", parts.join(", "))
}

fn yaml_error(
    shown: &Path,
    text: &str,
    e: &serde_saphyr::Error,
    vars: Option<&BTreeMap<String, String>>,
) -> LoadError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((0, 0));
    let plain = e.without_snippet().to_string();
    // serde-saphyr prefixes its message with "error: line N column M: "; we say where ourselves.
    let message = plain
        .split_once(": ")
        .filter(|(head, _)| head.starts_with("error"))
        .map(|(_, rest)| rest)
        .and_then(|rest| {
            rest.split_once(": ")
                .filter(|(head, _)| head.starts_with("line "))
                .map(|(_, msg)| msg)
        })
        .unwrap_or(&plain);
    let suffix = format!(" at line {line}, column {column}");
    let message = message.strip_suffix(&suffix).unwrap_or(message).to_owned();
    let snippet = (line > 0).then(|| caret(text, line, column));
    LoadError {
        file: shown.to_path_buf(),
        line,
        column,
        message: format!("{message}{}", vars.map(describe).unwrap_or_default()),
        snippet,
    }
}

/// The offending line with a caret under the column.
fn caret(text: &str, line: u64, column: u64) -> String {
    let src = text
        .lines()
        .nth(usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX))
        .unwrap_or("");
    let pad = " ".repeat(usize::try_from(column.saturating_sub(1)).unwrap_or(0));
    format!("{line:>5} | {src}\n      | {pad}^")
}

/// Line and column (1-based) of byte offset `at`.
fn position(text: &str, at: usize) -> (u64, u64) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line as u64, column as u64)
}

/// Where `needle` first appears in the text (1:1 if nowhere).
fn locate(text: &str, needle: &str) -> (u64, u64) {
    text.find(needle)
        .map(|at| position(text, at))
        .unwrap_or((1, 1))
}

/// The assignments of the matrix (one empty assignment without a matrix), each completed with the
/// derived variables.
fn expand_matrix<C>(
    header: &ScenarioFile<C>,
    text: &str,
    shown: &Path,
) -> Result<Vec<BTreeMap<String, String>>, LoadError> {
    let err_at = |needle: &str, message: String| {
        let (line, column) = locate(text, needle);
        LoadError {
            file: shown.to_path_buf(),
            line,
            column,
            message,
            snippet: Some(caret(text, line, column)),
        }
    };
    for (axis, values) in &header.matrix {
        if !is_identifier(axis) {
            return Err(err_at(
                axis,
                format!("matrix axis {axis:?} must be an identifier"),
            ));
        }
        if values.is_empty() {
            return Err(err_at(axis, format!("matrix axis {axis:?} has no values")));
        }
        for v in values {
            if !is_plain(&v.text) {
                return Err(err_at(
                    &v.text,
                    format!(
                        "matrix value {:?} of axis {axis:?} must be a plain scalar (no quotes, backslashes, braces, '#', ': ' or line breaks)",
                        v.text
                    ),
                ));
            }
        }
    }
    for name in header.derive.keys() {
        if header.matrix.contains_key(name) || !is_identifier(name) {
            return Err(err_at(
                name,
                format!(
                    "derived variable {name:?} must be an identifier that is not a matrix axis"
                ),
            ));
        }
    }
    let mut assignments: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
    for (axis, values) in &header.matrix {
        assignments = assignments
            .into_iter()
            .flat_map(|a| {
                values.iter().map(move |v| {
                    let mut next = a.clone();
                    next.insert(axis.clone(), v.text.clone());
                    next
                })
            })
            .collect();
    }
    for exclusion in &header.exclude {
        if let Some(unknown) = exclusion.keys().find(|k| !header.matrix.contains_key(*k)) {
            return Err(err_at(
                unknown,
                format!("exclusion names {unknown:?}, which is not a matrix axis"),
            ));
        }
    }
    assignments.retain(|a| {
        !header
            .exclude
            .iter()
            .any(|ex| ex.iter().all(|(k, v)| a.get(k) == Some(&v.text)))
    });
    for assignment in &mut assignments {
        for (name, rules) in &header.derive {
            for rule in rules {
                if let Some(unknown) = rule.when.keys().find(|k| !header.matrix.contains_key(*k)) {
                    return Err(err_at(
                        unknown,
                        format!(
                            "derivation of {name:?} tests {unknown:?}, which is not a matrix axis"
                        ),
                    ));
                }
            }
            let value = rules
                .iter()
                .find(|rule| {
                    rule.when
                        .iter()
                        .all(|(k, accepted)| assignment.get(k).is_some_and(|v| accepted.accepts(v)))
                })
                .map(|rule| rule.value.text.clone())
                .ok_or_else(|| {
                    err_at(
                        name,
                        format!("no rule derives {name:?}{}", describe(assignment)),
                    )
                })?;
            assignment.insert(name.clone(), value);
        }
    }
    Ok(assignments)
}

fn is_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_plain(s: &str) -> bool {
    !s.is_empty()
        && s.trim() == s
        && !s.contains(['"', '\'', '\\', '{', '}', '#', '\n', '\r'])
        && !s.contains(": ")
}

/// The placeholder a `${name}` reference becomes in the untyped read.
fn placeholder(name: &str) -> String {
    format!("__scenario_var_{name}__")
}

/// The text with every `${name}` turned into the plain scalar [`placeholder`]`(name)`.
fn placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                out.push_str(&placeholder(&after[..end]));
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Replaces every `${name}` in the text; an unknown name is an error at its position.
fn substitute(
    text: &str,
    vars: &BTreeMap<String, String>,
    shown: &Path,
) -> Result<String, LoadError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let name = &after[..end];
        match vars.get(name) {
            Some(value) => out.push_str(value),
            None => {
                let at = text.len() - rest.len() + start;
                let (line, column) = position(text, at);
                return Err(LoadError {
                    file: shown.to_path_buf(),
                    line,
                    column,
                    message: format!(
                        "${{{name}}} is not a matrix axis or derived variable of this scenario"
                    ),
                    snippet: Some(caret(text, line, column)),
                });
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Every variable of an assignment with its YAML-typed value (matrix values keep their type;
/// derived values too).
fn raw_vars(
    raw: &ScenarioFile<serde_json::Value>,
    vars: &BTreeMap<String, String>,
) -> BTreeMap<String, serde_json::Value> {
    vars.iter()
        .map(|(name, text)| {
            let typed = raw
                .matrix
                .get(name)
                .into_iter()
                .flatten()
                .chain(raw.derive.get(name).into_iter().flatten().map(|r| &r.value))
                .find(|s| &s.text == text)
                .map(|s| s.value.clone())
                .unwrap_or_else(|| text.clone().into());
            (name.clone(), typed)
        })
        .collect()
}

/// Substitutes placeholders in an untyped case: a string that is exactly one placeholder becomes
/// the typed value; placeholders inside longer strings become the value's text.
fn substitute_value(
    value: &serde_json::Value,
    vars: &BTreeMap<String, String>,
    typed: &BTreeMap<String, serde_json::Value>,
) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            if let Some((_, v)) = typed.iter().find(|(name, _)| *s == placeholder(name)) {
                return v.clone();
            }
            Value::String(substitute_text(s, vars))
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| substitute_value(v, vars, typed))
                .collect(),
        ),
        // Keys are text: a reference in a key becomes the value's text, as in the first read.
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (substitute_text(k, vars), substitute_value(v, vars, typed)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every placeholder inside `s` replaced by its value's text.
fn substitute_text(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = s.to_owned();
    for (name, text) in vars {
        let token = placeholder(name);
        if out.contains(&token) {
            out = out.replace(&token, text);
        }
    }
    out
}
