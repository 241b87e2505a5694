//! The durable session log: one JSON object per line, appended and synced one whole line at a
//! time. A crash mid-append can leave only a torn last line (no newline); loading drops it with a
//! warning and truncates it away, so every earlier event survives and the next append starts on a
//! clean line. A complete line that does not parse (an unknown mode in a knob event, say) is an
//! error naming the file and line: the log is never silently reinterpreted.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::session::Event;

/// Why a log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be opened, read, written or synced.
    #[error("session log {path:?}: {source}")]
    Io {
        /// The log file.
        path: PathBuf,
        /// The host's error.
        source: std::io::Error,
    },
    /// A complete line is not a valid event.
    #[error("session log {path:?} line {line}: {message}")]
    Invalid {
        /// The log file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// What loading found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadReport {
    /// Every complete event, in order.
    pub events: Vec<Event>,
    /// The warning about a torn last line that was dropped, if there was one.
    pub dropped_tail: Option<String>,
}

/// An open, append-only log file.
#[derive(Debug)]
pub struct SessionLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl SessionLog {
    /// Opens (creating) the log at `path` and replays it.
    pub fn open(path: &Path) -> Result<(SessionLog, LoadReport), LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let mut report = LoadReport::default();
        if complete < bytes.len() {
            let torn = String::from_utf8_lossy(&bytes[complete..]).into_owned();
            report.dropped_tail = Some(format!(
                "session log {}: dropped a torn last line ({} bytes) left by an interrupted write: {torn:?}",
                path.display(),
                bytes.len() - complete
            ));
            file.set_len(complete as u64).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        for (index, line) in bytes[..complete].split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let event: Event = serde_json::from_slice(line).map_err(|e| LogError::Invalid {
                path: path.to_path_buf(),
                line: index + 1,
                message: e.to_string(),
            })?;
            report.events.push(event);
        }
        Ok((
            SessionLog {
                path: path.to_path_buf(),
                file: Mutex::new(file),
            },
            report,
        ))
    }

    /// Appends one event as one line with one write, then syncs it to disk.
    pub fn append(&self, event: &Event) -> Result<(), LogError> {
        let io = |source| LogError::Io {
            path: self.path.clone(),
            source,
        };
        let mut line = serde_json::to_vec(event).map_err(|e| io(std::io::Error::other(e)))?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(&line).map_err(io)?;
        file.sync_data().map_err(io)
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
