//! One approved wider retry after a denial: the escalation ladder, the argument pairing, and the
//! ordered fail-closed choreography every tool shares. Every outcome has a stable code and its own
//! text; the rejection text is the one the specification fixes.

use sandbox::SandboxMode;
use sandbox_policy::{ApprovalPolicy, Event, PolicyService, Session, rejected_escalation};

use crate::approval::{ApprovalRequest, ApprovalService, Decision};
use crate::tool::Tool;

/// The modes an escalation may ask for: every mode wider than some confined mode.
pub const ESCALATION_TARGETS: [SandboxMode; 2] =
    [SandboxMode::WorkspaceWrite, SandboxMode::DangerFullAccess];

/// Why an escalated call ran nothing. `code` is stable; `text` is what the model reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {text}")]
pub struct Refusal {
    /// The stable code.
    pub code: &'static str,
    /// The model-facing text.
    pub text: String,
}

fn refusal(code: &'static str, text: String) -> Refusal {
    Refusal { code, text }
}

/// The escalation fields of one call, as the model sent them: the one spelling of the arguments
/// `bash`, `write` and `edit` share (parsed beside each tool's own, and added to its schema when
/// escalation is advertised; the doc comments are the schema's descriptions).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalationFields {
    /// Only to retry a denied call once with wider file access; needs justification.
    #[serde(default)]
    #[schemars(schema_with = "crate::tool::escalation_targets")]
    pub sandbox_permissions: Option<String>,
    /// Why the wider access is needed; shown to the user.
    #[serde(default)]
    pub justification: Option<String>,
}

/// A well-formed escalation ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// The mode asked for.
    pub mode: SandboxMode,
    /// Why.
    pub justification: String,
}

impl EscalationFields {
    /// The fields as the model sent them.
    pub fn new(sandbox_permissions: Option<String>, justification: Option<String>) -> Self {
        EscalationFields {
            sandbox_permissions,
            justification,
        }
    }

    /// Checks the pairing and the values: `Ok(None)` when no escalation is asked.
    pub fn validate(&self, advertised: bool) -> Result<Option<Ask>, Refusal> {
        let (permissions, justification) = match (&self.sandbox_permissions, &self.justification) {
            (None, None) => return Ok(None),
            (Some(p), Some(j)) => (p, j),
            _ => {
                return Err(refusal(
                    "ESCALATION_BAD_PAIRING",
                    "sandbox_permissions and justification go together: give both to ask for one wider retry, or neither. Nothing was run.".into(),
                ));
            }
        };
        if !advertised {
            return Err(refusal(
                "ESCALATION_NOT_ADVERTISED",
                "this tool does not run under a sandbox here, so sandbox_permissions cannot be granted; call it without them. Nothing was run.".into(),
            ));
        }
        let mode = ESCALATION_TARGETS
            .into_iter()
            .find(|m| m.as_str() == permissions)
            .ok_or_else(|| {
                refusal(
                    "ESCALATION_UNKNOWN_MODE",
                    format!(
                        "sandbox_permissions must be \"workspace-write\" or \"danger-full-access\", not {permissions:?}. Nothing was run."
                    ),
                )
            })?;
        if justification.trim().is_empty() {
            return Err(refusal(
                "ESCALATION_EMPTY_JUSTIFICATION",
                "justification must say why the wider mode is needed; it was empty. Nothing was run.".into(),
            ));
        }
        Ok(Some(Ask {
            mode,
            justification: justification.trim().to_owned(),
        }))
    }
}

/// Who is asking, and through what.
pub struct Asker<'a> {
    /// The policy home (effective mode and approval policy).
    pub policy: &'a PolicyService,
    /// The calling session, if any.
    pub session: Option<&'a Session>,
    /// The approval service, if the composition has one.
    pub approval: Option<&'a dyn ApprovalService>,
    /// The agent to route the question through, if any.
    pub agent: Option<&'a str>,
    /// The tool call.
    pub call_id: &'a str,
    /// The tool.
    pub tool: Tool,
    /// The command or path shown to the user.
    pub subject: &'a str,
}

