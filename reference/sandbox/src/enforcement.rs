//! Enforcement reported per class of effects, next to the overall [`SandboxEnforcement`].
//!
//! A policy restricts several classes of effects (file writes by mode, the network by its knob);
//! a backend may govern one completely, part of another and nothing of a third. Each class gets
//! its own [`ClassReport`] (how completely, and what is left ungoverned), so a backend that governs
//! only part of a class says so instead of hiding it behind one word. The overall
//! [`SandboxEnforcement`] stays (a seed wire string): it is the weakest report among the classes
//! the policy actually restricts ([`ClassEnforcements::overall`]).
//!
//! Adding a class (for example protected paths) is adding a variant to [`EnforcementClass`] (and
//! its name to its schema in `mode.rs`, where every wire word's serde and schema live): the map,
//! its wire form and the overall fold take it as they are.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::mode::{ModeParseError, NetworkMode, SandboxEnforcement};

/// The names of what a backend leaves ungoverned, as a class report's `ungoverned` entries spell
/// them: one home for every backend and every reader (the harness matches `gap:` entries on
/// them).
pub mod gaps {
    /// Files: metadata changes (`chmod` without the set-id bits, `chown` to the same owner,
    /// `utimes`, extended attributes) on any file the payload can reach.
    pub const METADATA: &str = "metadata";
    /// Files: `truncate(2)` and `O_TRUNC` outside the writable set.
    pub const TRUNCATE: &str = "truncate";
    /// Files: the host's `/tmp` where no mount namespace shows a private temp area there (the
    /// area is then only `$TMPDIR`): `/tmp` is outside the writable set, and what this backend
    /// does not govern outside it (metadata, truncate) reaches the host's files there.
    pub const HOST_TMP_UNMOUNTED: &str =
        "host /tmp (no mount namespace shows the private temp area there)";
    /// Files: renaming a file into another directory.
    pub const RENAME_ACROSS_DIRS: &str = "rename-across-dirs";
    /// Files: hard-linking a file into another directory.
    pub const LINK_ACROSS_DIRS: &str = "link-across-dirs";
    /// Network: TCP bind and connect.
    pub const TCP: &str = "tcp";
    /// Network: connecting to an abstract unix socket created outside the sandbox.
    pub const ABSTRACT_UNIX_SOCKETS: &str = "abstract-unix-sockets";
    /// Network: UDP datagrams.
    pub const UDP: &str = "udp";
    /// Network: connecting to a unix socket bound to a path.
    pub const NAMED_UNIX_SOCKETS: &str = "named-unix-sockets";
}

/// A class of effects whose enforcement is reported on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EnforcementClass {
    /// File effects, as the sandbox mode promises them (`files`).
    Files,
    /// Network reach, as the network knob promises it (`network`).
    Network,
    /// The protected paths inside the writable roots (`.git/hooks`, `.git/config`), as the
    /// policy's `protected_paths` promise them (`protected`).
    Protected,
    /// The host's IPC, closed in every confined mode whatever the network knob says (`host-ipc`):
    /// unix sockets to anything outside the sandbox (named and abstract), FIFOs outside the
    /// writable set, the host's SysV IPC and POSIX message queues, the user's keyrings. A host
    /// process acting for the payload is a file effect outside the writable set.
    HostIpc,
}

impl EnforcementClass {
    /// Every class, in report order.
    pub const ALL: [EnforcementClass; 4] = [
        EnforcementClass::Files,
        EnforcementClass::Network,
        EnforcementClass::Protected,
        EnforcementClass::HostIpc,
    ];

    /// The classes a confined launch restricts: `files` always (a confined mode), `network` when
    /// the network is restricted.
    pub fn restricted_by(network: NetworkMode) -> Vec<EnforcementClass> {
        let mut classes = vec![EnforcementClass::Files];
        if network.is_restricted() {
            classes.push(EnforcementClass::Network);
        }
        classes
    }

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            EnforcementClass::Files => "files",
            EnforcementClass::Network => "network",
            EnforcementClass::Protected => "protected",
            EnforcementClass::HostIpc => "host-ipc",
        }
    }
}

impl FromStr for EnforcementClass {
    type Err = ModeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EnforcementClass::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| ModeParseError {
                what: "enforcement class",
                given: s.to_owned(),
                expected: "files, network, protected, host-ipc",
            })
    }
}

/// How completely one launch (or one backend, in a probe) governs one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClassEnforcement {
    /// Nothing of the class is governed (`not-governed`): the backend cannot, or the policy did
    /// not ask it to (network `enabled`).
    NotGoverned,
    /// Part of the class is governed; [`ClassReport::ungoverned`] names the rest (`partial`).
    Partial,
    /// Everything the policy promises for the class is governed (`full`).
    Full,
}

