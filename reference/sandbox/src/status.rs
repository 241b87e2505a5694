//! The records of a `launch-report` status channel ([`crate::StatusFormat::LaunchReport`]): the
//! one definition of their keys, written by the Landlock launcher (`landlock-run --status-fd`),
//! spelled by the Seatbelt trampoline (checked against these by its tests) and read by
//! [`crate::StatusFormat::parse`].
//!
//! A launch writes JSON lines of one key each: `{"exec": PROGRAM}` just before `execve`, on a
//! close-on-exec descriptor, then `{"exec-failed": WHY}` if the exec failed, or `{"error": WHY}`
//! for a launcher failure before it. The payload ran exactly when an `exec` record is present and
//! no failure record follows.
//!
//! ```
//! use sandbox::status::{EXEC, Record};
//!
//! let line = Record::Exec("bash".into()).to_line();
//! assert_eq!(line, format!("{{\"{EXEC}\":\"bash\"}}\n"));
//! assert_eq!(Record::parse_line(&line), [Record::Exec("bash".into())]);
//! ```

use std::fmt::Write as _;

use serde::de::Error as _;
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The key of the record written just before the payload is exec'd.
pub const EXEC: &str = "exec";
/// The key of the record written when exec'ing the payload failed.
pub const EXEC_FAILED: &str = "exec-failed";
/// The key of the record written when the launcher failed before it could exec the payload.
pub const ERROR: &str = "error";

/// One status record: a key and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// [`EXEC`]: the payload is about to be exec'd (the text names the program).
    Exec(String),
    /// [`EXEC_FAILED`]: exec'ing the payload failed (the text says why).
    ExecFailed(String),
    /// [`ERROR`]: the launcher failed before it could exec the payload (the text says why).
    Error(String),
}

impl Record {
    /// The record's key ([`EXEC`], [`EXEC_FAILED`] or [`ERROR`]).
    pub const fn key(&self) -> &'static str {
        match self {
            Record::Exec(_) => EXEC,
            Record::ExecFailed(_) => EXEC_FAILED,
            Record::Error(_) => ERROR,
        }
    }

    /// The record's text.
    pub fn detail(&self) -> &str {
        match self {
            Record::Exec(s) | Record::ExecFailed(s) | Record::Error(s) => s,
        }
    }

    /// Whether the record says the payload never ran ([`EXEC_FAILED`] or [`ERROR`]).
    pub const fn is_failure(&self) -> bool {
        !matches!(self, Record::Exec(_))
    }

    /// The record with `key` and `detail`, or `None` for a key no record has.
    pub fn from_key(key: &str, detail: String) -> Option<Record> {
        match key {
            EXEC => Some(Record::Exec(detail)),
            EXEC_FAILED => Some(Record::ExecFailed(detail)),
            ERROR => Some(Record::Error(detail)),
            _ => None,
        }
    }

    /// The record as the launcher writes it in one `write(2)`: `{"key":"detail"}` and a newline.
    /// The JSON is escaped by hand (quote, backslash and control characters, RFC 8259), so the
    /// launch path builds no JSON value.
    pub fn to_line(&self) -> String {
        let (key, detail) = (self.key(), self.detail());
        let mut line = String::with_capacity(key.len() + detail.len() + 8);
        line.push('{');
        json_string(&mut line, key);
        line.push(':');
        json_string(&mut line, detail);
        line.push_str("}\n");
        line
    }

    /// Every record one line of the channel carries: none for a line that is not a JSON object
    /// (a torn write), the known keys of an object otherwise (others are ignored), a failure
    /// ([`EXEC_FAILED`] before [`ERROR`]) ahead of [`EXEC`]. A text that is not a JSON string
    /// reads as its JSON spelling.
    pub fn parse_line(line: &str) -> Vec<Record> {
        let Ok(object) =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line.trim())
        else {
            return Vec::new();
        };
        [EXEC_FAILED, ERROR, EXEC]
            .into_iter()
            .filter_map(|key| {
                let text = match object.get(key)? {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Record::from_key(key, text)
            })
            .collect()
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.key(), self.detail())?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Record {
    /// Exactly one key, a known one, with a string.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, String>::deserialize(deserializer)?;
        let mut entries = map.into_iter();
        match (entries.next(), entries.next()) {
            (Some((key, detail)), None) => Record::from_key(&key, detail)
                .ok_or_else(|| D::Error::unknown_variant(&key, &[EXEC, EXEC_FAILED, ERROR])),
            _ => Err(D::Error::invalid_length(
                2,
                &"a status record of exactly one key",
            )),
        }
    }
}

/// Appends `s` as a JSON string (RFC 8259: quote, backslash and control characters escaped).
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_key_and_its_text_and_reads_back() {
        for record in [
            Record::Exec("bash".into()),
            Record::ExecFailed("landlock-run: cannot execute x: No such file".into()),
            Record::Error("a \"quoted\"\\path\n\t\u{1}\u{8}".into()),
            Record::Exec(String::new()),
            Record::Exec("tab\tnew\nline\r\u{1}\u{1f}\u{7f}".into()),
            Record::Exec("ünï € \u{fffd}".into()),
        ] {
            let line = record.to_line();
            assert!(
                line.starts_with(&format!("{{\"{}\":", record.key())),
                "{line}"
            );
            assert!(
                line.ends_with("}\n") && line.matches('\n').count() == 1,
                "{line}"
            );
            assert_eq!(Record::parse_line(&line), std::slice::from_ref(&record));
            // The serde form is the same JSON value.
            let serde_line = serde_json::to_string(&record).expect("json");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&serde_line).expect("value"),
                serde_json::from_str::<serde_json::Value>(&line).expect("value"),
            );
            assert_eq!(
                serde_json::from_str::<Record>(&serde_line).expect("de"),
                record
            );
        }
        assert_eq!(
            Record::Error("\u{1}".into()).to_line(),
            "{\"error\":\"\\u0001\"}\n"
        );
        // Only control characters are escaped: a space (0x20) is written as itself.
        assert_eq!(
            Record::Exec("a b\u{1f}".into()).to_line(),
            "{\"exec\":\"a b\\u001f\"}\n"
        );
    }

    #[test]
    fn a_torn_or_foreign_line_carries_no_record_and_failures_come_first() {
        assert!(Record::parse_line("{\"exec\"").is_empty());
        assert!(Record::parse_line("not json").is_empty());
        assert!(Record::parse_line("{\"exit-code\":0}").is_empty());
        assert_eq!(
            Record::parse_line("{\"exec\":1,\"error\":\"e\",\"exec-failed\":\"f\",\"x\":2}"),
            [
                Record::ExecFailed("f".into()),
                Record::Error("e".into()),
                Record::Exec("1".into())
            ]
        );
        assert!(serde_json::from_str::<Record>("{\"exec\":\"a\",\"error\":\"b\"}").is_err());
        assert!(serde_json::from_str::<Record>("{\"exit-code\":\"0\"}").is_err());
        assert!(Record::ExecFailed(String::new()).is_failure());
        assert!(!Record::Exec(String::new()).is_failure());
    }
}
