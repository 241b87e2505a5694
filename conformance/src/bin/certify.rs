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

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use conformance::backends::{Backend, REFERENCE_BACKENDS, reference_backend};
use conformance::certify::{self, CaseResult, Options, Report, Status};
use conformance::expectations::{self, ExpectationFile};
use conformance::external::External;
use conformance::load::LoadError;
use conformance::suite::{self, Materialised};

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
struct Cli {
    /// Certify this reference backend (repeatable; default: every backend usable on this host).
    #[arg(long = "backend")]
    backends: Vec<String>,
    /// Only this scenario family (repeatable; `--help` lists the suite's families).
    #[arg(long = "family")]
    families: Vec<String>,
    /// Where to write report.json, junit.xml and matrix.md.
    #[arg(long, default_value = "certify-report")]
    out: PathBuf,
    /// Cases run at once (default: twice the cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// The longest one case may take, in seconds.
    #[arg(long, default_value_t = 60)]
    case_timeout: u64,
    /// The longest an external backend may take to answer one request, in seconds (its start
    /// and handshake get at least 30 s).
    #[arg(long, default_value_t = 10)]
    protocol_timeout: u64,
    /// The external backend's expectation file (reference backends use fixtures/expectations/).
    #[arg(long)]
    expectations: Option<PathBuf>,
    /// The scenario root (default: the suite compiled into this binary).
    #[arg(long)]
    scenarios: Option<PathBuf>,
    /// Certify an operator runner: a bwrap-compatible runner command, used unprobed.
    #[arg(long)]
    runner_command: Option<PathBuf>,
    /// A runner-failure signature of the operator runner (repeatable; at least one).
    #[arg(long = "runner-failure-signature")]
    runner_failure_signatures: Vec<String>,
    /// Replay the run drawn from this seed (places and names of every case); default: the
    /// `CONFORMANCE_SEED` environment variable, else a fresh seed, printed.
    #[arg(long)]
    seed: Option<u64>,
    /// An external backend command speaking the JSON-lines protocol.
    #[arg(last = true)]
    command: Vec<OsString>,
}

type Planned = Vec<(Backend, Result<Option<ExpectationFile>, LoadError>)>;

