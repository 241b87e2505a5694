//! Permission presets: one product-facing choice that writes the knobs it bundles (sandbox mode,
//! approval policy, and optionally the network). A knob combination outside the table reads as
//! `custom`, which can be switched away from but never selected.

use sandbox::{NetworkMode, SandboxMode};

use crate::session::{ApprovalPolicy, Event, Session};

/// The id reported for a knob combination that matches no preset.
pub const CUSTOM: &str = "custom";

/// The values of every knob of one session at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// The sandbox mode.
    pub mode: SandboxMode,
    /// The approval policy.
    pub approval: ApprovalPolicy,
    /// The network mode.
    pub network: NetworkMode,
}

impl Knobs {
    /// Mode and approval policy with the network `enabled` (the seeds' behaviour).
    pub fn new(mode: SandboxMode, approval: ApprovalPolicy) -> Knobs {
        Knobs {
            mode,
            approval,
            network: NetworkMode::Enabled,
        }
    }

    /// The same values with another network mode.
    pub fn with_network(self, network: NetworkMode) -> Knobs {
        Knobs { network, ..self }
    }
}

/// One preset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preset {
    /// Its id on the wire.
    pub id: String,
    /// Its name as shown.
    pub name: String,
    /// The sandbox mode it sets.
    pub mode: SandboxMode,
    /// The approval policy it sets.
    pub approval: ApprovalPolicy,
    /// The network mode it bundles; `None`: the deployment default (the preset does not choose,
    /// and a session whose network knob moved away from the default matches it no longer).
    pub network: Option<NetworkMode>,
}

/// Why a preset table or a selection was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PresetError {
    /// The table uses the reserved id.
    #[error("preset id {CUSTOM:?} is reserved for combinations outside the table")]
    ReservedId,
    /// Two presets share an id.
    #[error("preset id {0:?} is used twice")]
    DuplicateId(String),
    /// Two presets set the same knobs, so the current one would be ambiguous.
    #[error("presets {0:?} and {1:?} set the same mode, approval policy and network")]
    DuplicateKnobs(String, String),
    /// `custom` can be switched away from, never to.
    #[error("{CUSTOM:?} cannot be selected; choose one of the presets")]
    CustomSelected,
    /// No such preset.
    #[error("unknown preset {0:?}")]
    Unknown(String),
}

/// A validated preset table.
#[derive(Clone, Debug)]
pub struct PresetTable {
    presets: Vec<Preset>,
    default_network: NetworkMode,
}

impl PresetTable {
    /// Validates `presets`. Deployment defaults that match no preset are legal: a new session then
    /// reads as the switch-away-only [`CUSTOM`] (the RFC: "a knob combination outside the table
    /// is reported as switch-away-only custom"), so the defaults are not checked here.
    pub fn new(
        presets: Vec<Preset>,
        default_mode: SandboxMode,
        default_approval: ApprovalPolicy,
    ) -> Result<PresetTable, PresetError> {
        for (i, p) in presets.iter().enumerate() {
            if p.id == CUSTOM {
                return Err(PresetError::ReservedId);
            }
            for q in &presets[..i] {
                if q.id == p.id {
                    return Err(PresetError::DuplicateId(p.id.clone()));
                }
                if (q.mode, q.approval, q.network) == (p.mode, p.approval, p.network) {
                    return Err(PresetError::DuplicateKnobs(q.id.clone(), p.id.clone()));
                }
            }
        }
        let _ = (default_mode, default_approval);
        Ok(PresetTable {
            presets,
            default_network: NetworkMode::default(),
        })
    }

    /// The same table for a deployment whose default network mode is `network`: what a preset
    /// without a network of its own stands for (`enabled` unless configured).
    pub fn with_default_network(mut self, network: NetworkMode) -> PresetTable {
        self.default_network = network;
        self
    }

    /// The network mode preset `p` sets.
    fn network_of(&self, p: &Preset) -> NetworkMode {
        p.network.unwrap_or(self.default_network)
    }

    /// The standard table: read-only + ask, workspace-write + ask, danger-full-access + never.
    pub fn standard(
        default_mode: SandboxMode,
        default_approval: ApprovalPolicy,
    ) -> Result<PresetTable, PresetError> {
        let preset = |id: &str, name: &str, mode, approval| Preset {
            id: id.into(),
            name: name.into(),
            mode,
            approval,
            network: None,
        };
        PresetTable::new(
            vec![
                preset(
                    "read-only",
                    "Read only",
                    SandboxMode::ReadOnly,
                    ApprovalPolicy::Ask,
                ),
                preset(
                    "workspace-write",
                    "Workspace",
                    SandboxMode::WorkspaceWrite,
                    ApprovalPolicy::Ask,
                ),
                preset(
                    "full-access",
                    "Full access",
                    SandboxMode::DangerFullAccess,
                    ApprovalPolicy::Never,
                ),
            ],
            default_mode,
            default_approval,
        )
    }

    /// The presets, in order.
    pub fn presets(&self) -> &[Preset] {
        &self.presets
    }

    fn matching(&self, knobs: Knobs) -> Option<&Preset> {
        self.presets.iter().find(|p| {
            p.mode == knobs.mode
                && p.approval == knobs.approval
                && self.network_of(p) == knobs.network
        })
    }

    /// The current preset id for these knob values, or [`CUSTOM`].
    pub fn current(&self, knobs: Knobs) -> &str {
        self.matching(knobs).map_or(CUSTOM, |p| p.id.as_str())
    }

