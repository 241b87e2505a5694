//! Placeholders and shell quoting: a world's paths put into a scenario's text, raw or as one
//! shell word whatever bytes they hold.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::World;

impl World {
    /// `%WS%` (the workspace as `spelled`), `%WSDIR%` (the real workspace), `%ALIAS%`,
    /// `%OUTSIDE%` (and `%OUTSIDE_NAME%`, its name), `%TMPDIR%`, `%TMP%`, `%EXTRA%` and `%WORLD%` replaced
    /// by this world's paths, raw (for an argument, a path, an expected text), and `%sh(...)` by
    /// what is inside it so expanded, as one shell word ([`shell_quote`]): the form a shell
    /// command spells a world path in (`printf x > %sh(%OUTSIDE%/f)`).
    pub fn expand(&self, text: &str, spelled: &Path) -> String {
        self.expand_with(text, spelled, &[])
    }

    /// [`World::expand`] with more placeholders (`("ETC_PROBE", path)` for `%ETC_PROBE%`).
    pub fn expand_with(&self, text: &str, spelled: &Path, more: &[(&str, String)]) -> String {
        let shown = |p: &Path| p.display().to_string();
        let outside_name = self
            .outside
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut values: Vec<(String, String)> = vec![
            ("WSDIR".into(), shown(&self.ws)),
            ("OUTSIDE_NAME".into(), outside_name),
            ("WS".into(), shown(spelled)),
            ("ALIAS".into(), shown(&self.alias)),
            ("OUTSIDE".into(), shown(&self.outside)),
            ("TMPDIR".into(), shown(&self.tmpdir)),
            ("TMP".into(), shown(&self.tmp)),
            ("EXTRA".into(), shown(&self.extra)),
            ("WORLD".into(), shown(&self.dir)),
        ];
        values.extend(more.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        expand_placeholders(text, &values)
    }
}

/// `text` as one bash word, whatever bytes it holds, in UTF-8: single-quoted when it is UTF-8,
/// else a `$'...'` word in which only the bytes that are not UTF-8 are octal escapes (so the
/// payload builds a name that is not UTF-8 from an argv that is).
pub fn shell_quote(text: &OsStr) -> String {
    if let Some(s) = text.to_str() {
        return format!("'{}'", s.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for chunk in text.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if matches!(c, '\'' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\{b:03o}"));
        }
    }
    out.push('\'');
    out
}

/// `text` with each `%NAME%` of `values` replaced by its value and each `%sh(...)` by what is
/// inside it so expanded, as one shell word, in one pass: a value is never expanded again (a
/// name may hold `%`), and a `%` that starts no placeholder stays as it is (`printf '%s'`).
pub fn expand_placeholders(text: &str, values: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(inner) = rest.strip_prefix("%sh(")
            && let Some(close) = inner.find(')')
        {
            let word = expand_placeholders(&inner[..close], values);
            out.push_str(&shell_quote(OsStr::new(&word)));
            rest = &inner[close + 1..];
            continue;
        }
        let found = values.iter().find(|(name, _)| {
            rest[1..]
                .strip_prefix(name.as_str())
                .is_some_and(|r| r.starts_with('%'))
        });
        match found {
            Some((name, value)) => {
                out.push_str(value);
                rest = &rest[name.len() + 2..];
            }
            None => {
                out.push('%');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The world placeholders (`%WS%`, `%OUTSIDE%`, ...) `text` spells raw, outside `%sh(...)`: in
/// a shell command each is a defect (a name with a quote or a `$` breaks the command), found by
/// the test over the scenario files.
pub fn raw_placeholders(text: &str) -> Vec<String> {
    const NAMES: &[&str] = &[
        "WSDIR",
        "OUTSIDE_NAME",
        "WS",
        "ALIAS",
        "OUTSIDE",
        "TMPDIR",
        "TMP",
        "EXTRA",
        "WORLD",
        "ETC_PROBE",
    ];
    // What is left once every quoted form is gone.
    let mut outside_quotes = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("%sh(") {
        outside_quotes.push_str(&rest[..at]);
        rest = &rest[at + 4..];
        match rest.find(')') {
            Some(close) => rest = &rest[close + 1..],
            None => rest = "",
        }
    }
    outside_quotes.push_str(rest);
    NAMES
        .iter()
        .filter(|n| outside_quotes.contains(&format!("%{n}%")))
        .map(|n| format!("%{n}%"))
        .collect()
}
