//! A certifying run: the suite and backends it runs, its progress, its summary and its report.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use conformance::certify::{self, CaseResult, Options, Report, Status};
use conformance::suite::Materialised;

use crate::backends::select_backends;
use crate::cli::{Cli, CliError, check_expectations_path, check_families, check_out, parse_cli};
use crate::launcher::provide_launcher;
use crate::signals::stop_on_signals;

/// Certifies the backends the command line names (or every one usable here), writes the report
/// and returns the verdict's exit code.
pub(crate) fn run() -> ExitCode {
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
    // What earlier runs of this user renamed aside and never removed (one killed before its
    // sweep), before the host's places are looked at.
    conformance::world::tidy_dead_runs();
    // Everything that starts processes (the backends' adapters, the cases) runs with the host's
    // shared places private to the run where this host allows: what is left there at the end is
    // the run's (certify::places).
    let (outcome, places) = certify::places::in_run_places(|| {
        let (backends, excluded) = match select_backends(&cli, &embedded.expectations) {
            Ok(selected) => selected,
            Err(e) => {
                eprintln!("certify: {e}");
                return Err(ExitCode::from(certify::exit::USAGE));
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
                return Err(ExitCode::from(certify::exit::USAGE));
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
        Ok(certify::run(options, &progress))
    });
    let mut report = match outcome {
        Ok(report) => report,
        Err(code) => return code,
    };
    places.apply(&mut report);
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
fn summarize(report: &Report) {
    println!();
    for line in certify::markdown(report).lines() {
        if line.starts_with('|') {
            println!("{line}");
        }
    }
    println!();
    for p in report.run_problems() {
        println!("{p}");
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
