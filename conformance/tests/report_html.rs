//! `report.html` as a person opens it: in a real headless Chromium, from disk, with no network.
//! The page of a real run and of a real merge shows the grid with the run's counts, and a cell
//! opens its cases (id, level, title, the `--seed` replay command).
//!
//! A libtest-mimic harness: without a browser the trials are skipped when listed, with the
//! reason; `CONFORMANCE_REQUIRE_TOOLS=chromium` (set by `ci/leg.sh`, whose hosts install one
//! through `ci/install-tests.sh`) turns that skip into a failure.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

const CERTIFY: &str = env!("CARGO_BIN_EXE_certify");

/// The browsers looked for, in order (`CHROMIUM` names another).
const BROWSERS: [&str; 5] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
];

fn browser() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("CHROMIUM").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    BROWSERS
        .iter()
        .find_map(|b| which::which(b).ok())
        .ok_or_else(|| {
            format!(
                "no headless browser here (looked for {}; ci/install-tests.sh installs Debian's chromium)",
                BROWSERS.join(", ")
            )
        })
}

fn required() -> bool {
    std::env::var("CONFORMANCE_REQUIRE_TOOLS")
        .is_ok_and(|tools| tools.split(',').any(|t| t.trim() == "chromium"))
}

/// One check, given the browser.
type Check = fn(&Path) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let found = browser();
    let tests: [(&str, Check); 2] = [
        (
            "a_run_s_report_html_shows_the_grid_and_opens_a_cell",
            run_page,
        ),
        (
            "a_merge_s_report_html_shows_every_host_and_opens_a_cell",
            merge_page,
        ),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, test)| match &found {
            Ok(browser) => {
                let browser = browser.clone();
                Trial::test(name, move || test(&browser))
            }
            Err(why) if required() => {
                let why = format!("CONFORMANCE_REQUIRE_TOOLS names chromium, but {why}");
                Trial::test(name, move || Err(why.into()))
            }
            Err(why) => {
                if !args.list {
                    eprintln!("report_html: {name} skipped when listed: {why}");
                }
                Trial::test(name, || Ok(())).with_ignored_flag(true)
            }
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

/// `certify` with `args`, its report into `out`, run as leg `leg`; its exit code.
fn certify(args: &[&str], out: &Path, leg: &str) -> Result<Option<i32>, Failed> {
    let run = Command::new(CERTIFY)
        .args(args)
        .arg("--out")
        .arg(out)
        .env("CONFORMANCE_LEG", leg)
        .output()
        .map_err(|e| format!("run certify: {e}"))?;
    if !out.join("report.html").is_file() {
        return Err(format!(
            "no report.html in {}: {}",
            out.display(),
            String::from_utf8_lossy(&run.stderr)
        )
        .into());
    }
    Ok(run.status.code())
}

/// The page at `page` (with `#fragment`) as Chromium has it once loaded and its script has run.
fn dump_dom(browser: &Path, page: &Path, fragment: &str) -> Result<String, Failed> {
    let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
    let url = format!("file://{}#{fragment}", page.display());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(&url)
        .env("HOME", profile.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start {}: {e}", browser.display()))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        stdout.read_to_string(&mut dom).map(|_| dom)
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{} did not load {url} within 90 s", browser.display()).into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let dom = reader
        .join()
        .map_err(|_| "the reader panicked")?
        .map_err(|e| e.to_string())?;
    if !dom.contains("<table class=\"grid\"") {
        return Err(format!("{url}: no grid in the page Chromium loaded:\n{dom:.2000}").into());
    }
    Ok(dom)
}

/// Per (family, backend), how many cases of each status `report` holds, as the grid's cell
/// states them (`48 passed`, `3 passed, 1 failed`).
fn cells(report: &Value) -> BTreeMap<(String, String), BTreeMap<String, usize>> {
    let mut cells: BTreeMap<(String, String), BTreeMap<String, usize>> = BTreeMap::new();
    for c in report["cases"].as_array().into_iter().flatten() {
        let key = (
            c["family"].as_str().unwrap_or("").to_owned(),
            c["backend"].as_str().unwrap_or("").to_owned(),
        );
        *cells
            .entry(key)
            .or_default()
            .entry(c["status"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
    }
    cells
}

/// The text of the element `id` in `dom` (the first tag's content up to its closing tag).
fn element<'a>(dom: &'a str, id: &str) -> Option<(&'a str, &'a str)> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let open = dom[..at].rfind('<')?;
    let tag_end = open + dom[open..].find('>')?;
    let name: String = dom[open + 1..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    let close = tag_end + dom[tag_end..].find(&format!("</{name}>"))?;
    Some((&dom[open..=tag_end], &dom[tag_end + 1..close]))
}

fn report(dir: &Path) -> Result<Value, Failed> {
    let text = std::fs::read_to_string(dir.join("report.json")).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string().into())
}

/// Checks what every page must be: self-contained (nothing fetched, a policy forbidding it).
fn self_contained(page: &Path) -> Result<(), Failed> {
    let html = std::fs::read_to_string(page).map_err(|e| e.to_string())?;
    for outside in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "url(http",
    ] {
        if html.contains(outside) {
            return Err(format!("{} reaches outside: {outside}", page.display()).into());
        }
    }
    if !html.contains("Content-Security-Policy\" content=\"default-src 'none'") {
        return Err("no Content-Security-Policy forbidding other sources".into());
    }
    Ok(())
}

fn run_page(browser: &Path) -> Result<(), Failed> {
    let out = tempfile::tempdir().map_err(|e| e.to_string())?;
    let args = ["--backend", "landlock", "--family", "runner-failure"];
    let code = certify(&args, out.path(), "one")?;
    if code != Some(3) {
        return Err(format!("a --family run is PARTIAL (exit 3), not {code:?}").into());
    }
    let page = out.path().join("report.html");
    self_contained(&page)?;
    let report = report(out.path())?;
    let cells = cells(&report);
    let ((family, backend), counts) = cells.iter().next().ok_or("no case ran")?;
    let dom = dump_dom(browser, &page, "open=c0_0")?;
    let (cell_tag, cell) = element(&dom, "c0_0").ok_or("no cell c0_0")?;
    let passed = counts.get("PASS").copied().unwrap_or(0);
    if !cell.contains(&format!("{passed} passed")) || !cell_tag.contains("open") {
        return Err(format!(
            "cell c0_0 ({family} x {backend}) says {cell:?} ({cell_tag}), the report {counts:?}"
        )
        .into());
    }
    let (section_tag, section) = element(&dom, "d_c0_0").ok_or("no cases of c0_0")?;
    if section_tag.contains("hidden") {
        return Err(format!("clicking c0_0 left its cases hidden: {section_tag}").into());
    }
    let seed = report["seed"].as_u64().ok_or("no seed")?;
    let first = report["cases"]
        .as_array()
        .and_then(|c| c.first())
        .ok_or("no case")?;
    for needed in [
        first["scenario"].as_str().unwrap_or("?").to_owned(),
        first["level"].as_str().unwrap_or("?").to_owned(),
        first["title"].as_str().unwrap_or("?").to_owned(),
        format!("certify --seed {seed} --family {family} --backend {backend}"),
    ] {
        let needed = conformance::certify::escape(&needed);
        if !section.contains(&needed) {
            return Err(
                format!("the opened cell's cases lack {needed:?}:\n{section:.3000}").into(),
            );
        }
    }
    // Another cell stays closed.
    match element(&dom, "d_c0_1") {
        Some((tag, _)) if !tag.contains("hidden") => Err("an unopened cell shows its cases".into()),
        _ => Ok(()),
    }
}

fn merge_page(browser: &Path) -> Result<(), Failed> {
    let base = tempfile::tempdir().map_err(|e| e.to_string())?;
    // Two hosts of a matrix, labelled by their legs; a short family keeps this quick.
    for leg in ["first", "second"] {
        let args = ["--backend", "landlock", "--family", "runner-failure"];
        certify(&args, &base.path().join(leg), leg)?;
    }
    let out = base.path().join("merged");
    let merge = Command::new(CERTIFY)
        .arg("merge")
        .arg(base.path().join("first"))
        .arg(base.path().join("second"))
        .args(["--expect", "first,second", "--out"])
        .arg(&out)
        .output()
        .map_err(|e| e.to_string())?;
    let page = out.join("report.html");
    if !page.is_file() {
        return Err(format!(
            "no merged report.html: {}",
            String::from_utf8_lossy(&merge.stderr)
        )
        .into());
    }
    self_contained(&page)?;
    let second = report(&base.path().join("second"))?;
    let counts = cells(&second);
    let passed = counts
        .values()
        .next()
        .and_then(|c| c.get("PASS"))
        .copied()
        .unwrap_or(0);
    let dom = dump_dom(browser, &page, "open=c1_0")?;
    for host in [
        "<th colspan=\"1\">first</th>",
        "<th colspan=\"1\">second</th>",
    ] {
        if !dom.contains(host) {
            return Err(format!("the merged grid has no column group {host}").into());
        }
    }
    let (_, cell) = element(&dom, "c1_0").ok_or("no cell c1_0")?;
    if !cell.contains(&format!("{passed} passed")) {
        return Err(
            format!("the second host's cell says {cell:?}, its report {passed} passed").into(),
        );
    }
    let (tag, section) = element(&dom, "d_c1_0").ok_or("no cases of c1_0")?;
    if tag.contains("hidden") || !section.contains("on second") {
        return Err(
            format!("c1_0 did not open the second host's cases: {tag} {section:.500}").into(),
        );
    }
    let seed = second["seed"].as_u64().ok_or("no seed")?;
    if !section.contains(&format!("certify --seed {seed} ")) {
        return Err("the second host's cases replay with another seed".into());
    }
    Ok(())
}
