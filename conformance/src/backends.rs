//! The backends a run certifies, with what each can do on this host.

use std::collections::BTreeSet;

use sandbox_local::dialect::{self, Dialect};

use crate::model::Capability;

/// A backend under test.
#[derive(Clone, Debug)]
pub struct Backend {
    /// Its name in trial names (`bwrap`, `landlock`, `seatbelt`, `operator`, ...).
    pub name: String,
    /// Its stderr dialect; `None` when every scenario must supply one (the operator runner).
    pub dialect: Option<Dialect>,
    /// What it can do on this host.
    pub capabilities: BTreeSet<Capability>,
    /// Why it cannot confine on this host, when it cannot.
    pub unusable: Option<String>,
}

impl Backend {
    /// Why this backend cannot run a scenario needing `needs`, or `None` when it can.
    pub fn cannot_run(&self, needs: &[Capability]) -> Option<String> {
        let missing: Vec<&str> = needs
            .iter()
            .filter(|c| !self.capabilities.contains(c))
            .map(|c| c.as_str())
            .collect();
        if missing.is_empty() {
            return None;
        }
        Some(match &self.unusable {
            Some(reason) if missing.contains(&Capability::Confine.as_str()) => {
                format!("backend not usable on this host: {reason}")
            }
            _ => format!(
                "backend {} lacks capability {} on this host",
                self.name,
                missing.join(", ")
            ),
        })
    }
}

/// The reference backends. Classification against their dialects needs nothing from the host, so
/// every one of them runs the pure families everywhere.
pub fn reference_backends() -> Vec<Backend> {
    let pure = |name: &str, dialect: Option<Dialect>| Backend {
        name: name.to_owned(),
        dialect,
        capabilities: BTreeSet::from([Capability::Classifier]),
        unusable: Some("host probing arrives with the local provider".to_owned()),
    };
    vec![
        pure("bwrap", Some(dialect::bwrap())),
        pure("landlock", Some(dialect::landlock())),
        pure("seatbelt", Some(dialect::seatbelt())),
        pure("operator", None),
    ]
}
