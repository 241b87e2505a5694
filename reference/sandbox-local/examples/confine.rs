//! Confine one command from Rust: a policy, pinned; a provider that picks this host's backend;
//! the confined launch spawned; its result classified.
//!
//! ```sh
//! cargo run -p sandbox-local --example confine -- /path/to/workspace bash -c 'touch ok /etc/no'
//! ```
//!
//! It prints the backend, the enforcement per class, and how the command ended: ran (with its
//! exit code), denied (the kernel refused a file effect: the marker the model would see), or the
//! sandbox itself failed (`SANDBOX_UNAVAILABLE`: the command never ran).

use std::ffi::OsString;
use std::process::ExitCode;

use sandbox::SandboxProvider as _;
use sandbox::{Classification, ExecutionPolicy, SandboxMode, denial_marker};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::{LocalConfig, LocalProvider};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(workspace), command) = (args.next(), args.collect::<Vec<OsString>>()) else {
        eprintln!("usage: confine WORKSPACE COMMAND [ARGS...]");
        return ExitCode::from(2);
    };
    if command.is_empty() {
        eprintln!("usage: confine WORKSPACE COMMAND [ARGS...]");
        return ExitCode::from(2);
    }
    // The policy: workspace-write in WORKSPACE, pinned now (device and inode), so a directory
    // swapped in later under the same path fails the call with WORKSPACE_MOVED.
    let policy = match ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &workspace).pinned() {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("confine: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(provider_policy) = policy.for_provider() else {
        unreachable!("workspace-write is a confined mode");
    };
    // The provider selects this host's backend (bwrap, else the Landlock launcher, on Linux;
    // Seatbelt on macOS) by functional probes, once, and never runs anything unconfined.
    let provider = LocalProvider::new(LocalConfig::default());
    let launch = match provider.confine(&command, &provider_policy) {
        Ok(launch) => launch,
        Err(unavailable) => {
            eprintln!("confine: {unavailable}");
            return ExitCode::from(1);
        }
    };
    println!(
        "backend {} ({})",
        launch.backend,
        launch.enforcement.as_str()
    );
    for (class, report) in launch.classes.iter() {
        println!(
            "  {}: {}{}",
            class.as_str(),
            report.enforcement.as_str(),
            if report.ungoverned.is_empty() {
                String::new()
            } else {
                format!(" (ungoverned: {})", report.ungoverned.join(", "))
            }
        );
    }
    // Spawn it (no outer shell; the status channel tells whether the payload really ran).
    let finished = launch::run(&launch, &LaunchOptions::in_dir(&workspace));
    print!("{}", String::from_utf8_lossy(&finished.stdout));
    eprint!("{}", String::from_utf8_lossy(&finished.stderr));
    match &finished.classification {
        Classification::RunnerFailure { detail, .. } => {
            println!("SANDBOX_UNAVAILABLE: the command never ran: {detail}");
            ExitCode::from(1)
        }
        Classification::Denied { line } => {
            println!("{} ({line})", denial_marker(SandboxMode::WorkspaceWrite));
            ExitCode::from(1)
        }
        Classification::StartFailed { detail } => {
            println!("could not start: {detail}");
            ExitCode::from(1)
        }
        Classification::Ordinary => {
            println!("ran, exit {:?}", finished.exit_code());
            ExitCode::from(finished.exit_code().map_or(1, |c| c.clamp(0, 255) as u8))
        }
    }
}
