//! `report.html`: one self-contained page a person opens from disk (no network, no build step):
//! the family x backend grid (x host after a merge), each cell coloured by its worst outcome and
//! opening its cases (id, level, title, message, the expectation's reason, the `--seed` replay
//! command), with filters for failing cases and cases that differ between hosts. Plain string
//! building with every text escaped ([`escape`]); the CSS and the few lines of script are
//! inline, and a Content-Security-Policy forbids the page any other source.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::matrix::tally;
use super::{BackendReport, CaseResult, Report, Status};

/// One host's report under its label (a leg's name, or the only host of a run).
pub type Host<'a> = (&'a str, &'a Report);

/// The page for the reports of `hosts` (one for a run, several after a merge), titled `title`.
pub fn html(title: &str, hosts: &[Host<'_>]) -> String {
    let grid = Grid::new(hosts);
    let mut out = String::with_capacity(64 * 1024);
    head(&mut out, title);
    summary(&mut out, hosts, &grid);
    grid.table(&mut out);
    grid.details(&mut out);
    out.push_str(SCRIPT);
    out.push_str("</body>\n</html>\n");
    out
}

/// `text` safe in HTML text and in a double-quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Only inline styles and scripts, nothing fetched: the page works offline by construction.
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

const STYLE: &str = r#"body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table.grid{border-collapse:collapse;margin:1em 0}
.grid th,.grid td{border:1px solid #bbb;padding:.3em .6em;text-align:left;vertical-align:top}
.grid td.cell{cursor:pointer}
.grid td.cell:hover{outline:2px solid #333}
.grid td.open{outline:3px solid #06c}
ul.problems{color:#a00}
.o-pass{background:#d4f4d4}.o-xfail{background:#fff1c2}.o-skip{background:#e8e8e8}
.o-bad{background:#f8c8c8;font-weight:bold}.o-none{background:#fff;color:#999}
section.cases{border:1px solid #06c;padding:.5em 1em;margin:1em 0}
section.cases li{margin:.4em 0}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.4em;margin:.2em 0}
code.replay{background:#eef;padding:.1em .3em}
.s-PASS{color:#060}.s-XFAIL{color:#a60}.s-SKIP{color:#666}
.s-FAIL,.s-XPASS,.s-ERROR,.s-TIMEOUT,.s-INCONSISTENT{color:#b00}
body.failing tr[data-bad="0"],body.failing li[data-bad="0"]{display:none}
body.differs tr[data-differs="0"],body.differs li[data-differs="0"]{display:none}
"#;

/// Opens a cell's cases on a click (and the cell named by `#open=ID` on load, which is how a
/// link or a test opens one), and applies the filters (`#failing`, `#differs` on load).
const SCRIPT: &str = r#"<script>
(function () {
  function open(cell) {
    document.querySelectorAll('section.cases').forEach(function (s) { s.hidden = true; });
    document.querySelectorAll('td.open').forEach(function (c) { c.classList.remove('open'); });
    var section = document.getElementById('d_' + cell.id);
    if (section) { section.hidden = false; cell.classList.add('open'); }
  }
  document.querySelectorAll('td.cell').forEach(function (cell) {
    cell.addEventListener('click', function () { open(cell); });
  });
  ['failing', 'differs'].forEach(function (name) {
    var box = document.getElementById('f_' + name);
    if (!box) { return; }
    box.addEventListener('change', function () { document.body.classList.toggle(name, box.checked); });
  });
  var hash = decodeURIComponent(location.hash.slice(1));
  hash.split('&').forEach(function (part) {
    var box = document.getElementById('f_' + part);
    if (box) { box.checked = true; box.dispatchEvent(new Event('change')); }
    if (part.indexOf('open=') === 0) {
      var cell = document.getElementById(part.slice(5));
      if (cell) { cell.click(); }
    }
  });
})();
</script>
"#;

fn head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(title),
        escape(title)
    );
}

/// Each host's verdict and facts, the run's totals, and the filters.
fn summary(out: &mut String, hosts: &[Host<'_>], grid: &Grid<'_>) {
    out.push_str("<ul class=\"hosts\">\n");
    for (label, r) in hosts {
        let h = &r.host;
        let _ = writeln!(
            out,
            "<li><b>{}</b>: <span class=\"verdict\">{}</span>; {} {}, uid {}, Landlock ABI {}, bwrap {}; \
             suite {} ({}), commit {}; seed {} ({} cases, {:.1} s)",
            escape(label),
            escape(r.verdict.as_str()),
            escape(&h.os),
            escape(h.kernel.as_deref().unwrap_or("?")),
            h.uid.map_or("?".into(), |u| u.to_string()),
            h.landlock_abi.map_or("none".into(), |a| a.to_string()),
            match h.bwrap_usable {
                Some(true) => "usable",
                Some(false) => "not usable",
                None => "not probed",
            },
            escape(&r.suite_version),
            escape(r.suite_hash.as_deref().unwrap_or("scenario set unknown")),
            escape(r.commit.as_deref().unwrap_or("unknown")),
            r.seed,
            r.cases.len(),
            r.wall_seconds,
        );
        // What fails the run apart from its cases: a verdict with every cell green says why.
        let problems = r.run_problems();
        if !problems.is_empty() {
            out.push_str("<ul class=\"problems\">\n");
            for p in &problems {
                let _ = writeln!(out, "<li>{}</li>", escape(p));
            }
            out.push_str("</ul>");
        }
        out.push_str("</li>\n");
    }
    out.push_str("</ul>\n");
    let all = hosts
        .iter()
        .flat_map(|(_, r)| r.cases.iter().map(|c| c.status));
    let _ = writeln!(
        out,
        "<p class=\"totals\">All cases: <span id=\"totals\">{}</span></p>",
        escape(&tally(all))
    );
    out.push_str("<p><label><input type=\"checkbox\" id=\"f_failing\"> failing only</label>\n");
    if hosts.len() > 1 {
        let _ = writeln!(
            out,
            "<label><input type=\"checkbox\" id=\"f_differs\"> differs between hosts ({} cases)</label>",
            grid.differing.len()
        );
    }
    out.push_str("</p>\n<p>Click a cell to open its cases.</p>\n");
}

/// A column of the grid: one backend on one host.
struct Column<'a> {
    host: &'a str,
    report: &'a Report,
    backend: &'a BackendReport,
}

/// The grid's columns and rows, and the trials whose status differs between hosts.
struct Grid<'a> {
    columns: Vec<Column<'a>>,
    families: Vec<&'a str>,
    differing: BTreeSet<&'a str>,
    hosts: usize,
}

impl<'a> Grid<'a> {
    fn new(hosts: &[Host<'a>]) -> Grid<'a> {
        let columns = hosts
            .iter()
            .flat_map(|(host, report)| {
                report.backends.iter().map(move |backend| Column {
                    host,
                    report,
                    backend,
                })
            })
            .collect();
        let families: BTreeSet<&str> = hosts
            .iter()
            .flat_map(|(_, r)| r.cases.iter().map(|c| c.family.as_str()))
            .filter(|f| !f.is_empty())
            .collect();
        let mut seen: BTreeMap<&str, BTreeSet<Status>> = BTreeMap::new();
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, r) in hosts {
            for c in &r.cases {
                seen.entry(&c.trial).or_default().insert(c.status);
                *count.entry(&c.trial).or_default() += 1;
            }
        }
        let differing = seen
            .into_iter()
            .filter(|(trial, statuses)| statuses.len() > 1 && count[trial] > 1)
            .map(|(trial, _)| trial)
            .collect();
        Grid {
            columns,
            families: families.into_iter().collect(),
            differing,
            hosts: hosts.len(),
        }
    }

    /// The cases of column `col` in `family`.
    fn cases(
        &self,
        col: usize,
        family: &str,
    ) -> impl Iterator<Item = &'a CaseResult> + use<'a, '_> {
        let column = &self.columns[col];
        let name = column.backend.name.as_str();
        let family = family.to_owned();
        column
            .report
            .cases
            .iter()
            .filter(move |c| c.family == family && c.backend == name)
    }

    fn table(&self, out: &mut String) {
        out.push_str("<table class=\"grid\">\n<thead>\n");
        if self.hosts > 1 {
            out.push_str("<tr><th>host</th>");
            let mut i = 0;
            while i < self.columns.len() {
                let host = self.columns[i].host;
                let span = self.columns[i..]
                    .iter()
                    .take_while(|c| c.host == host)
                    .count();
                let _ = write!(out, "<th colspan=\"{span}\">{}</th>", escape(host));
                i += span;
            }
            out.push_str("</tr>\n");
        }
        out.push_str("<tr><th>family</th>");
        for c in &self.columns {
            let _ = write!(out, "<th>{}</th>", escape(&c.backend.name));
        }
        out.push_str("</tr>\n</thead>\n<tbody>\n");
        for (row, family) in self.families.iter().enumerate() {
            self.row(out, row, family);
        }
        self.footer(out);
        out.push_str("</tbody>\n</table>\n");
    }

    fn row(&self, out: &mut String, row: usize, family: &str) {
        let all: Vec<&CaseResult> = (0..self.columns.len())
            .flat_map(|col| self.cases(col, family))
            .collect();
        let _ = write!(
            out,
            "<tr data-bad=\"{}\" data-differs=\"{}\"><th>{}</th>",
            u8::from(all.iter().any(|c| c.status.is_bad())),
            u8::from(
                all.iter()
                    .any(|c| self.differing.contains(c.trial.as_str()))
            ),
            escape(family)
        );
        for col in 0..self.columns.len() {
            let cases: Vec<&CaseResult> = self.cases(col, family).collect();
            let outcome = outcome(cases.iter().map(|c| c.status));
            let _ = write!(
                out,
                "<td id=\"c{col}_{row}\" class=\"cell o-{outcome}\" title=\"{} cases\">{}</td>",
                cases.len(),
                escape(&tally(cases.iter().map(|c| c.status)))
            );
        }
        out.push_str("</tr>\n");
    }

    /// Each column's enforcement per class and verdict, under the family rows.
    fn footer(&self, out: &mut String) {
        let mut line = |head: &str, cells: Vec<String>| {
            let _ = write!(out, "<tr data-bad=\"1\" data-differs=\"1\"><th>{head}</th>");
            for cell in cells {
                let _ = write!(out, "<td>{}</td>", escape(&cell));
            }
            out.push_str("</tr>\n");
        };
        for class in sandbox::EnforcementClass::ALL {
            let cells = self
                .columns
                .iter()
                .map(|c| super::matrix::class_word(c.backend, class))
                .collect();
            line(&escape(class.as_str()), cells);
        }
        let verdicts = self
            .columns
            .iter()
            .map(|c| {
                if c.backend.certified {
                    "certified"
                } else {
                    "NOT certified"
                }
                .to_owned()
            })
            .collect();
        line("verdict", verdicts);
    }

    /// Every cell's cases, each in a section hidden until its cell is opened.
    fn details(&self, out: &mut String) {
        for (row, family) in self.families.iter().enumerate() {
            for (col, column) in self.columns.iter().enumerate() {
                let cases: Vec<&CaseResult> = self.cases(col, family).collect();
                let host = if self.hosts > 1 {
                    format!(" on {}", column.host)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "<section class=\"cases\" id=\"d_c{col}_{row}\" hidden>\n<h2>{} x {}{} ({} cases)</h2>\n<ul>",
                    escape(family),
                    escape(&column.backend.name),
                    escape(&host),
                    cases.len()
                );
                for case in cases {
                    self.case(out, column, case);
                }
                out.push_str("</ul>\n</section>\n");
            }
        }
    }

    fn case(&self, out: &mut String, column: &Column<'_>, c: &CaseResult) {
        let _ = write!(
            out,
            "<li class=\"case\" data-bad=\"{}\" data-differs=\"{}\"><b class=\"s-{code}\">{code}</b> \
             <code class=\"id\">{}</code> <i>{}</i> {}<br><code>{}</code>",
            u8::from(c.status.is_bad()),
            u8::from(self.differing.contains(c.trial.as_str())),
            escape(&c.scenario),
            c.level.map_or("-", |l| l.as_str()),
            escape(c.title.as_deref().unwrap_or("")),
            escape(&c.trial),
            code = c.status.code(),
        );
        if let Some(message) = &c.message {
            let _ = write!(out, "<pre>{}</pre>", escape(message));
        }
        if let Some(reason) = &c.expected {
            let _ = write!(out, "<div>expected to fail: {}</div>", escape(reason));
        }
        let _ = writeln!(
            out,
            "<div>replay: <code class=\"replay\">{}</code></div></li>",
            escape(&replay(column.report, column.backend, &c.family))
        );
    }
}

/// The command that replays a case's run: its seed, its family, its backend.
pub fn replay(report: &Report, backend: &BackendReport, family: &str) -> String {
    if backend.protocol.is_some() {
        format!(
            "certify --seed {} --family {family} [--expectations FILE] -- BACKEND-COMMAND",
            report.seed
        )
    } else {
        format!(
            "certify --seed {} --family {family} --backend {}",
            report.seed, backend.name
        )
    }
}

/// A cell's colour: `bad` when any case is, else `xfail`, `pass`, `skip` or `none`.
fn outcome(statuses: impl Iterator<Item = Status>) -> &'static str {
    let all: BTreeSet<Status> = statuses.collect();
    if all.iter().any(|s| s.is_bad()) {
        "bad"
    } else if all.contains(&Status::Xfail) {
        "xfail"
    } else if all.contains(&Status::Pass) {
        "pass"
    } else if all.contains(&Status::Skip) {
        "skip"
    } else {
        "none"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            escape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn a_cell_is_coloured_by_its_worst_case() {
        use Status::*;
        assert_eq!(outcome([Pass, Fail, Xfail].into_iter()), "bad");
        assert_eq!(outcome([Pass, Xfail].into_iter()), "xfail");
        assert_eq!(outcome([Pass, Skip].into_iter()), "pass");
        assert_eq!(outcome([Skip].into_iter()), "skip");
        assert_eq!(outcome([].into_iter()), "none");
    }
}