/// The ordered fail-closed choreography: strictly wider than the call's effective mode (checked
/// now, prompting no one when it is not), an approval service, an agent, no earlier rejection of
/// the same subject in the session, a policy that asks, then one question whose answer is logged. `Ok(mode)` grants exactly this call; nothing is persisted.
pub fn approve(ask: &Ask, asker: &Asker<'_>) -> Result<SandboxMode, Refusal> {
    let effective = asker.policy.effective_mode(asker.session);
    let mode = ask.mode;
    if !mode.is_wider_than(effective) {
        return Err(refusal(
            "ESCALATION_NOT_WIDER",
            format!(
                "sandbox_permissions {:?} is not wider than what this call already runs under; nobody was asked and nothing was run.",
                mode.as_str()
            ),
        ));
    }
    let Some(approval) = asker.approval else {
        return Err(refusal(
            "ESCALATION_NO_APPROVAL_SERVICE",
            "this deployment has no approval service, so a wider retry cannot be granted. Nothing was run.".into(),
        ));
    };
    let Some(agent) = asker.agent else {
        return Err(refusal(
            "ESCALATION_NO_AGENT",
            "there is no agent to route an approval request through, so a wider retry cannot be granted. Nothing was run.".into(),
        ));
    };
    // A rejection permits no re-ask: the same command (or file change) is not put to the user
    // again in this session, whatever mode is asked for now.
    if let Some(rejected) = asker.session.and_then(|s| {
        s.with_events(|events| rejected_escalation(events, asker.tool.name(), asker.subject))
    }) {
        return Err(refusal(
            "ESCALATION_ALREADY_REJECTED",
            format!(
                "the user rejected escalating this command to \"{}\" earlier in this session; they are not asked again and nothing was run.",
                rejected.as_str()
            ),
        ));
    }
    if asker.policy.effective_approval(asker.session) == ApprovalPolicy::Never {
        return Err(refusal(
            "ESCALATION_POLICY_NEVER",
            "the approval policy is \"never\": wider retries are refused automatically and nobody was asked. Nothing was run; do not ask again.".into(),
        ));
    }
    let reason = format!(
        "{} asks to run this {} under \"{}\": {}",
        agent,
        if asker.tool == Tool::Bash {
            "command"
        } else {
            "file change"
        },
        mode.as_str(),
        ask.justification
    );
    let request = ApprovalRequest {
        session: asker.session.map(|s| s.id().to_owned()).unwrap_or_default(),
        agent: agent.to_owned(),
        call_id: asker.call_id.to_owned(),
        tool: asker.tool.name().to_owned(),
        subject: asker.subject.to_owned(),
        mode,
        justification: ask.justification.clone(),
        reason: reason.clone(),
    };
    // The log must be able to reconstruct the exchange: an unrecorded question or answer fails
    // closed.
    let unrecorded = |e: sandbox_policy::log::LogError| {
        refusal(
            "ESCALATION_UNAVAILABLE",
            format!(
                "the approval could not be recorded in the session log ({e}). Nothing was run."
            ),
        )
    };
    if let Some(s) = asker.session {
        s.append(Event::ApprovalAsked {
            call_id: asker.call_id.to_owned(),
            tool: asker.tool.name().to_owned(),
            mode,
            reason,
            subject: Some(asker.subject.to_owned()),
        })
        .map_err(unrecorded)?;
    }
    let decision = approval.ask(&request);
    let outcome = match decision {
        Decision::AllowedOnce => "granted",
        Decision::Rejected => "rejected",
        Decision::Cancelled => "cancelled",
        Decision::Unavailable => "unavailable",
    };
    if let Some(s) = asker.session {
        s.append(Event::ApprovalDecided {
            call_id: asker.call_id.to_owned(),
            outcome: outcome.to_owned(),
        })
        .map_err(unrecorded)?;
    }
    let m = mode.as_str();
    match decision {
        Decision::AllowedOnce => Ok(mode),
        Decision::Rejected => Err(refusal(
            "ESCALATION_REJECTED",
            format!("the user rejected escalating this command to \"{m}\""),
        )),
        Decision::Cancelled => Err(refusal(
            "ESCALATION_CANCELLED",
            format!(
                "the request to escalate this command to \"{m}\" was cancelled before anyone answered. Nothing was run."
            ),
        )),
        Decision::Unavailable => Err(refusal(
            "ESCALATION_UNAVAILABLE",
            format!(
                "approval could not be reached to escalate this command to \"{m}\". Nothing was run."
            ),
        )),
    }
}
