//! What a certification costs: `certify`'s CPU per case, measured in the same run as the
//! per-command rows, so a case's price is read beside a command's.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::Args;
use crate::host::sibling;
use crate::runner::cpu_seconds;

/// The CPU a certification may cost per case, in milliseconds (issue 32: half what it cost).
pub(crate) const TARGET_MS_PER_CASE: f64 = 12.0;

/// One measured certification.
pub(crate) struct SuiteCost {
    /// What ran: the backends and the families (`every family` for the whole suite).
    pub(crate) what: String,
    /// Cases in its report.
    pub(crate) cases: usize,
    /// Wall seconds.
    pub(crate) wall: f64,
    /// User and system CPU seconds of certify and everything it waited for.
    pub(crate) cpu: f64,
    /// Processes and threads the kernel started while it ran (`processes` in `/proc/stat`: every
    /// fork and clone of the machine, so the host's own few are counted too); `None` where
    /// unreadable.
    pub(crate) processes: Option<u64>,
}

impl SuiteCost {
    /// CPU milliseconds a case.
    pub(crate) fn ms_per_case(&self) -> f64 {
        self.cpu * 1e3 / self.cases.max(1) as f64
    }

    /// Processes and threads started a case: the suite's and the backends' starts, each of which
    /// a host's start cost multiplies (`None` where the kernel's count is unreadable).
    pub(crate) fn processes_per_case(&self) -> Option<f64> {
        self.processes.map(|n| n as f64 / self.cases.max(1) as f64)
    }
}

/// `certify`'s cost over `--certify-runs` runs (3, or 1 with `--quick`), one after another: each
/// run's, cheapest first. A shared virtual machine's CPU seconds for the same work drift by a
/// tenth from one run to the next (docs/speed.md), so one run is one draw; the median is the
/// figure.
pub(crate) fn certify_costs(args: &Args, base: &Path) -> Result<Vec<SuiteCost>, String> {
    let runs = args.certify_runs.unwrap_or(if args.quick { 1 } else { 3 });
    let mut costs = (0..runs.max(1))
        .map(|run| certify_cost(args, &base.join(format!("certify-{run}"))))
        .collect::<Result<Vec<_>, _>>()?;
    costs.sort_by(|a, b| a.ms_per_case().total_cmp(&b.ms_per_case()));
    Ok(costs)
}

/// The median of `costs` (sorted, cheapest first); of an even number, the dearer of the two in
/// the middle, so the figure never flatters.
pub(crate) fn median(costs: &[SuiteCost]) -> Option<&SuiteCost> {
    costs.get(costs.len() / 2)
}

/// Runs `certify` (next to this executable) on bwrap and landlock, the whole suite (the
/// containment family alone with `--quick`), writing its reports under `out`.
fn certify_cost(args: &Args, out: &Path) -> Result<SuiteCost, String> {
    let certify = sibling("certify", "conformance")?;
    let mut command = Command::new(&certify);
    command.args(["--backend", "bwrap", "--backend", "landlock", "--out"]);
    command.arg(out);
    let what = if args.quick {
        command.args(["--family", "containment"]);
        "bwrap and landlock, the containment family"
    } else {
        "bwrap and landlock, every family"
    };
    let (cpu_before, forks_before, started) = (cpu_seconds(), processes_started(), Instant::now());
    let ran = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", certify.display()))?;
    let (cpu, wall) = (cpu_seconds() - cpu_before, started.elapsed().as_secs_f64());
    let processes = forks_before
        .zip(processes_started())
        .map(|(before, after)| after.saturating_sub(before));
    // 0: certified; 3: PARTIAL (families left out). Anything else is a broken run, not a cost.
    if !matches!(ran.status.code(), Some(0 | 3)) {
        return Err(format!(
            "certify ended with {}: {}",
            ran.status,
            String::from_utf8_lossy(&ran.stdout)
                .lines()
                .last()
                .unwrap_or_default()
        ));
    }
    let report = std::fs::read_to_string(out.join("report.json"))
        .map_err(|e| format!("no report.json: {e}"))?;
    let report: serde_json::Value =
        serde_json::from_str(&report).map_err(|e| format!("report.json: {e}"))?;
    let cases = report["cases"].as_array().map_or(0, Vec::len);
    Ok(SuiteCost {
        what: what.to_owned(),
        cases,
        wall,
        cpu,
        processes,
    })
}

/// How many processes (and threads) the kernel has started since boot: the `processes` line of
/// `/proc/stat`.
fn processes_started() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("processes "))?
        .trim()
        .parse()
        .ok()
}