    /// The knob events that switch a session from its current values to preset `id`: only the
    /// knobs that change (none when it is already selected).
    pub fn switch(&self, id: &str, current: Knobs) -> Result<Vec<Event>, PresetError> {
        if id == CUSTOM {
            return Err(PresetError::CustomSelected);
        }
        let p = self
            .presets
            .iter()
            .find(|p| p.id == id)
            .ok_or_else(|| PresetError::Unknown(id.to_owned()))?;
        let mut events = Vec::new();
        if p.mode != current.mode {
            events.push(Event::SandboxMode { mode: p.mode });
        }
        if p.approval != current.approval {
            events.push(Event::ApprovalPolicy { policy: p.approval });
        }
        let network = self.network_of(p);
        if network != current.network {
            events.push(Event::SandboxNetwork { network });
        }
        Ok(events)
    }

    /// Selects preset `id` for `session` through the knobs' write path.
    pub fn select(
        &self,
        id: &str,
        session: &Session,
        policy: &crate::PolicyService,
    ) -> Result<Vec<Event>, String> {
        let events = self
            .switch(id, policy.knobs(Some(session)))
            .map_err(|e| e.to_string())?;
        for e in &events {
            session.append(e.clone()).map_err(|e| e.to_string())?;
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PresetTable {
        PresetTable::standard(SandboxMode::ReadOnly, ApprovalPolicy::Ask).expect("table")
    }

    #[test]
    fn selecting_writes_only_the_knobs_that_change() {
        let t = table();
        assert_eq!(
            t.switch(
                "workspace-write",
                Knobs::new(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
            ),
            Ok(vec![Event::SandboxMode {
                mode: SandboxMode::WorkspaceWrite
            }])
        );
        assert_eq!(
            t.switch(
                "full-access",
                Knobs::new(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
            )
            .expect("switch")
            .len(),
            2
        );
        assert_eq!(
            t.switch(
                "read-only",
                Knobs::new(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
            ),
            Ok(vec![])
        );
    }

    #[test]
    fn unmatched_knobs_read_as_custom_which_cannot_be_selected() {
        let t = table();
        assert_eq!(
            t.current(Knobs::new(
                SandboxMode::WorkspaceWrite,
                ApprovalPolicy::Never
            )),
            CUSTOM
        );
        assert_eq!(
            t.current(Knobs::new(
                SandboxMode::DangerFullAccess,
                ApprovalPolicy::Never
            )),
            "full-access"
        );
        assert_eq!(
            t.switch(
                CUSTOM,
                Knobs::new(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
            ),
            Err(PresetError::CustomSelected)
        );
        assert!(matches!(
            t.switch(
                "turbo",
                Knobs::new(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
            ),
            Err(PresetError::Unknown(_))
        ));
    }

    #[test]
    fn a_bad_table_is_a_load_error() {
        let custom = Preset {
            id: CUSTOM.into(),
            name: "x".into(),
            mode: SandboxMode::ReadOnly,
            approval: ApprovalPolicy::Ask,
            network: None,
        };
        assert_eq!(
            PresetTable::new(vec![custom], SandboxMode::ReadOnly, ApprovalPolicy::Ask).err(),
            Some(PresetError::ReservedId)
        );
    }

    #[test]
    fn the_network_knob_is_bundled_by_presets_and_reads_custom_when_it_matches_none() {
        use sandbox::NetworkMode::{Enabled, Restricted};
        let t = table();
        let ro = Knobs::new(SandboxMode::ReadOnly, ApprovalPolicy::Ask);
        assert_eq!(t.current(ro), "read-only");
        assert_eq!(t.current(ro.with_network(Restricted)), CUSTOM);
        // Switching away from custom writes the preset's (default) network back.
        assert_eq!(
            t.switch("read-only", ro.with_network(Restricted)),
            Ok(vec![Event::SandboxNetwork { network: Enabled }])
        );
        // A deployment whose default is restricted: its presets stand for restricted.
        let offline = table().with_default_network(Restricted);
        assert_eq!(offline.current(ro.with_network(Restricted)), "read-only");
        assert_eq!(offline.current(ro), CUSTOM);
        // A preset that bundles its own network.
        let bundled = PresetTable::new(
            vec![Preset {
                id: "offline".into(),
                name: "Offline".into(),
                mode: SandboxMode::WorkspaceWrite,
                approval: ApprovalPolicy::Ask,
                network: Some(Restricted),
            }],
            SandboxMode::ReadOnly,
            ApprovalPolicy::Ask,
        )
        .expect("table");
        assert_eq!(
            bundled.switch("offline", ro),
            Ok(vec![
                Event::SandboxMode {
                    mode: SandboxMode::WorkspaceWrite
                },
                Event::SandboxNetwork {
                    network: Restricted
                }
            ])
        );
        assert_eq!(
            bundled.current(
                Knobs::new(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask)
                    .with_network(Restricted)
            ),
            "offline"
        );
    }

    #[test]
    fn defaults_matching_no_preset_are_custom_not_refused() {
        let t = PresetTable::standard(SandboxMode::DangerFullAccess, ApprovalPolicy::Ask)
            .expect("defaults outside the table load");
        assert_eq!(
            t.current(Knobs::new(
                SandboxMode::DangerFullAccess,
                ApprovalPolicy::Ask
            )),
            CUSTOM
        );
    }
}
