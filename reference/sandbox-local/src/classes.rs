//! What one launch reports per enforcement class: the backend's capabilities narrowed by the
//! call's own writable set (a shared temp folder, allowed unix sockets, protected paths no mount
//! covers, git's surface), each gap named. Every backend's launch reports through here.

use sandbox::{ClassEnforcements, ClassReport, EnforcementClass, NetworkMode};

use crate::probe;
use crate::profile::WritableSet;

/// The per-class report of one launch: files as the backend governs them; the network as the
/// backend governs it when the policy restricts it, else not governed (nothing was asked); the
/// protected paths, when the policy has any, as [`protected_report`] says; the host's IPC as the
/// backend closes it, in every confined mode.
pub(crate) fn launch_classes(
    capabilities: &ClassEnforcements,
    set: &WritableSet,
    network: NetworkMode,
) -> ClassEnforcements {
    let net = if network.is_restricted() {
        capabilities.get(EnforcementClass::Network)
    } else {
        ClassReport::not_governed()
    };
    let mut files = capabilities.get(EnforcementClass::Files);
    if set.temp_area.is_some()
        && !set.area_at_tmp
        && files.enforcement != sandbox::ClassEnforcement::Full
    {
        // The host's /tmp is outside the writable set here, as any other host folder is: what
        // this backend leaves ungoverned outside reaches the files the person's tools read there.
        files
            .ungoverned
            .push(sandbox::gaps::HOST_TMP_UNMOUNTED.to_owned());
    }
    let classes = ClassEnforcements::default()
        .with(EnforcementClass::Files, files)
        .with(EnforcementClass::Network, net)
        .with(
            EnforcementClass::HostIpc,
            host_ipc_report(capabilities.get(EnforcementClass::HostIpc), set),
        );
    if set.protected.paths.is_empty() {
        return classes;
    }
    classes.with(
        EnforcementClass::Protected,
        protected_report(capabilities.get(EnforcementClass::Protected), set),
    )
}

/// The host-IPC class of one launch: what the backend closes here, and with named unix sockets
/// allowed (`allow_unix_sockets`), those paths under `allowed`. A path-based dialect (Seatbelt:
/// `network-outbound` by `literal` path) allows exactly those sockets, so its class stays what it
/// was. No other backend here can allow a socket by path (seccomp cannot read a `connect`
/// address, Landlock has no unix-socket right before ABI 9, and no mount hides every other socket
/// on the host), so a class that was `full` becomes `partial` naming
/// [`probe::HOST_IPC_UNIX_SOCKETS`]: every unix socket the payload can see is open, not only the
/// allowed ones. Never a silent widening.
fn host_ipc_report(capability: ClassReport, set: &WritableSet) -> ClassReport {
    let capability = shared_temp_report(capability, set);
    if set.unix_sockets.is_empty() {
        return capability;
    }
    let allowed = set.unix_sockets.iter().map(|p| p.display().to_string());
    if !set.protected_by_mounts {
        return capability.with_allowed(allowed);
    }
    let widened = match capability.enforcement {
        sandbox::ClassEnforcement::NotGoverned => capability,
        _ => {
            let mut gaps = capability.ungoverned;
            if !gaps.iter().any(|g| g == probe::HOST_IPC_UNIX_SOCKETS) {
                gaps.insert(0, probe::HOST_IPC_UNIX_SOCKETS.to_owned());
            }
            ClassReport::with_gaps(gaps)
        }
    };
    widened.with_allowed(allowed)
}

/// The host-IPC class narrowed by a writable temp folder the host shares ([`WritableSet::temp`]:
/// `/tmp` and the caller's `$TMPDIR`), naming [`probe::HOST_IPC_SHARED_TEMP`]: what the payload
/// plants there, the person's tools read while the call runs and after it (HD-030).
fn shared_temp_report(capability: ClassReport, set: &WritableSet) -> ClassReport {
    if set.temp.is_empty()
        || set.temp_area.is_some()
        || capability.enforcement == sandbox::ClassEnforcement::NotGoverned
    {
        return capability;
    }
    let mut gaps = capability.ungoverned;
    if !gaps.iter().any(|g| g == probe::HOST_IPC_SHARED_TEMP) {
        gaps.push(probe::HOST_IPC_SHARED_TEMP.to_owned());
    }
    ClassReport::with_gaps(gaps).with_allowed(capability.allowed)
}

/// The protected class of one launch: what the backend can do here, narrowed by the paths no
/// mount covers in this call (they do not exist yet, or a symlink is on the way), each named.
/// Seatbelt denies by path, so nothing is uncovered for it.
fn protected_report(capability: ClassReport, set: &WritableSet) -> ClassReport {
    if capability.enforcement == sandbox::ClassEnforcement::NotGoverned {
        return capability;
    }
    if set.prevent.is_some() {
        // The launcher's emulator refuses the protected paths that do not exist yet and git's
        // surface in every git directory while the call runs, and stages new ones; what a
        // config names outside its git directory is still only checked after the call.
        return ClassReport::with_gaps(
            [GIT_NAMED_SURFACE_GAP.to_owned()]
                .into_iter()
                .chain(capability.ungoverned),
        );
    }
    let uncovered = set
        .protected
        .uncovered
        .iter()
        .filter(|_| set.protected_by_mounts)
        .map(|p| format!("{UNCOVERED_PREFIX}{}", p.display()));
    ClassReport::with_gaps(
        uncovered
            .chain([GIT_SURFACE_GAP.to_owned()])
            .chain(capability.ungoverned),
    )
}

/// What no dialect prevents of git's code surface, named in every launch's protected class: it
/// is checked and reverted after the call ([`crate::gitguard`]), which is not prevention.
pub const GIT_SURFACE_GAP: &str = "git surface found per repository (nested repositories, .git/worktrees, .git/modules, core.hooksPath, included configs): reverted after the call, not prevented";

/// What the launcher's emulator does not prevent of git's code surface, named in the protected
/// class of a launch it runs in: what a repository's config names outside its git directory
/// (a relative `core.hooksPath`'s folder, an `include.path` file) is an ordinary file to it,
/// checked and reverted after the call ([`crate::gitguard`]).
pub const GIT_NAMED_SURFACE_GAP: &str = "git surface a config names outside its git directory (core.hooksPath folders, included config files): reverted after the call, not prevented";

/// How a launch names a protected path no mount covers (it does not exist when the call starts,
/// or a symlink is on the way): the payload could create it.
pub const UNCOVERED_PREFIX: &str = "protected path not covered (missing or behind a symlink): ";