impl ClassEnforcement {
    /// The wire name (`full`, `partial`, `not-governed`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ClassEnforcement::Full => "full",
            ClassEnforcement::Partial => "partial",
            ClassEnforcement::NotGoverned => "not-governed",
        }
    }

    /// The overall word for this class: anything short of `full` is `partial`.
    pub const fn overall(self) -> SandboxEnforcement {
        match self {
            ClassEnforcement::Full => SandboxEnforcement::Full,
            ClassEnforcement::Partial | ClassEnforcement::NotGoverned => {
                SandboxEnforcement::Partial
            }
        }
    }
}

impl From<SandboxEnforcement> for ClassEnforcement {
    fn from(e: SandboxEnforcement) -> Self {
        match e {
            SandboxEnforcement::Full => ClassEnforcement::Full,
            SandboxEnforcement::Partial => ClassEnforcement::Partial,
        }
    }
}

impl FromStr for ClassEnforcement {
    type Err = ModeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(ClassEnforcement::Full),
            "partial" => Ok(ClassEnforcement::Partial),
            "not-governed" => Ok(ClassEnforcement::NotGoverned),
            _ => Err(ModeParseError {
                what: "class enforcement",
                given: s.to_owned(),
                expected: "full, partial, not-governed",
            }),
        }
    }
}

/// One class's report: how completely it is governed and what is left ungoverned.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClassReport {
    /// How completely the class is governed.
    pub enforcement: ClassEnforcement,
    /// What of the class is not governed (for example `metadata` for files under Landlock,
    /// `named-unix-sockets` for the network under bwrap); empty when `full`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ungoverned: Vec<String>,
    /// What the deployment allowed through the class on purpose (the named unix sockets of
    /// `allow_unix_sockets` for `host-ipc`); empty when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
}

impl ClassReport {
    /// Everything governed.
    pub fn full() -> Self {
        ClassReport {
            enforcement: ClassEnforcement::Full,
            ungoverned: Vec::new(),
            allowed: Vec::new(),
        }
    }

    /// Nothing governed.
    pub fn not_governed() -> Self {
        ClassReport {
            enforcement: ClassEnforcement::NotGoverned,
            ungoverned: Vec::new(),
            allowed: Vec::new(),
        }
    }

    /// A report naming what is ungoverned: `full` when nothing is, `partial` otherwise.
    pub fn with_gaps<S: Into<String>>(ungoverned: impl IntoIterator<Item = S>) -> Self {
        let ungoverned: Vec<String> = ungoverned.into_iter().map(Into::into).collect();
        ClassReport {
            enforcement: if ungoverned.is_empty() {
                ClassEnforcement::Full
            } else {
                ClassEnforcement::Partial
            },
            ungoverned,
            allowed: Vec::new(),
        }
    }

    /// The same report, listing `allowed` as allowed on purpose.
    pub fn with_allowed<S: Into<String>>(mut self, allowed: impl IntoIterator<Item = S>) -> Self {
        self.allowed = allowed.into_iter().map(Into::into).collect();
        self
    }
}

/// Enforcement per class (`files`, `network`). A class missing from the map is not governed,
/// except `files`, which a report without classes states through its overall enforcement
/// (see `ClassEnforcements::from_overall`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct ClassEnforcements(BTreeMap<EnforcementClass, ClassReport>);

impl ClassEnforcements {
    /// What a report without per-class detail means: `files` as the overall enforcement says,
    /// every other class not governed.
    pub fn from_overall(overall: SandboxEnforcement) -> Self {
        ClassEnforcements::default().with(
            EnforcementClass::Files,
            ClassReport {
                enforcement: overall.into(),
                ungoverned: Vec::new(),
                allowed: Vec::new(),
            },
        )
    }

    /// The same map with `class` reported as `report`.
    pub fn with(mut self, class: EnforcementClass, report: ClassReport) -> Self {
        self.0.insert(class, report);
        self
    }

    /// The report for `class` (not governed when absent).
    pub fn get(&self, class: EnforcementClass) -> ClassReport {
        self.0
            .get(&class)
            .cloned()
            .unwrap_or_else(ClassReport::not_governed)
    }

    /// True when no class is reported.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every reported class, in [`EnforcementClass`] order.
    pub fn iter(&self) -> impl Iterator<Item = (EnforcementClass, &ClassReport)> {
        self.0.iter().map(|(c, r)| (*c, r))
    }

