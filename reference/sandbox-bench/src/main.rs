//! `sandbox-bench`: what confinement costs per command, as one table from one run.
//!
//! Every row runs `bash -c true` (workspace-write, a workspace under `/var/tmp`) and is compared
//! with its named floor, measured in the same run:
//!
//! - `unconfined`: the payload spawned directly (the floor of the floors);
//! - `trampoline`: a minimal static C Landlock trampoline built by this command with the system
//!   `cc` (create a ruleset, grant the writable roots, `no_new_privs`, restrict, exec): the floor
//!   of every Landlock row;
//! - `landlock-run`: the launcher alone, on the argv the provider gives it; `landlock-run
//!   unguarded` the same without its seccomp guard (`--bench-unguarded`, a flag no profile emits);
//! - `bwrap plain` and `bwrap hardened`: bare bwrap on our profile without and with its isolation
//!   flags (`bwrap hardened` is the floor of every bwrap row); `bwrap guarded` runs the payload
//!   through the launcher as the bwrap backend does, `bwrap unguarded` the same launcher without
//!   its seccomp guard;
//! - `library bwrap` / `library landlock`: the provider's full path (confine, spawn with the
//!   status channel, wait, classify), selection probed once beforehand;
//! - `sandboxctl bwrap|landlock cold|warm`: the CLI, a new process per command, with an empty or a
//!   filled probe cache;
//! - `codex sandbox` and `srt`: the peers, when installed (else the row says why it is absent).
//!
//! Rows are interleaved (every round runs every row, in a new random order) so that machine noise
//! hits them alike; each row reports mean, standard deviation and median, and its ratio to its
//! floor as the mean and standard deviation of the per-round ratios, and the same against the
//! `unconfined` row (so the guard's cost per backend reads off one column). Then the concurrency curve:
//! throughput of 1, 4, 16 and 64 concurrent commands through the library, per backend, against
//! the same payload unconfined through the same spawn path (`library none`, how
//! `danger-full-access` runs), with a bare `std::process::Command` spawn beside it. Last, what a
//! certification costs (`certify` on bwrap and landlock, CPU per case: the median of three whole
//! runs, with the cheapest and the dearest) and, beside it, what one process start costs this
//! host with and without the C library's start-up.
//!
//! `--quick` runs every row a couple of times (the test that keeps this command from rotting);
//! the numbers it prints mean nothing.
//!
//! Modules, one job each:
//!
//! - `rows`: every row of the table and what it runs;
//! - `runner`: how one command runs and what it cost (CPU clock, orphan reaping, subreaper);
//! - `table`: a row's samples and the printed table;
//! - `curve`: the concurrency curve;
//! - `stats`: mean, deviation, median, a target's verdict, the round shuffle;
//! - `trampoline`: the C floor of the Landlock rows, and how the bench builds C with the system `cc`;
//! - `suite_cpu`: certify's CPU per case;
//! - `startup`: one process start's CPU, with and without the C library's start-up;
//! - `host`: scratch places, the project's binaries, the host facts printed first.

mod curve;
mod host;
mod rows;
mod runner;
mod startup;
mod stats;
mod suite_cpu;
mod table;
mod trampoline;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use crate::curve::curve;
use crate::host::{host_facts, load_average, scratch};
use crate::rows::rows;
use crate::runner::set_subreaper;
use crate::stats::shuffle;
use crate::suite_cpu::{TARGET_MS_PER_CASE, certify_costs, median};
use crate::table::{Row, print_table};