/// Why certify cannot start the run it was asked for (exit 2, the message on stderr).
#[derive(Debug, thiserror::Error)]
enum CliError {
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

/// Turns the first SIGINT, SIGTERM or SIGHUP into `stop` (the run winds down and cleans up);
/// a second one removes the worlds done so far and exits at once. The signals are blocked here,
/// before any thread starts, so every thread inherits the mask and one waits for them (a child
/// process starts with an empty mask: the standard library resets it).
fn stop_on_signals(stop: Arc<AtomicBool>) {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    if let Err(e) = set.thread_block() {
        eprintln!("certify: cannot wait for signals ({e}): Ctrl-C stops the run uncleaned");
        return;
    }
    std::thread::spawn(move || {
        while let Ok(signal) = set.wait() {
            if stop.swap(true, Ordering::SeqCst) {
                conformance::world::sweep_so_far();
                eprintln!("certify: {signal} again: stopped at once");
                std::process::exit(i32::from(certify::exit::STOPPED));
            }
            eprintln!(
                "certify: {signal}: starting no more cases; the ones under way end and the run's \
                 worlds are removed (again to stop at once)"
            );
        }
    });
}

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
fn merge_main(args: impl Iterator<Item = OsString>) -> ExitCode {
    let cli = MergeCli::parse_from(std::iter::once(OsString::from("certify merge")).chain(args));
    let merged =
        match conformance::merge::merge(&cli.reports, cli.allow_mixed_versions, &cli.expect) {
            Ok(merged) => merged,
            Err(e) => {
                eprintln!("certify merge: {e}");
                return ExitCode::from(certify::exit::USAGE);
            }
        };
    if let Err(e) = conformance::merge::write(&merged, &cli.out) {
        eprintln!("certify merge: cannot write to {}: {e}", cli.out.display());
        return ExitCode::from(certify::exit::USAGE);
    }
    print!("{}", conformance::merge::markdown(&merged));
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
fn diff_main(args: impl Iterator<Item = OsString>) -> ExitCode {
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
    // Nothing the run starts outlives it: certify runs below a supervisor that reaps orphans and
    // kills what is left when certify ends.
    if let Some(status) = conformance::reaper::supervise("certify") {
        return status;
    }
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(stop.clone());
    let cli = parse_cli();
    // Kept alive for the whole run: removed (with what is in them) when main returns.
    let _launcher_dir = provide_launcher();
    let embedded = match SuiteDirs::of(&cli) {
        Ok(dirs) => dirs,
        Err(e) => {
            eprintln!("certify: {e}");
            return ExitCode::from(certify::exit::USAGE);
        }
    };
    let scenarios = embedded.scenarios.clone();
    if let Err(e) = check_families(&cli.families, &scenarios) {
        eprintln!("certify: {e}");
        return ExitCode::from(certify::exit::USAGE);
    }
    if let Err(e) = check_out(&cli.out).and_then(|()| check_expectations_path(&cli)) {
        eprintln!("certify: {e}");
        return ExitCode::from(2);
    }
    for missing in conformance::prerequisites::missing() {
        eprintln!(
            "certify: this host lacks {} (needed by {}): those cases are the harness's ERROR, not a backend's failure",
            missing.program, missing.needed_by
        );
    }
    let (backends, excluded) = match select_backends(&cli, &embedded.expectations) {
        Ok(selected) => selected,
        Err(e) => {
            eprintln!("certify: {e}");
            return ExitCode::from(certify::exit::USAGE);
        }
    };
    let names: Vec<String> = backends.iter().map(|(b, _)| b.name.clone()).collect();
    eprintln!("certify: backends {}", names.join(", "));
    for (name, reason) in &excluded {
        eprintln!("certify: not certifying {name} here: {reason}");
    }
    let jobs = cli
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get() * 2));
    let seed = match cli
        .seed
        .map(Ok)
        .unwrap_or_else(conformance::world::run_seed)
    {
        Ok(seed) => seed,
        Err(e) => {
            eprintln!("certify: {e}");
            return ExitCode::from(certify::exit::USAGE);
        }
    };
    eprintln!("certify: seed {seed} (certify --seed {seed} replays this run)");
    let places = conformance::world::places();
    for (path, why) in &places.left_out {
        eprintln!("certify: no worlds under {}: {why}", path.display());
    }
    let options = Options {
        seed,
        scenarios,
        backends,
        families: cli.families.clone(),
        jobs,
        case_timeout: Duration::from_secs(cli.case_timeout),
        excluded,
        stop: stop.clone(),
    };
    let last_shown = Mutex::new(0usize);
    let tty = std::io::stderr().is_terminal();
    let progress = move |done: usize, total: usize, result: &CaseResult| {
        if result.status.is_bad() && !tty {
            eprintln!("certify: {} {}", result.status.code(), result.trial);
        }
        let Ok(mut last) = last_shown.lock() else {
            return;
        };
        let step = (total / 10).max(1);
        if tty {
            eprint!("\rcertify: {done}/{total} cases");
            if done == total {
                eprintln!();
            }
        } else if done == total || done >= *last + step {
            *last = done;
            eprintln!("certify: {done}/{total} cases");
        }
        let _ = std::io::stderr().flush();
    };
    let report = certify::run(options, &progress);
    if stop.load(Ordering::SeqCst) {
        eprintln!(
            "certify: stopped after {} cases; the run's worlds are removed; no report written",
            report.cases.len()
        );
        return ExitCode::from(certify::exit::STOPPED);
    }
    summarize(&report);
    if let Err(e) = certify::write(&report, &cli.out) {
        eprintln!(
            "certify: cannot write the report to {}: {e}",
            cli.out.display()
        );
        return ExitCode::from(certify::exit::USAGE);
    }
    println!(
        "report: {0}/report.json, {0}/junit.xml, {0}/matrix.md",
        cli.out.display()
    );
    if report.certified() {
        println!("CERTIFIED in {:.1} s", report.wall_seconds);
        ExitCode::from(certify::exit::CERTIFIED)
    } else if report.passed() {
        println!(
            "PARTIAL ({:.1} s): everything run passed, but the families {} were left out; no certificate",
            report.wall_seconds,
            report.left_out_families.join(", ")
        );
        ExitCode::from(certify::exit::PARTIAL)
    } else {
        println!("NOT CERTIFIED ({:.1} s)", report.wall_seconds);
        ExitCode::from(certify::exit::NOT_CERTIFIED)
    }
}

