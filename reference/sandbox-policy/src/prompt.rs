//! What the model is told about the knobs. The sandbox mode is never stated (a standing label made
//! models refuse to attempt work that a denial plus escalation would have allowed); only the
//! approval policy `never` is stated, because an automatic rejection otherwise looks like a human
//! "no". A change of the approval policy is narrated once, coalesced, attributed to the user when a
//! knob event follows the last request header, and to the operator when the default drifted while
//! the process was down. Every sentence lives here, next to the parser that reads it back.

use crate::session::{ApprovalPolicy, Event, effective_approval_policy};

/// The one standing statement: present in the system prompt exactly while the policy is `never`.
pub const NEVER_STATEMENT: &str = "Approval policy: never. Requests to run a command or change a file with wider sandbox permissions are refused automatically; nobody is asked, so do not ask.";

/// The approval section of the system prompt, if any.
pub fn approval_section(policy: ApprovalPolicy) -> Option<&'static str> {
    (policy == ApprovalPolicy::Never).then_some(NEVER_STATEMENT)
}

/// Who changed the approval policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The user switched it in this session (a knob event after the last request header).
    User,
    /// The operator's configuration changed while the process was down.
    Operator,
}

/// A notice to deliver before the next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The policy now in force.
    pub policy: ApprovalPolicy,
    /// Who changed it.
    pub source: Source,
    /// The sentence.
    pub text: String,
}

/// The policy the model was last told, read back from the last request header's prompt.
pub fn last_told(events: &[Event]) -> Option<(usize, ApprovalPolicy)> {
    events.iter().enumerate().rev().find_map(|(i, e)| match e {
        Event::RequestHeader { prompt } => Some((
            i,
            if prompt.contains(NEVER_STATEMENT) {
                ApprovalPolicy::Never
            } else {
                ApprovalPolicy::Ask
            },
        )),
        _ => None,
    })
}

/// The one coalesced notice owed before the next step, if the policy in force differs from what
/// the last request header told the model. No header yet: the first prompt states it, no notice.
pub fn pending_notice(events: &[Event], default: ApprovalPolicy) -> Option<Notice> {
    let (header, told) = last_told(events)?;
    let now = effective_approval_policy(events).unwrap_or(default);
    if now == told {
        return None;
    }
    let switched_since = events[header + 1..]
        .iter()
        .any(|e| matches!(e, Event::ApprovalPolicy { .. }));
    let source = if switched_since {
        Source::User
    } else {
        Source::Operator
    };
    let who = match source {
        Source::User => "The user changed the approval policy",
        Source::Operator => "The operator's configuration changed the approval policy",
    };
    let text = match now {
        ApprovalPolicy::Never => format!(
            "{who} to \"never\": requests for wider sandbox permissions are now refused automatically and nobody is asked."
        ),
        ApprovalPolicy::Ask => format!(
            "{who} to \"ask\": a request for wider sandbox permissions after a denial is now put to the user again."
        ),
    };
    Some(Notice {
        policy: now,
        source,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(policy: ApprovalPolicy) -> Event {
        Event::RequestHeader {
            prompt: format!(
                "You are a coding agent.\n{}",
                approval_section(policy).unwrap_or("")
            ),
        }
    }

    #[test]
    fn only_never_is_stated_and_the_mode_never_is() {
        assert_eq!(approval_section(ApprovalPolicy::Ask), None);
        let never = approval_section(ApprovalPolicy::Never).unwrap_or_default();
        for mode in ["read-only", "workspace-write", "danger-full-access"] {
            assert!(!never.contains(mode));
        }
    }

    #[test]
    fn many_switches_since_the_last_header_make_one_notice_attributed_to_the_user() {
        let events = vec![
            header(ApprovalPolicy::Ask),
            Event::ApprovalPolicy {
                policy: ApprovalPolicy::Never,
            },
            Event::ApprovalPolicy {
                policy: ApprovalPolicy::Ask,
            },
            Event::ApprovalPolicy {
                policy: ApprovalPolicy::Never,
            },
        ];
        let notice = pending_notice(&events, ApprovalPolicy::Ask).expect("notice");
        assert_eq!(
            (notice.policy, notice.source),
            (ApprovalPolicy::Never, Source::User)
        );
        assert!(notice.text.starts_with("The user changed"));
    }

    #[test]
    fn a_net_zero_sequence_narrates_nothing() {
        let events = vec![
            header(ApprovalPolicy::Ask),
            Event::ApprovalPolicy {
                policy: ApprovalPolicy::Never,
            },
            Event::ApprovalPolicy {
                policy: ApprovalPolicy::Ask,
            },
        ];
        assert_eq!(pending_notice(&events, ApprovalPolicy::Ask), None);
    }

    #[test]
    fn a_default_that_drifted_while_down_is_attributed_to_the_operator() {
        let events = vec![
            Event::TurnStarted,
            header(ApprovalPolicy::Ask),
            Event::TurnEnded,
        ];
        let notice = pending_notice(&events, ApprovalPolicy::Never).expect("notice");
        assert_eq!(notice.source, Source::Operator);
        assert_eq!(
            pending_notice(&[], ApprovalPolicy::Never),
            None,
            "no header yet: no notice"
        );
    }
}