    /// The overall enforcement of a launch whose policy restricts `restricted`: `full` only when
    /// every restricted class is governed in full. `files` is always restricted by a confined
    /// mode; a class the policy leaves open (network `enabled`) does not weaken the overall word.
    pub fn overall(&self, restricted: &[EnforcementClass]) -> SandboxEnforcement {
        restricted
            .iter()
            .map(|c| self.get(*c).enforcement)
            .min()
            .map_or(SandboxEnforcement::Full, ClassEnforcement::overall)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_is_a_map_of_class_to_report() {
        let classes = ClassEnforcements::default()
            .with(
                EnforcementClass::Files,
                ClassReport::with_gaps(["metadata"]),
            )
            .with(EnforcementClass::Network, ClassReport::full());
        let json = serde_json::to_string(&classes).expect("serialize");
        assert_eq!(
            json,
            r#"{"files":{"enforcement":"partial","ungoverned":["metadata"]},"network":{"enforcement":"full"}}"#
        );
        assert_eq!(
            serde_json::from_str::<ClassEnforcements>(&json).expect("de"),
            classes
        );
        assert!(
            serde_json::from_str::<ClassEnforcements>(r#"{"disk":{"enforcement":"full"}}"#)
                .is_err()
        );
        assert!(
            serde_json::from_str::<ClassEnforcements>(r#"{"network":{"enforcement":"none"}}"#)
                .is_err()
        );
    }

    #[test]
    fn every_word_round_trips_and_maps_to_the_overall_word() {
        for (e, wire, overall) in [
            (ClassEnforcement::Full, "full", SandboxEnforcement::Full),
            (
                ClassEnforcement::Partial,
                "partial",
                SandboxEnforcement::Partial,
            ),
            (
                ClassEnforcement::NotGoverned,
                "not-governed",
                SandboxEnforcement::Partial,
            ),
        ] {
            assert_eq!(e.as_str(), wire);
            assert_eq!(e.to_string(), wire);
            assert_eq!(wire.parse::<ClassEnforcement>(), Ok(e));
            assert_eq!(e.overall(), overall);
        }
        assert_eq!(
            ClassEnforcement::from(SandboxEnforcement::Partial),
            ClassEnforcement::Partial
        );
        assert_eq!(
            ClassEnforcement::from(SandboxEnforcement::Full),
            ClassEnforcement::Full
        );
        for c in EnforcementClass::ALL {
            assert_eq!(c.as_str().parse::<EnforcementClass>(), Ok(c));
        }
        let err = "disk".parse::<EnforcementClass>().expect_err("unknown");
        assert!(
            err.to_string().contains("enforcement class \"disk\""),
            "{err}"
        );
        let err = "none".parse::<ClassEnforcement>().expect_err("unknown");
        assert!(
            err.to_string().contains("class enforcement \"none\""),
            "{err}"
        );
    }

    #[test]
    fn a_restricted_network_adds_its_class() {
        assert_eq!(
            EnforcementClass::restricted_by(NetworkMode::Enabled),
            [EnforcementClass::Files]
        );
        assert_eq!(
            EnforcementClass::restricted_by(NetworkMode::Restricted),
            [EnforcementClass::Files, EnforcementClass::Network]
        );
    }

    #[test]
    fn reports_name_their_gaps() {
        assert_eq!(ClassReport::full().enforcement, ClassEnforcement::Full);
        assert_eq!(
            ClassReport::not_governed().enforcement,
            ClassEnforcement::NotGoverned
        );
        let gaps = ClassReport::with_gaps(["udp"]);
        assert_eq!(
            (gaps.enforcement, gaps.ungoverned),
            (ClassEnforcement::Partial, vec!["udp".to_owned()])
        );
        assert!(ClassEnforcements::default().is_empty());
        let one = ClassEnforcements::default().with(EnforcementClass::Network, ClassReport::full());
        assert!(!one.is_empty());
        assert_eq!(
            one.iter()
                .map(|(c, r)| (c, r.enforcement))
                .collect::<Vec<_>>(),
            [(EnforcementClass::Network, ClassEnforcement::Full)]
        );
        // Without classes, files is the overall word and nothing else is governed.
        let partial = ClassEnforcements::from_overall(SandboxEnforcement::Partial);
        assert_eq!(
            partial.get(EnforcementClass::Files).enforcement,
            ClassEnforcement::Partial
        );
        assert_eq!(
            partial.overall(&[EnforcementClass::Files]),
            SandboxEnforcement::Partial
        );
    }

    #[test]
    fn overall_is_the_weakest_restricted_class() {
        use EnforcementClass::*;
        let c = ClassEnforcements::from_overall(SandboxEnforcement::Full);
        assert_eq!(c.get(Network).enforcement, ClassEnforcement::NotGoverned);
        assert_eq!(c.overall(&[Files]), SandboxEnforcement::Full);
        assert_eq!(c.overall(&[Files, Network]), SandboxEnforcement::Partial);
        let c = c.with(Network, ClassReport::with_gaps(["named-unix-sockets"]));
        assert_eq!(c.overall(&[Files, Network]), SandboxEnforcement::Partial);
        let c = c.with(Network, ClassReport::with_gaps(Vec::<String>::new()));
        assert_eq!(c.overall(&[Files, Network]), SandboxEnforcement::Full);
        assert_eq!(c.overall(&[]), SandboxEnforcement::Full);
    }
}
