//! The host's facts a report carries: OS, kernel, Landlock ABI, bwrap version, the commit.

use super::HostFacts;

pub(super) fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The host's facts, measured here whatever backends run (an external backend alone still gets
/// the kernel's Landlock ABI and the installed bwrap's version).
pub(super) fn host_facts() -> HostFacts {
    HostFacts {
        os: std::env::consts::OS,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|k| k.trim().to_owned()),
        landlock_abi: landlock_abi(),
        bwrap_version: which::which("bwrap").ok().and_then(|bwrap| {
            let out = std::process::Command::new(bwrap)
                .arg("--version")
                .stdin(std::process::Stdio::null())
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            (out.status.success() && !text.is_empty()).then_some(text)
        }),
    }
}

/// The kernel's Landlock ABI version, or `None` when it has no Landlock (or is not Linux).
fn landlock_abi() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) reads no
        // memory and returns the ABI version (or -1); nix has no wrapper for it.
        #[allow(unsafe_code)]
        let abi = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_landlock_create_ruleset,
                std::ptr::null::<nix::libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(abi).ok().filter(|abi| *abi > 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
