//! One row of the table with its samples, and the table printed from them (each row against its
//! floor and against the unconfined spawn of the same rounds).

use crate::runner::{Runner, cpu_seconds, reap_orphans};
use crate::stats::{stats, verdict};

/// One row of the table.
pub(crate) struct Row {
    pub(crate) name: &'static str,
    /// The row it is compared with (its own name for a floor).
    floor: &'static str,
    /// The target ratio, when the issue sets one.
    target: Option<f64>,
    /// Peers are slow: they run once per round.
    pub(crate) slow: bool,
    pub(crate) runner: Result<Runner, String>,
    /// Seconds, in run order, with the round of each.
    samples: Vec<(usize, f64)>,
    /// CPU seconds per command (this process and every waited-for descendant), same order.
    cpu: Vec<f64>,
}

impl Row {
    pub(crate) fn new(
        name: &'static str,
        floor: &'static str,
        runner: Result<Runner, String>,
    ) -> Row {
        Row {
            name,
            floor,
            target: None,
            slow: false,
            runner,
            samples: Vec::new(),
            cpu: Vec::new(),
        }
    }

    /// Mean CPU seconds per command, once it ran.
    pub(crate) fn mean_cpu(&self) -> Option<f64> {
        (!self.cpu.is_empty()).then(|| stats(&self.cpu).0)
    }

    pub(crate) fn target(mut self, t: f64) -> Row {
        self.target = Some(t);
        self
    }

    pub(crate) fn slow(mut self) -> Row {
        self.slow = true;
        self
    }

    pub(crate) fn run(&mut self, round: usize) {
        let Ok(runner) = &self.runner else { return };
        runner.before();
        let cpu = cpu_seconds();
        let result = runner.once();
        // Orphans (bwrap's sandbox init) came to us: reap them so their CPU is counted.
        reap_orphans();
        match result {
            Ok(took) => {
                self.cpu.push(cpu_seconds() - cpu);
                self.samples.push((round, took.as_secs_f64()));
            }
            Err(e) => self.runner = Err(format!("FAILED: {e}")),
        }
    }
}

/// The per-round ratios of `row` to `floor` (mean of each round's samples).
fn round_ratios(row: &Row, floor: &Row, rounds: usize) -> Vec<f64> {
    let mean_in = |r: &Row, round| {
        let xs: Vec<f64> = r
            .samples
            .iter()
            .filter(|(n, _)| *n == round)
            .map(|(_, x)| *x)
            .collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    };
    (0..rounds)
        .filter_map(|round| Some(mean_in(row, round)? / mean_in(floor, round)?))
        .collect()
}

/// Prints the table; the rows that missed their target, in words.
pub(crate) fn print_table(rows: &[Row], rounds: usize) -> Vec<String> {
    let mut misses = Vec::new();
    println!(
        "| row | floor | mean ms | sd ms | median ms | x floor (per-round mean ± sd) | x floor (medians) | CPU ms | CPU x floor | target (on the mean) | x unconfined (per-round mean ± sd) | CPU x unconfined |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|");
    let unconfined = rows.iter().find(|r| r.name == "unconfined");
    for row in rows {
        if let Err(why) = &row.runner
            && row.samples.is_empty()
        {
            println!(
                "| {} | {} | - | - | - | - | - | - | - | skipped: {why} | - | - |",
                row.name, row.floor
            );
            continue;
        }
        let xs: Vec<f64> = row.samples.iter().map(|(_, x)| x * 1e3).collect();
        let (mean, sd, median) = stats(&xs);
        let floor = rows.iter().find(|r| r.name == row.floor);
        let ratios = floor
            .map(|f| round_ratios(row, f, rounds))
            .unwrap_or_default();
        let (rmean, rsd, _) = stats(&ratios);
        let (cpu, _, _) = stats(&row.cpu);
        let floor_stats = floor.map(|f| {
            let xs: Vec<f64> = f.samples.iter().map(|(_, x)| x * 1e3).collect();
            (stats(&xs).2, stats(&f.cpu).0)
        });
        let (median_ratio, cpu_ratio) =
            floor_stats.map_or((f64::NAN, f64::NAN), |(m, c)| (median / m, cpu / c));
        let ratio = if ratios.is_empty() {
            "no floor".to_owned()
        } else {
            format!("{rmean:.2} ± {rsd:.2}")
        };
        let mut target = row.target.map_or(String::new(), |t| {
            let v = verdict(rmean, t, true);
            if v.contains("MISSED") {
                misses.push(format!("{}: {v}", row.name));
            }
            v
        });
        if let Err(why) = &row.runner {
            target = format!("{target} {why}");
        }
        // Every row against the unconfined spawn of the same rounds, whatever its own floor.
        let (base, base_cpu) = unconfined.map_or((String::from("-"), f64::NAN), |u| {
            let (m, sd, _) = stats(&round_ratios(row, u, rounds));
            (format!("{m:.2} ± {sd:.2}"), cpu / stats(&u.cpu).0)
        });
        println!(
            "| {} | {} | {mean:.2} | {sd:.2} | {median:.2} | {ratio} | {median_ratio:.2} | {:.2} | {cpu_ratio:.2} | {} | {base} | {base_cpu:.2} |",
            row.name,
            row.floor,
            cpu * 1e3,
            target.trim()
        );
    }
    misses
}