/// The command line, with `--family`'s help naming the families of the default scenario root.
fn parse_cli() -> Cli {
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
fn check_families(asked: &[String], scenarios: &std::path::Path) -> Result<(), CliError> {
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
fn check_out(out: &std::path::Path) -> Result<(), CliError> {
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
fn check_expectations_path(cli: &Cli) -> Result<(), CliError> {
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

/// The backends of this run, and the reference backends left out because they cannot run here.
fn select_backends(
    cli: &Cli,
    expectations: &std::path::Path,
) -> Result<(Planned, Vec<(String, String)>), CliError> {
    let dir = expectations.to_path_buf();
    if let Some(runner) = &cli.runner_command {
        if !cli.command.is_empty() || !cli.backends.is_empty() {
            return Err(CliError::Usage(
                "--runner-command certifies that runner alone".into(),
            ));
        }
        let runner = sandbox_local::OperatorRunner::new(
            vec![runner.clone().into()],
            &cli.runner_failure_signatures,
        )
        .map_err(|e| CliError::Usage(format!("--runner-command: {e}")))?;
        let expected = match &cli.expectations {
            None => Ok(None),
            Some(path) => expectations::load_path(path, path.clone(), "operator"),
        };
        return Ok((
            vec![(Backend::operator_runner(runner), expected)],
            Vec::new(),
        ));
    }
    if !cli.runner_failure_signatures.is_empty() {
        return Err(CliError::Usage(
            "--runner-failure-signature needs --runner-command".into(),
        ));
    }
    if !cli.command.is_empty() {
        if !cli.backends.is_empty() {
            return Err(CliError::Usage(
                "give either --backend or an external command, not both".into(),
            ));
        }
        let timeout = Duration::from_secs(cli.protocol_timeout);
        let backend = match External::start(&cli.command, timeout) {
            Ok(external) => {
                let name = external.implementation.name.clone();
                if name.is_empty()
                    || !name.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                    })
                {
                    return Err(CliError::Usage(format!(
                        "the backend calls itself {name:?}; names are lowercase letters, digits, '-' and '_'"
                    )));
                }
                Backend::from_external(external)
            }
            Err(failure) => Backend::external_failed("external", &failure.to_string()),
        };
        let expected = match &cli.expectations {
            None => Ok(None),
            Some(path) => expectations::load_path(path, path.clone(), &backend.name),
        };
        return Ok((vec![(backend, expected)], Vec::new()));
    }
    let explicit = !cli.backends.is_empty();
    let names: Vec<String> = if explicit {
        cli.backends.clone()
    } else {
        REFERENCE_BACKENDS
            .iter()
            .filter(|n| **n != "operator")
            .map(|n| (*n).to_owned())
            .collect()
    };
    // A required backend that is unusable here is certified anyway, so it fails loudly.
    let required = conformance::harness::required_backends();
    let mut planned = Vec::new();
    let mut excluded = Vec::new();
    for name in names {
        let backend = reference_backend(&name).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown backend {name:?}; reference backends are {}",
                REFERENCE_BACKENDS.join(", ")
            ))
        })?;
        if !explicit
            && !required.contains(&name)
            && !backend.confines_nothing()
            && let Some(reason) = &backend.unusable
        {
            excluded.push((name, reason.clone()));
            continue;
        }
        let expected = expectations::load(&dir, &backend.name);
        planned.push((backend, expected));
    }
    Ok((planned, excluded))
}

