//! `certify merge`: one report and one matrix from the reports of several hosts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use conformance::certify;

/// `certify merge DIR...`: one report and one matrix from the reports of several hosts.
#[derive(Parser)]
#[command(
    name = "certify merge",
    about = "Join the reports of several hosts (the legs of a CI matrix) into one report and one matrix",
    after_help = certify::exit::HELP
)]
struct MergeCli {
    /// A report directory (holding report.json) or a report.json; one per host (at least one).
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// Where to write merged.json, matrix.md and report.html.
    #[arg(long, default_value = "certify-report/merged")]
    out: PathBuf,
    /// Merge reports of different suite versions (refused by default: they do not compare).
    #[arg(long)]
    allow_mixed_versions: bool,
    /// The legs the merge must hold, comma-separated (a host is labelled by its report's leg):
    /// a leg without a report is named and fails the merge, whose matrix is still written.
    #[arg(long, value_delimiter = ',')]
    expect: Vec<String>,
}

/// Exit 0 when every backend is certified on every host, 1 when not (or a leg is missing), 2 on
/// bad input.
pub(crate) fn merge_main(args: impl Iterator<Item = OsString>) -> ExitCode {
    let cli = MergeCli::parse_from(std::iter::once(OsString::from("certify merge")).chain(args));
    let merged = match conformance::certify::merge::merge(
        &cli.reports,
        cli.allow_mixed_versions,
        &cli.expect,
    ) {
        Ok(merged) => merged,
        Err(e) => {
            eprintln!("certify merge: {e}");
            return ExitCode::from(certify::exit::USAGE);
        }
    };
    if let Err(e) = conformance::certify::merge::write(&merged, &cli.out) {
        eprintln!("certify merge: cannot write to {}: {e}", cli.out.display());
        return ExitCode::from(certify::exit::USAGE);
    }
    print!("{}", conformance::certify::merge::markdown(&merged));
    println!(
        "\nmerged: {0}/merged.json, {0}/matrix.md, {0}/report.html",
        cli.out.display()
    );
    for (leg, why) in &merged.missing {
        eprintln!("certify merge: leg {leg} is missing: {why}");
    }
    if merged.certified {
        ExitCode::from(certify::exit::CERTIFIED)
    } else {
        ExitCode::from(certify::exit::NOT_CERTIFIED)
    }
}
