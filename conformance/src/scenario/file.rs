//! The scenario file itself: its header (level, capabilities, matrix, derivations, `governs`
//! rules) and its cases.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::*;

/// A scenario file. `C` is the case type: [`Case`] for the expanded scenario, and an ignored value
/// while the header (matrix, derivations) is read before expansion.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile<C = Case> {
    /// Stable identifier, unique across the suite and never reused (for example `RF-017`).
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    /// One line saying what the scenario pins.
    pub title: String,
    /// How binding the scenario is.
    pub level: Level,
    /// Capabilities a backend must have on this host for the scenario to run.
    #[serde(default)]
    pub requires: Vec<Capability>,
    /// The specification section the scenario traces to.
    pub seed: String,
    /// Backends the scenario applies to; omitted means every backend in the run.
    #[serde(default)]
    pub backends: Option<Vec<String>>,
    /// Axes expanded as a cartesian product; each value is substituted for `${axis}`.
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<Scalar>>,
    /// Partial assignments removed from the product.
    #[serde(default)]
    pub exclude: Vec<BTreeMap<String, Scalar>>,
    /// Variables computed from the axes by first-matching rules (for example the expected outcome
    /// of `effect x mode x shape`).
    #[serde(default)]
    pub derive: BTreeMap<String, Vec<DeriveRule>>,
    /// The enforcement classes the promise rests on, per case: on a backend that reports one of
    /// them short of `full`, a case a rule covers is judged at the level of the class's own
    /// family (`should`) for exactly that gap, so its expectation file may name the failure with
    /// `gap:` (the one rule for levels: no family fails an honestly reported gap at `must`).
    #[serde(default)]
    pub governs: Vec<Governs>,
    /// The cases; after expansion each gets its own stable name.
    pub cases: Vec<C>,
}

/// One `governs` rule: the cases (whose variables match `when`) that rest on `class`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Governs {
    /// The class the cases need governed.
    pub class: sandbox::EnforcementClass,
    /// Variable (matrix or derived) to accepted value(s); empty covers every case.
    #[serde(default)]
    pub when: BTreeMap<String, OneOrMany>,
}

impl Governs {
    /// True when this rule covers a case expanded with `vars`.
    pub fn covers(&self, vars: &BTreeMap<String, String>) -> bool {
        self.when
            .iter()
            .all(|(k, v)| vars.get(k).is_some_and(|val| v.accepts(val)))
    }
}

/// How binding a scenario is when certifying.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Can be neither skipped nor expected to fail when certifying.
    Must,
    /// Expected; an expectation file may record a reasoned failure.
    Should,
    /// Optional behaviour.
    May,
}

impl Level {
    /// The YAML name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Must => "must",
            Level::Should => "should",
            Level::May => "may",
        }
    }
}

/// What a backend must be able to do on this host for a scenario to run. A closed vocabulary:
/// an unknown capability is a load error.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Pure classification against the backend's own dialect; needs nothing from the host. A
    /// backend has it exactly when it has a dialect of its own (a reference backend), so it is
    /// never declared or committed.
    Classifier,
    /// The backend can confine a real command on this host.
    Confine,
    /// The backend reports whether the payload ran on an out-of-band status channel.
    StatusChannel,
    /// The backend can be told to use a capped Landlock ABI (and then reports `partial`).
    AbiCap,
    /// The backend is the reference local provider's platform chain, driven through `sandboxctl`
    /// (selection scenarios).
    LocalChain,
    /// This host can simulate hostile hosts for the chain: root (so dropping capabilities takes
    /// bwrap's namespaces away), `setpriv`, and the launcher to exhaust Landlock's layers.
    HostSimulation,
    /// The backend is the reference policy service and ACP bridge (anchoring scenarios).
    PolicyService,
    /// The bridge can run scripted tool calls confined by this host's platform chain.
    ScriptedCalls,
    /// The backend declares its dialect (denial signatures, runner-failure rules, status channel)
    /// in every `confined` answer: an external backend. Derived, never declared or committed.
    DeclaredDialect,
    /// The backend declared protected paths in its handshake (protocol 2), which the suite
    /// verifies. Derived, never declared or committed.
    DeclaredProtected,
    /// The backend declared places it makes private (protocol 2), which the suite verifies.
    /// Derived, never declared or committed.
    DeclaredPrivate,
    /// Each of the backend's calls has a temp area of its own: it never writes the host's `/tmp`
    /// or the caller's `$TMPDIR` (a reference backend; an external one that declared `/tmp`
    /// private). Derived, never declared or committed.
    PrivateTemp,
    /// The backend's calls write the host's `/tmp` and the caller's `$TMPDIR` (no private temp
    /// area). Derived, never declared or committed.
    SharedTemp,
}

