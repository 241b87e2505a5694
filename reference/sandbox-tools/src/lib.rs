//! What the model calls: a confined shell and a fenced filesystem, the `bash`, `write` and `edit`
//! tools over them, and the one escalation choreography all three share.
//!
//! - [`shell`]: confines the exact `bash -c` argv through a provider, spawns it directly,
//!   classifies with the one classifier, and reports the mode the call actually ran under.
//! - [`fs`]: reads pass; writes are fenced against the same writable set as the shell backends.
//! - [`escalation`]: pairing, strict widening, approval, and a stable code per outcome.
//! - [`tools`]: the model-facing tools over one composition and their result text.
//! - [`tool`]: the closed set of tools: each one's wire name, kind and schema.
//! - [`outcome`]: a call's typed outcome: its stable code and its facts.
//! - [`approval`]: the approval service an escalation asks, and a scripted one.

pub mod approval;
pub mod escalation;
pub mod fs;
pub mod outcome;
pub mod shell;
pub mod tool;
pub mod tools;
