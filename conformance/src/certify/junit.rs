//! The JUnit XML a CI shows: one test suite per backend, one test case per trial, read the way
//! CI viewers read JUnit: a failure's message in its body (many viewers show only the body),
//! XFAIL and skipped cases as `skipped` with the reason, properties for the seed, the suite's
//! hash and commit, each case's scenario id and level, timestamps and the host's name.

use std::time::Duration;

use super::{CaseResult, Report, Status};

/// The JUnit XML of a run could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JunitError(String);

/// The run as JUnit XML: one test suite per backend.
pub fn junit(report: &Report) -> Result<String, JunitError> {
    use quick_junit::{Property, TestSuite};
    let mut junit = quick_junit::Report::new("certify");
    let mut names: Vec<&str> = report.cases.iter().map(|c| c.backend.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let timestamp = rfc3339(report.started_at);
    for name in names {
        let mut suite = TestSuite::new(name);
        suite
            .extra
            .insert("timestamp".into(), timestamp.as_str().into());
        if let Some(host) = &report.host.hostname {
            suite.extra.insert("hostname".into(), host.as_str().into());
        }
        let mut properties = vec![
            Property::new("seed", report.seed.to_string()),
            Property::new("replay", format!("certify --seed {}", report.seed)),
            Property::new("suite_version", report.suite_version.as_str()),
            Property::new("verdict", report.verdict.as_str()),
        ];
        for (key, value) in [
            ("suite_hash", report.suite_hash.as_deref()),
            ("commit", report.commit.as_deref()),
            ("leg", report.host.leg.as_deref()),
            ("kernel", report.host.kernel.as_deref()),
        ] {
            if let Some(value) = value {
                properties.push(Property::new(key, value));
            }
        }
        suite.add_properties(properties);
        for c in report.cases.iter().filter(|c| c.backend == name) {
            suite.add_test_case(case(c));
        }
        // A case the host cannot run was never planned: skipped, with what the host lacks.
        for (trial, why) in &report.not_planned {
            if trial.split("::").nth(1) == Some(name) {
                let mut status = quick_junit::TestCaseStatus::skipped();
                status.set_message(format!("not planned on this host: {why}"));
                let mut case = quick_junit::TestCase::new(trial.as_str(), status);
                case.set_classname(trial.split("::").next().unwrap_or(""));
                suite.add_test_case(case);
            }
        }
        junit.add_test_suite(suite);
    }
    // What the whole run left (no case claimed it): a suite of its own, one failing case per
    // kind, so a CI viewer shows why a run whose cases all passed is not certified.
    let run_level = [
        ("processes_left_behind", &report.left_behind),
        ("left_in_shared_places", &report.left_in_shared_places),
        ("changed_host_settings", &report.changed_host_settings),
        (
            "appeared_after_their_case",
            &report.appeared_after_their_case,
        ),
    ];
    if run_level.iter().any(|(_, found)| !found.is_empty()) {
        let mut suite = TestSuite::new("run");
        for (name, found) in run_level {
            let mut status = quick_junit::TestCaseStatus::success();
            if !found.is_empty() {
                status =
                    quick_junit::TestCaseStatus::non_success(quick_junit::NonSuccessKind::Failure);
                status.set_message(format!("{} found when every case was over", found.len()));
                status.set_description(found.join("\n"));
            }
            let mut case = quick_junit::TestCase::new(name, status);
            case.set_classname("run");
            suite.add_test_case(case);
        }
        junit.add_test_suite(suite);
    }
    junit.to_string().map_err(|e| JunitError(e.to_string()))
}

/// One case: its status as JUnit has it, the message in the body, its scenario and level.
fn case(c: &CaseResult) -> quick_junit::TestCase {
    use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus};
    let message = c.message.as_deref().unwrap_or("");
    let mut status = match c.status {
        Status::Pass => TestCaseStatus::success(),
        // An expected failure is neither a pass nor a failure: skipped, with the expectation's
        // reason (a viewer shows it as not run, never as a green pass).
        Status::Skip | Status::Xfail => TestCaseStatus::skipped(),
        Status::Fail | Status::Xpass => TestCaseStatus::non_success(NonSuccessKind::Failure),
        Status::Error | Status::Timeout | Status::Inconsistent => {
            TestCaseStatus::non_success(NonSuccessKind::Error)
        }
    };
    if c.status != Status::Pass {
        let first = message.lines().next().unwrap_or("");
        let short = match (c.status, c.expected.as_deref()) {
            (Status::Xfail, Some(reason)) => format!("XFAIL: {reason}"),
            _ => format!("{}: {first}", c.status.code()),
        };
        status.set_message(short);
        status.set_type(c.status.code());
        if !message.is_empty() {
            status.set_description(message);
        }
    }
    let mut case = TestCase::new(c.trial.as_str(), status);
    case.set_classname(c.family.as_str());
    case.set_time(Duration::from_secs_f64(c.duration_ms.max(0.0) / 1e3));
    let mut properties = vec![Property::new("status", c.status.code())];
    if !c.scenario.is_empty() {
        properties.push(Property::new("scenario", c.scenario.as_str()));
    }
    if let Some(level) = c.level {
        properties.push(Property::new("level", level.as_str()));
    }
    if let Some(title) = &c.title {
        properties.push(Property::new("title", title.as_str()));
    }
    if let Some(reason) = &c.expected {
        properties.push(Property::new("expected", reason.as_str()));
    }
    case.add_properties(properties);
    case
}

/// Unix time `secs` as an RFC 3339 UTC timestamp (`2026-08-04T12:00:00Z`).
fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil, inverted).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }
}