impl From<crate::protocol::WireCapability> for Capability {
    fn from(c: crate::protocol::WireCapability) -> Capability {
        use crate::protocol::WireCapability;
        match c {
            WireCapability::Confine => Capability::Confine,
            WireCapability::StatusChannel => Capability::StatusChannel,
            WireCapability::AbiCap => Capability::AbiCap,
        }
    }
}

impl Capability {
    /// True for the capabilities that follow from what a backend is, never declared or
    /// committed: `classifier`, `declared-dialect`, `declared-protected`, `declared-private`,
    /// `private-temp`, `shared-temp`.
    pub const fn is_derived(self) -> bool {
        matches!(
            self,
            Capability::Classifier
                | Capability::DeclaredDialect
                | Capability::DeclaredProtected
                | Capability::DeclaredPrivate
                | Capability::PrivateTemp
                | Capability::SharedTemp
        )
    }

    /// The YAML name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Capability::Classifier => "classifier",
            Capability::Confine => "confine",
            Capability::StatusChannel => "status-channel",
            Capability::AbiCap => "abi-cap",
            Capability::LocalChain => "local-chain",
            Capability::HostSimulation => "host-simulation",
            Capability::PolicyService => "policy-service",
            Capability::ScriptedCalls => "scripted-calls",
            Capability::DeclaredDialect => "declared-dialect",
            Capability::DeclaredProtected => "declared-protected",
            Capability::DeclaredPrivate => "declared-private",
            Capability::PrivateTemp => "private-temp",
            Capability::SharedTemp => "shared-temp",
        }
    }
}

/// A matrix value: a plain YAML scalar. `text` is what `${axis}` becomes inside a longer string;
/// `value` (keeping the YAML type: integer, boolean or string) is what a whole-value reference
/// becomes.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    /// The scalar as text.
    pub text: String,
    /// The scalar with its YAML type.
    pub value: serde_json::Value,
}

impl schemars::JsonSchema for Scalar {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Scalar".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A plain scalar: a string, an integer or a boolean.",
            "type": ["string", "integer", "boolean"]
        })
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a plain scalar (string, integer or boolean)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_owned(),
                    value: v.into(),
                })
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_string(),
                    value: v.into(),
                })
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_string(),
                    value: v.into(),
                })
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_string(),
                    value: v.into(),
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// One rule of a derived variable: the first rule whose `when` matches the assignment gives the
/// value; a rule without `when` always matches.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeriveRule {
    /// Axis name to accepted value(s).
    #[serde(default)]
    pub when: BTreeMap<String, OneOrMany>,
    /// The derived value.
    pub value: Scalar,
}

/// One scalar or a list of them.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    /// A list of accepted values.
    Many(Vec<Scalar>),
    /// A single accepted value.
    One(Scalar),
}

impl OneOrMany {
    /// True when `value` is accepted.
    pub fn accepts(&self, value: &str) -> bool {
        match self {
            OneOrMany::One(s) => s.text == value,
            OneOrMany::Many(list) => list.iter().any(|s| s.text == value),
        }
    }
}

/// One case: a named sequence of steps, each with its own expectation.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The trial name's last segment: lowercase letters, digits, `_` and `-`.
    pub name: String,
    /// The composition `tool` steps run in (one world and one session per case).
    #[serde(default)]
    pub setup: Option<ToolSetup>,
    /// Steps run in order; the first failing expectation fails the case.
    pub steps: Vec<Step>,
    /// Planned only on a host that has (or lacks) this: a case about what the host has is
    /// planned by what it has, and the report says why a case was not.
    #[serde(default)]
    pub when_host: Option<HostFact>,
    /// Run the case with the host's `/tmp` and `/dev/shm` seen through fresh directories of the
    /// case's own (a mount namespace the harness makes for it, so root only: plan it
    /// `when_host: root`), and fail it when anything is left there once it is over: a staging
    /// directory, a lock or a socket the backend made and did not remove, named with its owner
    /// and mode (see `conformance/src/leftovers/`).
    #[serde(default)]
    pub leftovers: bool,
}

/// Something a host has or lacks, that decides which host-dependent cases are planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HostFact {
    /// bwrap is installed and confines here (its functional probe passes).
    Bwrap,
    /// bwrap is not installed or does not confine here.
    NoBwrap,
    /// The harness runs as root (a promise about root's powers: `trusted.*` xattrs, file
    /// capabilities).
    Root,
    /// The harness's user has a cargo to act as the person with (rustup's proxy, or cargo on
    /// `PATH`): the cases where the person's cargo runs beside the call.
    Cargo,
}
