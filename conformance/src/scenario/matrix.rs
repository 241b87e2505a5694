//! Matrix expansion: the assignments of a scenario's matrix (with its exclusions and derived
//! variables), and every `${name}` substituted in the file's text so errors keep their place.

use std::collections::BTreeMap;
use std::path::Path;

use super::ScenarioFile;
use super::error::{LoadError, caret, describe, locate, position};

/// The assignments of the matrix (one empty assignment without a matrix), each completed with the
/// derived variables.
pub(super) fn expand_matrix<C>(
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
pub(super) fn placeholders(text: &str) -> String {
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
pub(super) fn substitute(
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
pub(super) fn raw_vars(
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
pub(super) fn substitute_value(
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
