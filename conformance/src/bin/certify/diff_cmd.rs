//! `certify diff`: what changed between two runs.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use conformance::certify;

/// `certify diff OLD NEW`: what changed between two runs.
#[derive(Parser)]
#[command(
    name = "certify diff",
    about = "List the cases newly failing, the new XPASSes and the fixes between two runs \
             (each a report directory, report.json, a merge's directory or merged.json)",
    after_help = certify::exit::HELP
)]
struct DiffCli {
    /// The earlier run (the baseline).
    old: PathBuf,
    /// The later run.
    new: PathBuf,
}

/// Exit 0 when nothing newly fails, 1 on a new failure or XPASS, 2 on bad input.
pub(crate) fn diff_main(args: impl Iterator<Item = OsString>) -> ExitCode {
    use conformance::certify::diff;
    let cli = DiffCli::parse_from(std::iter::once(OsString::from("certify diff")).chain(args));
    let (old, new) = match (diff::read_hosts(&cli.old), diff::read_hosts(&cli.new)) {
        (Ok(old), Ok(new)) => (old, new),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("certify diff: {e}");
            return ExitCode::from(certify::exit::USAGE);
        }
    };
    let changes = diff::diff(&old, &new);
    print!("{}", diff::markdown(&changes));
    if changes.clean() {
        ExitCode::from(certify::exit::CERTIFIED)
    } else {
        ExitCode::from(certify::exit::NOT_CERTIFIED)
    }
}