fn summarize(report: &Report) {
    println!();
    for line in certify::markdown(report).lines() {
        if line.starts_with('|') {
            println!("{line}");
        }
    }
    println!();
    for b in &report.backends {
        for p in &b.problems {
            println!("{}: {p}", b.name);
        }
    }
    for p in &report.suite_problems {
        println!("suite: {p}");
    }
    let bad: Vec<&CaseResult> = report.cases.iter().filter(|c| c.status.is_bad()).collect();
    for c in bad.iter().take(20) {
        // The whole message: a backend's own words (a panic's reason) are often at its end.
        println!(
            "{} {}: {}",
            c.status.code(),
            c.trial,
            c.message.as_deref().unwrap_or("")
        );
    }
    if bad.len() > 20 {
        println!("... and {} more failed cases in the report", bad.len() - 20);
    }
    let skipped = report
        .cases
        .iter()
        .filter(|c| c.status == Status::Skip)
        .count();
    println!(
        "{} cases, {} skipped, wall {:.1} s; slowest families: {}",
        report.cases.len(),
        skipped,
        report.wall_seconds,
        report
            .family_seconds
            .iter()
            .take(3)
            .map(|(f, s)| format!("{f} {s:.1} s"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The scenario root and the reference expectations of this run, and the private copy of the
/// embedded suite they may live in.
struct SuiteDirs {
    scenarios: PathBuf,
    expectations: PathBuf,
    _copy: Option<Materialised>,
}

impl SuiteDirs {
    /// `--scenarios` or `CONFORMANCE_SCENARIOS`, else the embedded scenarios; the reference
    /// expectations from `CONFORMANCE_EXPECTATIONS`, else the embedded ones. When the embedded
    /// suite cannot be written out (no usable cache directory), a usage error says how to give
    /// it one.
    fn of(cli: &Cli) -> Result<SuiteDirs, CliError> {
        let env = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let scenarios = cli
            .scenarios
            .clone()
            .or_else(|| env("CONFORMANCE_SCENARIOS"));
        let expectations = env("CONFORMANCE_EXPECTATIONS");
        if let (Some(scenarios), Some(expectations)) = (&scenarios, &expectations) {
            return Ok(SuiteDirs {
                scenarios: scenarios.clone(),
                expectations: expectations.clone(),
                _copy: None,
            });
        }
        match Materialised::new() {
            Ok(copy) => Ok(SuiteDirs {
                scenarios: scenarios.unwrap_or_else(|| copy.scenarios()),
                expectations: expectations.unwrap_or_else(|| copy.expectations()),
                _copy: Some(copy),
            }),
            // Never the clone's scenarios instead: they may not be the suite this certify
            // carries (and names in its report).
            Err(e) => Err(CliError::Suite(format!(
                "{e}. certify writes the suite compiled into it to a private directory under \
                 $XDG_CACHE_HOME (or ~/.cache) for the run: point XDG_CACHE_HOME at a directory \
                 you own outside /tmp, /dev/shm and $TMPDIR (none a confined call may write), or name the \
                 suite with --scenarios DIR and CONFORMANCE_EXPECTATIONS=DIR"
            ))),
        }
    }
}

/// Makes `landlock-run`, `sandboxctl` and `sandbox-agent` findable when they are not (an
/// installed or copied `certify` alone): this binary, hard-linked (or copied) under each missing
/// name into one private directory (see [`suite::private_dir`]: outside every temp root a
/// confined call may write), is what the lookups then find. A link keeps the name, which the launcher's path needs (it is
/// canonicalised and bound into bwrap). Failing that, it says why; the backends that need the
/// launcher are then unusable (a skip with the reason, or a failure when required).
fn provide_launcher() -> Option<tempfile::TempDir> {
    let mut missing: Vec<&str> = Vec::new();
    if sandbox_local::probe::locate_launcher().is_err() {
        missing.push(LAUNCHER);
    }
    for (program, package) in [(SANDBOXCTL, "sandbox-cli"), (AGENT, "sandbox-agent")] {
        if sandbox_local::probe::locate_sibling(program, package).is_err() {
            missing.push(program);
        }
    }
    if missing.is_empty() {
        return None;
    }
    let link = || -> Result<tempfile::TempDir, CliError> {
        let exe = std::env::current_exe()
            .map_err(|e| CliError::Launcher(format!("cannot locate certify: {e}")))?;
        let dir = suite::private_dir("bin").map_err(|e| CliError::Launcher(e.to_string()))?;
        for program in &missing {
            link_as(&exe, &dir.path().join(program))?;
        }
        Ok(dir)
    };
    match link() {
        Ok(dir) => {
            sandbox_local::probe::set_sibling_dir(dir.path().to_path_buf());
            Some(dir)
        }
        Err(e) => {
            eprintln!(
                "certify: no {} next to certify or on PATH, and cannot provide one: {e}",
                missing.join(", ")
            );
            None
        }
    }
}

/// This binary under another name at `target`: a hard link, or a copy made executable.
fn link_as(exe: &std::path::Path, target: &std::path::Path) -> Result<(), CliError> {
    if std::fs::hard_link(exe, target).is_ok() {
        return Ok(());
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::copy(exe, target)
        .and_then(|_| std::fs::set_permissions(target, std::fs::Permissions::from_mode(0o755)))
        .map_err(|e| {
            CliError::Launcher(format!(
                "cannot copy {} to {}: {e}",
                exe.display(),
                target.display()
            ))
        })
}
