//! The launcher's command-line contract, shared by the launcher binary and the provider that maps
//! sandbox modes onto its flags. The strings here are what the provider's runner-failure dialect
//! matches, so they live once, next to the program that prints them.
//!
//! ```text
//! landlock-run [--abi-cap N] [--status-fd FD] (--ro PATH | --rw PATH)... -- PROGRAM [ARGS...]
//! landlock-run --probe [--abi-cap N]
//! ```
//!
//! - `--ro PATH` grants reading beneath PATH (reads are not restricted at all today; the flag keeps
//!   profiles explicit), `--rw PATH` grants every governed write beneath PATH (or to the file).
//! - `--abi-cap N` uses at most Landlock ABI N. It can only weaken the launcher, which then reports
//!   `partial` when the capped ABI cannot govern every promised file effect.
//! - `--status-fd FD` writes JSON-lines launch records to FD (close-on-exec): `{"exec": ...}` just
//!   before `execve`, then `{"exec-failed": ...}` if it fails; `{"error": ...}` for any launcher
//!   failure before that. The payload ran exactly when `exec` is present with no failure after it.
//! - `--probe` enforces a maximal ruleset in a short-lived child, prints one JSON object
//!   ([`ProbeReport`]) and exits 0 only when the kernel actually enforced it.
//!
//! Every launcher failure exits [`FAILURE_EXIT_CODE`] without exec'ing, with a stderr line starting
//! [`DIAGNOSTIC_PREFIX`]. No environment variable changes what the launcher does.

use serde_json::json;

/// Exit code of every launcher failure; the payload was never exec'd.
pub const FAILURE_EXIT_CODE: i32 = 125;

/// Prefix of every line the launcher itself prints on stderr.
pub const DIAGNOSTIC_PREFIX: &str = "landlock-run: ";

/// The one informational line the launcher prints when the kernel's Landlock ABI cannot govern
/// every promised file effect. Benign: it never proves a launcher failure by itself.
pub const PARTIAL_NOTICE: &str = "landlock-run: notice: partial enforcement: this kernel's Landlock ABI cannot govern every file effect";

/// The lowest Landlock ABI that governs every file effect the sandbox modes promise (ABI 3 adds
/// truncate; ABI 2 adds cross-directory rename and link).
pub const FULL_ENFORCEMENT_ABI: u32 = 3;

/// What `--probe` prints on stdout, as one JSON object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// The kernel enforced a maximal ruleset in a child.
    pub usable: bool,
    /// `full` or `partial` (meaningful when usable).
    pub enforcement: &'static str,
    /// The ABI the launcher enforces with (the kernel's, lowered by `--abi-cap` and by what the
    /// modes need).
    pub abi: u32,
    /// The running kernel's Landlock ABI (0 when Landlock is unavailable).
    pub kernel_abi: u32,
    /// Why it is not usable, when it is not.
    pub reason: Option<String>,
}

impl ProbeReport {
    /// The JSON line.
    pub fn to_json(&self) -> String {
        json!({
            "usable": self.usable,
            "enforcement": self.enforcement,
            "abi": self.abi,
            "kernel_abi": self.kernel_abi,
            "reason": self.reason,
        })
        .to_string()
    }

    /// Parses the JSON line printed by `--probe`.
    pub fn parse(line: &str) -> Option<ProbeReport> {
        let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
        Some(ProbeReport {
            usable: v.get("usable")?.as_bool()?,
            enforcement: match v.get("enforcement")?.as_str()? {
                "full" => "full",
                _ => "partial",
            },
            abi: u32::try_from(v.get("abi")?.as_u64()?).ok()?,
            kernel_abi: u32::try_from(v.get("kernel_abi")?.as_u64()?).ok()?,
            reason: v.get("reason").and_then(|r| r.as_str()).map(str::to_owned),
        })
    }
}
