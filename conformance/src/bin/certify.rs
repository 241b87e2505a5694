//! `certify`: run every scenario against a backend and write a certificate report.
//!
//! - `certify` certifies every reference backend usable on this host.
//! - `certify --backend bwrap --backend landlock` certifies those (an unusable one fails).
//! - `certify [--expectations FILE] -- COMMAND ARGS...` certifies an external backend that speaks
//!   the JSON-lines protocol (`conformance/protocol/README.md`).
//! - `certify merge DIR...` joins the reports of several hosts into one report and one matrix.
//! - `certify diff OLD NEW` lists what changed between two runs (new failures, XPASSes, fixes).
//!
//! The suite is inside the binary (`conformance::suite`): an installed `certify` needs no clone.
//! It is written into a private directory for the run unless `--scenarios DIR` (or
//! `CONFORMANCE_SCENARIOS`) names another, and the report names the suite version and the
//! scenario set's hash. `certify` is also the Landlock launcher, `sandboxctl` (the `local`
//! backend's selection steps) and the reference agent (the `policy` backend's stdio steps): run
//! under the name `landlock-run`, `sandboxctl` or `sandbox-agent` it is that program, and when one
//! of them is not found next to it (or on `PATH`) it hard-links (or copies) itself under that
//! name into a private directory outside every temp root and points the lookup there. A launcher it cannot provide leaves the
//! backends that need it unusable, with the reason (never an unconfined run).
//!
//! Exit code 0 only when every backend in the run is certified on the whole suite; 1 when not;
//! 2 on bad usage; 3 for `PARTIAL`: everything the run ran passed, but `--family` left families
//! out, so it is no certificate; 130 when stopped by a signal (Ctrl-C): no new case starts, the
//! cases under way end, every world of the run is removed, and no report is written.

use std::process::ExitCode;

#[path = "certify/backends.rs"]
mod backends;
#[path = "certify/cli.rs"]
mod cli;
#[path = "certify/diff_cmd.rs"]
mod diff_cmd;
#[path = "certify/launcher.rs"]
mod launcher;
#[path = "certify/merge_cmd.rs"]
mod merge_cmd;
#[path = "certify/run_cmd.rs"]
mod run_cmd;
#[path = "certify/signals.rs"]
mod signals;

use diff_cmd::diff_main;
use merge_cmd::merge_main;

/// The name this binary answers to as the Landlock launcher.
const LAUNCHER: &str = "landlock-run";
/// The name this binary answers to as `sandboxctl` (the `local` backend's selection steps run it).
const SANDBOXCTL: &str = "sandboxctl";
/// The name this binary answers to as the reference agent (the `policy` backend's stdio steps).
const AGENT: &str = "sandbox-agent";

fn main() -> ExitCode {
    // A multi-call binary: under the launcher's name it is the launcher, nothing else.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    match std::path::Path::new(&argv0)
        .file_name()
        .and_then(|n| n.to_str())
    {
        Some(LAUNCHER) => return landlock_run::run(),
        Some(SANDBOXCTL) => return sandbox_cli::main_with_args(std::env::args_os()),
        Some(AGENT) => return sandbox_agent::cli::main_with_args(std::env::args_os()),
        _ => {}
    }
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == "merge" => return merge_main(args),
        Some(a) if a == "diff" => return diff_main(args),
        _ => {}
    }
    run_cmd::run()
}
