//! The command line of a certifying run, and the checks on it made before the first case.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser};
use conformance::certify;
use conformance::suite;

#[derive(Parser)]
#[command(
    name = "certify",
    version,
    about = "Certify sandbox backends against the conformance suite",
    after_help = concat!(
        "certify merge DIR... joins the reports of several hosts (certify merge --help); \
         certify diff OLD NEW lists what changed between two runs (certify diff --help).\n\n",
        "Exit codes: 0 certified (merge: on every host; diff: nothing newly failing); 1 not \
         certified (merge: or a leg missing; diff: a new FAIL or XPASS); 2 bad usage or input, \
         nothing written; 3 PARTIAL (--family left families out); 130 stopped by a signal, no \
         report written."
    )
)]
pub(crate) struct Cli {
    /// Certify this reference backend (repeatable; default: every backend usable on this host).
    #[arg(long = "backend")]
    pub(crate) backends: Vec<String>,
    /// Only this scenario family (repeatable; `--help` lists the suite's families).
    #[arg(long = "family")]
    pub(crate) families: Vec<String>,
    /// Where to write report.json, junit.xml and matrix.md.
    #[arg(long, default_value = "certify-report")]
    pub(crate) out: PathBuf,
    /// Cases run at once (default: twice the cores).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// The longest one case may take, in seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) case_timeout: u64,
    /// The longest an external backend may take to answer one request, in seconds (its start
    /// and handshake get at least 30 s).
    #[arg(long, default_value_t = 10)]
    pub(crate) protocol_timeout: u64,
    /// The external backend's expectation file (reference backends use fixtures/expectations/).
    #[arg(long)]
    pub(crate) expectations: Option<PathBuf>,
    /// The scenario root (default: the suite compiled into this binary).
    #[arg(long)]
    pub(crate) scenarios: Option<PathBuf>,
    /// Certify an operator runner: a bwrap-compatible runner command, used unprobed.
    #[arg(long)]
    pub(crate) runner_command: Option<PathBuf>,
    /// A runner-failure signature of the operator runner (repeatable; at least one).
    #[arg(long = "runner-failure-signature")]
    pub(crate) runner_failure_signatures: Vec<String>,
    /// Replay the run drawn from this seed (places and names of every case); default: the
    /// `CONFORMANCE_SEED` environment variable, else a fresh seed, printed.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// An external backend command speaking the JSON-lines protocol.
    #[arg(last = true)]
    pub(crate) command: Vec<OsString>,
}

/// Why certify cannot start the run it was asked for (exit 2, the message on stderr).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The command line asks for something that cannot run.
    #[error("{0}")]
    Usage(String),
    /// The suite cannot be found or written out.
    #[error("{0}")]
    Suite(String),
    /// The launcher cannot be provided.
    #[error("{0}")]
    Launcher(String),
}
/// The command line, with `--family`'s help naming the families of the default scenario root.
pub(crate) fn parse_cli() -> Cli {
    let mut families: Vec<String> = suite::SCENARIOS
        .iter()
        .filter(|(p, _)| p.ends_with(".yaml") || p.ends_with(".yml"))
        .filter_map(|(p, _)| p.split_once('/').map(|(f, _)| f.to_owned()))
        .collect();
    families.dedup();
    let command = Cli::command().mut_arg("families", |arg| {
        arg.long_help(format!(
            "Only this scenario family (repeatable). A run that leaves families out is PARTIAL, \
             never a certificate. The suite's families: {}",
            if families.is_empty() {
                "(none found under the default scenario root)".to_owned()
            } else {
                families.join(", ")
            }
        ))
    });
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// A `--family` that names no family of the scenario root is a usage error: the run would
/// certify nothing, yet look like a run.
pub(crate) fn check_families(
    asked: &[String],
    scenarios: &std::path::Path,
) -> Result<(), CliError> {
    let known = certify::families(scenarios);
    let unknown: Vec<&String> = asked.iter().filter(|f| !known.contains(f)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "no family {} in {}; its families are: {}",
        unknown
            .iter()
            .map(|f| format!("{f:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        scenarios.display(),
        if known.is_empty() {
            "(none)".to_owned()
        } else {
            known.join(", ")
        }
    )))
}

/// `--out` must be a place the report can be written, found before the first case (not after
/// the whole run): an existing directory, or a path whose nearest existing ancestor is a
/// directory this user may create entries in.
pub(crate) fn check_out(out: &std::path::Path) -> Result<(), CliError> {
    use nix::unistd::{AccessFlags, access};
    let writable =
        |dir: &std::path::Path| access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_ok();
    let bad = |why: String| CliError::Usage(format!("--out {}: {why}", out.display()));
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(out) {
        Ok(m) if !m.is_dir() => return Err(bad("exists and is not a directory".into())),
        // The report replaces it from its parent, or is staged inside it (write.rs).
        Ok(_) if writable(&parent) || writable(out) => return Ok(()),
        Ok(_) => {
            return Err(bad(
                "neither it nor its parent is writable by this user".into()
            ));
        }
        Err(_) => {}
    }
    let mut ancestor = parent.as_path();
    loop {
        match std::fs::metadata(ancestor) {
            Ok(m) if m.is_dir() && writable(ancestor) => return Ok(()),
            Ok(_) => {
                return Err(bad(format!(
                    "{} is not a directory this user can create entries in",
                    ancestor.display()
                )));
            }
            Err(_) => match ancestor.parent() {
                Some(up) if !up.as_os_str().is_empty() => ancestor = up,
                _ => return Ok(()),
            },
        }
    }
}

/// An `--expectations` file that does not exist is a usage error: the run would certify with
/// nothing excused and look like a real run (and replace the previous report).
pub(crate) fn check_expectations_path(cli: &Cli) -> Result<(), CliError> {
    match &cli.expectations {
        Some(path) if !path.is_file() => Err(CliError::Usage(format!(
            "--expectations {}: {}",
            path.display(),
            match std::fs::metadata(path) {
                Ok(_) => "not a file".to_owned(),
                Err(e) => e.to_string(),
            }
        ))),
        _ => Ok(()),
    }
}
