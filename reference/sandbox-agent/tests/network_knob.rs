//! The network knob through the bridge: its own `sandbox/network` event, folded over the
//! deployment default; presets stand for the default network; a session whose network moved
//! away from every preset reads `custom`; an idle switch away from it is held and anchored at
//! the next prompt (one event, none when net-zero); the prompt never states the network.

use agent_client_protocol::v1::schema::{SessionConfigOption, SessionConfigOptionValue};
use sandbox::{NetworkMode, SandboxMode};
use sandbox_agent::{Bridge, Composition};
use sandbox_policy::presets::{CUSTOM, Knobs, PresetTable};
use sandbox_policy::{ApprovalPolicy, Event, PolicyService};
use sandbox_test_support::scratch_root;

/// A bridge over the workspace `dir`, its sessions beside it (never inside a writable root).
fn bridge(dir: &std::path::Path, default_network: NetworkMode) -> Bridge {
    let sessions = dir.parent().expect("parent").join("sessions");
    std::fs::create_dir_all(&sessions).expect("sessions");
    let policy = PolicyService::new(SandboxMode::ReadOnly, dir)
        .expect("policy")
        .with_default_network(default_network);
    let presets = PresetTable::standard(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
        .expect("table")
        .with_default_network(default_network);
    Bridge::new(policy, presets, &sessions, Composition::COMPLETE).expect("bridge")
}

fn current(options: &[SessionConfigOption]) -> String {
    let json = serde_json::to_value(options).expect("json");
    json[0]["currentValue"]
        .as_str()
        .expect("a select's current value")
        .to_owned()
}

fn network_events(events: &[Event]) -> Vec<NetworkMode> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SandboxNetwork { network } => Some(*network),
            _ => None,
        })
        .collect()
}

#[test]
fn a_network_outside_every_preset_reads_custom_and_switching_away_anchors_once() {
    let (_dir, root) = scratch_root("sandbox-agent-network-knob-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("ws");
    let mut bridge = bridge(&ws, NetworkMode::Enabled);
    let (id, options) = bridge.new_session(&ws).expect("new");
    assert_eq!(current(&options), "read-only");
    // The knob's write path: a switch is its event.
    bridge
        .session(&id)
        .expect("session")
        .set_network(NetworkMode::Restricted)
        .expect("append");
    assert_eq!(
        bridge.current(&id).expect("current"),
        Knobs::new(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
            .with_network(NetworkMode::Restricted)
    );
    assert_eq!(current(&bridge.options(&id).expect("options")), CUSTOM);
    // The next call runs restricted: the stamp carries the fold.
    let stamp = bridge
        .policy()
        .resolve(Some(bridge.session(&id).expect("session")), None)
        .expect("stamp");
    assert_eq!(stamp.network, NetworkMode::Restricted);
    // A grant widens the file mode only, never the network.
    let granted = bridge
        .policy()
        .resolve(
            Some(bridge.session(&id).expect("session")),
            Some(SandboxMode::WorkspaceWrite),
        )
        .expect("granted");
    assert_eq!(granted.network, NetworkMode::Restricted);

    // Idle: selecting read-only is held (nothing appended), shown at once.
    let value = SessionConfigOptionValue::value_id("read-only");
    let shown = bridge
        .set_config_option(&id, "permission", &value)
        .expect("set");
    assert_eq!(current(&shown), "read-only");
    let before = bridge.events(&id).expect("events");
    assert_eq!(network_events(&before), [NetworkMode::Restricted]);
    // The next prompt anchors exactly one network event, and the prompt states no network.
    let turn = bridge.begin_turn(&id).expect("turn");
    assert_eq!(
        turn.anchored,
        vec![Event::SandboxNetwork {
            network: NetworkMode::Enabled
        }]
    );
    for word in ["network", "restricted", "enabled", "offline"] {
        assert!(
            !turn.system_prompt.to_lowercase().contains(word),
            "the prompt states the network: {}",
            turn.system_prompt
        );
    }
    let after = bridge.events(&id).expect("events");
    assert_eq!(
        network_events(&after),
        [NetworkMode::Restricted, NetworkMode::Enabled]
    );
    bridge.end_turn(&id).expect("end");
}

#[test]
fn a_net_zero_idle_switch_anchors_nothing_and_the_default_is_what_presets_stand_for() {
    let (_dir, root) = scratch_root("sandbox-agent-network-knob-");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("ws");
    let mut bridge = bridge(&ws, NetworkMode::Restricted);
    let (id, options) = bridge.new_session(&ws).expect("new");
    // A deployment whose default is restricted: a fresh session matches its presets.
    assert_eq!(current(&options), "read-only");
    assert_eq!(bridge.policy().knobs(None).network, NetworkMode::Restricted);
    for preset in ["workspace-write", "read-only"] {
        bridge
            .set_config_option(
                &id,
                "permission",
                &SessionConfigOptionValue::value_id(preset),
            )
            .expect("set");
    }
    let turn = bridge.begin_turn(&id).expect("turn");
    assert!(turn.anchored.is_empty(), "{:?}", turn.anchored);
    assert!(network_events(&bridge.events(&id).expect("events")).is_empty());
}