/// The benchmark's command line.
#[derive(Parser)]
#[command(
    name = "sandbox-bench",
    about = "Measure what confinement costs per command: one interleaved table against named floors"
)]
pub(crate) struct Args {
    /// Rounds; every round runs every row `--inner` times (peers once), in a new random order.
    #[arg(long, default_value_t = 30)]
    pub(crate) rounds: usize,
    /// Runs of each fast row per round.
    #[arg(long, default_value_t = 5)]
    pub(crate) inner: usize,
    /// Rounds of the concurrency curve.
    #[arg(long, default_value_t = 3)]
    pub(crate) curve_rounds: usize,
    /// Commands per concurrency batch, per worker (at least 16 per batch).
    #[arg(long, default_value_t = 6)]
    pub(crate) per_worker: usize,
    /// A smoke run: two rounds, one run per row, one small batch per level.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Whole certifications measured one after another; the median's CPU per case is the
    /// figure [default: 3; 1 with `--quick`].
    #[arg(long)]
    pub(crate) certify_runs: Option<usize>,
    /// Where the peers' executables are (`codex`, `srt`).
    #[arg(long)]
    pub(crate) peers: Option<PathBuf>,
    /// The launcher (default: `landlock-run` next to this executable).
    #[arg(long)]
    pub(crate) launcher: Option<PathBuf>,
    /// sandboxctl (default: next to this executable).
    #[arg(long)]
    pub(crate) sandboxctl: Option<PathBuf>,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.rounds = 2;
        args.inner = 1;
    }
    let s = match scratch() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sandbox-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let mut notes = Vec::new();
    let mut rows = rows(&args, &s, &mut notes);
    host_facts(&notes);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    // A subreaper, so that a runner's orphans are reaped here and their CPU is counted.
    let subreaper = set_subreaper(true);
    // One untimed run of each: warms caches (the warm CLI rows fill their probe cache here) and
    // turns a broken row into a reason before anything is timed.
    for row in &mut rows {
        if let Ok(runner) = &row.runner
            && let Err(e) = runner.once()
        {
            // A peer that is installed but cannot run here (its own dependencies, this host)
            // is skipped with its words; one of ours failing fails the benchmark.
            row.runner = Err(if row.slow {
                format!("installed but does not run here: {e}")
            } else {
                format!("FAILED: {e}")
            });
        }
    }
    let started = Instant::now();
    for round in 0..args.rounds {
        for i in 0..args.inner {
            let mut order: Vec<usize> = (0..rows.len())
                .filter(|&r| i == 0 || !rows[r].slow)
                .collect();
            shuffle(&mut order, &mut seed);
            for r in order {
                rows[r].run(round);
            }
        }
    }
    println!(
        "{} rounds x {} runs per row (peers 1), interleaved, {:.1} s:\n",
        args.rounds,
        args.inner,
        started.elapsed().as_secs_f64()
    );
    let mut misses = print_table(&rows, args.rounds);
    if !subreaper {
        println!("(not a subreaper: the CPU of a runner's orphans is not counted)");
    }
    set_subreaper(false);
    misses.extend(curve(&args, &s, &mut seed));
    // The unconfined spawn's CPU in this run: a case's price in spawns reads the same on a
    // machine whose CPU seconds drift from run to run.
    let spawn_cpu = rows
        .iter()
        .find(|r| r.name == "unconfined")
        .and_then(Row::mean_cpu);
    // What a process start costs this host: every process a case starts pays it.
    let start = startup::start_cost(&s.base);
    // What a case of the suite costs, beside what a command costs.
    match certify_costs(&args, &s.base) {
        Ok(costs) => {
            let Some(cost) = median(&costs) else {
                println!("\ncertify: FAILED: no run measured");
                return ExitCode::FAILURE;
            };
            let figure = format!(
                "{:.1} s wall, {:.1} s CPU: {:.1} ms of CPU a case",
                cost.wall,
                cost.cpu,
                cost.ms_per_case()
            );
            let runs = match (costs.first(), costs.last()) {
                (Some(low), Some(high)) if costs.len() > 1 => format!(
                    "median of {} runs: {figure} (runs {:.1} to {:.1} ms; target {TARGET_MS_PER_CASE})",
                    costs.len(),
                    low.ms_per_case(),
                    high.ms_per_case()
                ),
                _ => format!("{figure} (target {TARGET_MS_PER_CASE})"),
            };
            println!("\ncertify ({}): {} cases, {runs}", cost.what, cost.cases);
            if let Some(spawn) = spawn_cpu.filter(|c| *c > 0.0) {
                println!(
                    "  = {:.1} unconfined spawns of this run a case (one spawn: {:.2} ms of CPU)",
                    cost.ms_per_case() / (spawn * 1e3),
                    spawn * 1e3
                );
            }
            if let Some(n) = cost.processes_per_case() {
                println!(
                    "  {n:.1} processes and threads started a case (the kernel's count over the run)"
                );
            }
            match &start {
                Ok(start) => println!(
                    "  one process start here: {:.2} ms of CPU with the C library's start-up, {:.2} ms without ({:.2} ms of every start is the C library's own)",
                    start.libc,
                    start.bare,
                    start.libc - start.bare
                ),
                Err(e) => println!("  one process start here: not measured: {e}"),
            }
            if cost.ms_per_case() > TARGET_MS_PER_CASE {
                misses.push(format!(
                    "certify: {:.1} ms of CPU a case (target {TARGET_MS_PER_CASE})",
                    cost.ms_per_case()
                ));
            }
        }
        Err(e) => {
            println!("\ncertify: FAILED: {e}");
            return ExitCode::FAILURE;
        }
    }
    println!("\nload average at the end: {}", load_average());
    if misses.is_empty() {
        println!("every target met");
    } else {
        for m in &misses {
            println!("target missed: {m}");
        }
    }
    let failed = rows
        .iter()
        .filter_map(|r| r.runner.as_ref().err())
        .any(|e| e.starts_with("FAILED"));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
