//! The steps a case is made of: one kind each, each carrying its own `expect`.

use serde::Deserialize;

use super::*;

/// One step. Each kind carries its own `expect`.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub enum Step {
    /// Classify a process outcome against the backend's dialect (pure data, no process runs).
    Classify(ClassifyStep),
    /// Perform one file effect confined, then check the disk.
    Effect(EffectStep),
    /// Let the local chain select a backend on a (simulated) host and run a canary command.
    Select(SelectStep),
    /// Call one tool (`bash`, `bash_output`, `read`, `write`, `edit`) in the case's composition.
    Tool(ToolStep),
    /// One editor or process action on the policy bridge (new, load, set, prompt, crash, ...).
    Wire(Box<WireStep>),
    /// Run a hostile payload confined in a fresh world, then check the host (family `hardening`).
    Attack(AttackStep),
    /// Race the write tool against a thread swapping a directory for a symlink that points out.
    FenceRace(FenceRaceStep),
    /// Race confined shell calls in a nested workspace against a swap of its parent for a
    /// symlink between the pin and the runner's bind, then check the outside tree.
    BindRace(BindRaceStep),
    /// Compare the case's world with its snapshot from when the case began.
    World(WorldStep),
    /// Listen outside the sandbox, let a confined payload try to reach the listener under a
    /// network knob, then check what the listener recorded (family `network`).
    Net(NetStep),
    /// Set up one host IPC route outside the sandbox (a daemon on a unix socket, a FIFO reader, a
    /// SysV or POSIX queue, a keyring key, a tmux server), let a confined payload try it, then
    /// check the host for any effect (family `host-ipc`).
    HostIpc(HostIpcStep),
    /// Run payloads that print the backend's own declared runner-failure signatures and exit with
    /// its codes: each ran, so each must be an ordinary result.
    Forge(ForgeStep),
    /// Try to create or change every path the backend declared protected, then check the disk.
    Declared(DeclaredStep),
    /// Try to write in every system and home directory of the host, then check the host: nothing
    /// beyond the writable set (and what the backend declared) may be writable.
    Writable(WritableStep),
    /// Walk every directory the payload can see, try to create a file in each, and map each
    /// place that took one back to the host: nothing may land outside the writable set.
    Walk(WalkStep),
    /// Read the kernel's mount table inside, try to create a file and a directory at every
    /// mount, and map each that took one back to the host by device and filesystem root.
    Mounts(MountsStep),
    /// Try one metadata effect (chmod, chown, utimes, xattrs, set-id bits, truncate) outside the
    /// writable set, then compare the host's inodes.
    Metadata(MetadataStep),
    /// Verify every place the backend declared private: the host's place is not seen inside,
    /// and nothing written there reaches it.
    Private(PrivateStep),
}

impl Step {
    /// The capabilities this step needs from the backend, beyond the scenario's `requires`.
    pub fn needs(&self) -> &'static [Capability] {
        match self {
            Step::Classify(_) => &[Capability::Classifier],
            Step::Effect(_) => &[Capability::Confine],
            Step::Select(s) if s.host != Host::Normal => {
                &[Capability::LocalChain, Capability::HostSimulation]
            }
            Step::Select(_) => &[Capability::LocalChain],
            Step::Tool(_) => &[Capability::Confine],
            // The built agent over stdio confines with the backend under test when that is a
            // reference local backend (the policy bridge: the platform chain): the scenario's
            // `requires` and `backends` say which.
            Step::Wire(w) if w.agent_process() => &[],
            Step::Wire(w) if w.run.is_some() || !w.runs.is_empty() => {
                &[Capability::PolicyService, Capability::ScriptedCalls]
            }
            Step::Wire(_) => &[Capability::PolicyService],
            Step::Attack(_)
            | Step::FenceRace(_)
            | Step::BindRace(_)
            | Step::Net(_)
            | Step::HostIpc(_) => &[Capability::Confine],
            // Checks the world the case's other steps built; needs nothing of its own.
            Step::World(_) => &[],
            // Every backend that confines declares a dialect in its launch (the reference ones
            // too), so every one is held to it, not only those speaking the protocol.
            Step::Forge(_) => &[Capability::Confine],
            Step::Declared(_) => &[Capability::Confine, Capability::DeclaredProtected],
            Step::Private(_) => &[Capability::Confine, Capability::DeclaredPrivate],
            Step::Writable(_) | Step::Walk(_) | Step::Mounts(_) | Step::Metadata(_) => {
                &[Capability::Confine]
            }
        }
    }
}
