//! The JUnit XML a CI shows: one test suite per backend, one test case per trial.

use std::time::Duration;

use super::{Report, Status};

/// The JUnit XML of a run could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JunitError(String);

/// The run as JUnit XML: one test suite per backend.
pub fn junit(report: &Report) -> Result<String, JunitError> {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
    let mut junit = quick_junit::Report::new("certify");
    let mut names: Vec<&str> = report.cases.iter().map(|c| c.backend.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let mut suite = TestSuite::new(name);
        for c in report.cases.iter().filter(|c| c.backend == name) {
            let mut status = match c.status {
                Status::Pass | Status::Xfail => TestCaseStatus::success(),
                Status::Skip => TestCaseStatus::skipped(),
                Status::Fail | Status::Xpass => {
                    TestCaseStatus::non_success(NonSuccessKind::Failure)
                }
                Status::Error | Status::Timeout | Status::Inconsistent => {
                    TestCaseStatus::non_success(NonSuccessKind::Error)
                }
            };
            if let Some(m) = &c.message {
                status.set_message(format!("{}: {m}", c.status.code()));
            }
            let mut case = TestCase::new(c.trial.as_str(), status);
            case.set_classname(c.family.as_str());
            case.set_time(Duration::from_secs_f64(c.duration_ms / 1e3));
            if c.status == Status::Xfail {
                case.set_system_out(format!("XFAIL: {}", c.message.as_deref().unwrap_or("")));
            }
            suite.add_test_case(case);
        }
        junit.add_test_suite(suite);
    }
    junit.to_string().map_err(|e| JunitError(e.to_string()))
}
