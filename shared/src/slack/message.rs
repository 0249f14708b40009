//! Block Kit messages: the approval request built from a [`Diagnosis`], the
//! "decided by X at T" replacement, and ephemeral notes.
//!
//! Buttons carry the short approval key as their `value`, never the task
//! token. When the RPO estimate is over target the approve button says how
//! much data may be lost, asks for confirmation, and has its own `action_id`
//! ([`ACTION_APPROVE_DATA_LOSS`]) so the click itself records the
//! acknowledgement.

use crate::execution::{
    Diagnosis, ExecutionState, Explanation, ExplanationOutcome, Mode, RiskLevel,
};
use crate::store::approval::Decision;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// Approve (RPO within target).
pub const ACTION_APPROVE: &str = "handover_approve";
/// Approve, accepting data loss (RPO over target).
pub const ACTION_APPROVE_DATA_LOSS: &str = "handover_approve_data_loss";
/// Reject.
pub const ACTION_REJECT: &str = "handover_reject";
/// Block id of the buttons (removed once decided).
pub const BLOCK_ACTIONS: &str = "handover_actions";
/// Block id of the CLI hint (removed once decided).
pub const BLOCK_CLI: &str = "handover_cli";

const MAX_EVIDENCE: usize = 6;

/// Where a person without Slack decides: `handover approve` against the
/// stack's decision endpoint in this Region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliHint {
    /// The Handover DynamoDB table.
    pub table: String,
    /// Its Region (also the state machine's and the endpoint's).
    pub region: String,
    /// The stack's `POST /decisions` URL (output `DecisionUrl`).
    pub decision_url: String,
}

/// Everything the approval message shows.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalView<'a> {
    /// The execution document (incident, mode, sides, plan).
    pub state: &'a ExecutionState,
    /// The diagnosis the question is about.
    pub diagnosis: &'a Diagnosis,
    /// The approval key (button value).
    pub key: &'a str,
    /// When the question was asked.
    pub requested_at: DateTime<Utc>,
    /// When the answer stops being accepted.
    pub expires_at: DateTime<Utc>,
    /// How to decide by CLI.
    pub cli: &'a CliHint,
    /// The last readiness result, as [`crate::readiness::Readiness::age_line`]
    /// gives it (None: never evaluated, or unreadable).
    pub readiness: Option<&'a str>,
}

/// `FAILOVER`, `SWITCHOVER`, `DRILL` or `DRILL SWITCHOVER`.
fn mode_word(input: &crate::execution::ExecutionInput) -> &'static str {
    match (input.drill, input.mode) {
        (false, Mode::Failover) => "FAILOVER",
        (false, Mode::Switchover) => "SWITCHOVER",
        (true, Mode::Failover) => "DRILL",
        (true, Mode::Switchover) => "DRILL SWITCHOVER",
    }
}

/// "Fail over" / "Switch over".
fn verb(input: &crate::execution::ExecutionInput) -> &'static str {
    match input.mode {
        Mode::Failover => "Fail over",
        Mode::Switchover => "Switch over",
    }
}

/// The approval request: notification text and blocks.
pub fn approval(v: &ApprovalView<'_>) -> (String, Vec<Value>) {
    let input = &v.state.input;
    let d = v.diagnosis;
    let mode = mode_word(input);
    let header = format!(
        "{} {mode} approval: {} — {}",
        if input.drill { "🧪" } else { "🚨" },
        input.plan.service,
        input.incident_id
    );
    let fallback = format!(
        "{mode} approval needed for {} ({} → {}): risk {}, RPO estimate {}",
        input.plan.service,
        input.primary.region,
        input.standby.region,
        risk_word(d.risk),
        rpo_text(d.rpo_estimate_s)
    );
    let since = v.requested_at.signed_duration_since(input.t0).num_seconds();
    let mut fields = vec![
        field(
            "Risk",
            &format!("*{}* — {}", risk_word(d.risk), d.risk_rule),
        ),
        match input.mode {
            Mode::Failover => field("RPO estimate", &rpo_line(d)),
            Mode::Switchover => field(
                "RPO",
                "0 — writes stop on P, and S is promoted only once it has replayed all of them; otherwise nothing is promoted and P is unfenced",
            ),
        },
        field(
            verb(input),
            &format!("{} → {}", input.primary.region, input.standby.region),
        ),
        field(
            "Database",
            &format!(
                "`{}` → promote `{}`",
                input.primary.db_instance_id, input.standby.db_instance_id
            ),
        ),
        field(
            "T0 (first failing probe)",
            &format!("{} ({} ago)", slack_date(input.t0), human(since)),
        ),
        field("Decide by", &slack_date(v.expires_at)),
        field(
            "Last readiness",
            v.readiness
                .unwrap_or("never evaluated (no readiness result in the table)"),
        ),
    ];
    fields.truncate(10);
    let mut blocks = vec![
        json!({"type": "header", "text": plain(&clip(&header, 150))}),
        json!({"type": "section", "text": mrkdwn(&clip(&d.summary, 3000))}),
        json!({"type": "section", "fields": fields}),
    ];
    if let Some(evidence) = evidence(d) {
        blocks.push(json!({"type": "section", "text": mrkdwn(&evidence)}));
    }
    if let Some(x) = &d.explanation {
        blocks.push(explanation(x));
    }
    blocks.push(json!({"type": "actions", "block_id": BLOCK_ACTIONS, "elements": [approve_button(d, input.mode, v.key), reject_button(v.key)]}));
    blocks.push(json!({"type": "context", "block_id": BLOCK_CLI, "elements": cli_hint(v)}));
    (fallback, blocks)
}

/// Who decided, for the replacement message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// approve or reject.
    pub decision: Decision,
    /// Slack user id.
    pub approver_id: String,
    /// Name from the allow-list.
    pub approver_name: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The approve button acknowledged data loss.
    pub data_loss_acknowledged: bool,
}

/// The `response_url` body that replaces the original message: its blocks
/// without the buttons and the CLI hint, plus who decided and when.
pub fn decided(original: Option<&[Value]>, d: &Decided) -> Value {
    let (icon, verb) = match d.decision {
        Decision::Approve => ("✅", "Approved"),
        Decision::Reject => ("❌", "Rejected"),
    };
    let ack = if d.data_loss_acknowledged {
        " — possible data loss acknowledged"
    } else {
        ""
    };
    // A Slack user is mentioned; an IAM principal (the CLI) is named.
    let who = if d.approver_id.starts_with("arn:") {
        format!("`{}`, with the handover CLI", d.approver_id)
    } else {
        format!("<@{}>", d.approver_id)
    };
    let line = format!(
        "{icon} *{verb}* by {} ({who}) at {}{ack}",
        d.approver_name,
        slack_date(d.at)
    );
    let mut blocks: Vec<Value> = original
        .unwrap_or_default()
        .iter()
        .filter(|b| !matches!(b["block_id"].as_str(), Some(BLOCK_ACTIONS | BLOCK_CLI)))
        .cloned()
        .collect();
    blocks.push(json!({"type": "section", "text": mrkdwn(&line)}));
    json!({
        "replace_original": true,
        "text": format!("{verb} by {} at {}", d.approver_name, d.at.to_rfc3339()),
        "blocks": blocks,
    })
}

/// A `response_url` body only the clicking user sees; the original stays.
pub fn ephemeral(text: &str) -> Value {
    json!({"response_type": "ephemeral", "replace_original": false, "text": text})
}

/// Slack's date markup: shown in each reader's time zone, with a UTC fallback.
pub fn slack_date(t: DateTime<Utc>) -> String {
    format!(
        "<!date^{}^{{date_short_pretty}} {{time_secs}}|{}>",
        t.timestamp(),
        t.format("%Y-%m-%d %H:%M:%S UTC")
    )
}

fn approve_button(d: &Diagnosis, mode: Mode, key: &str) -> Value {
    if !d.rpo_over_target {
        let label = match mode {
            Mode::Failover => "Approve failover",
            Mode::Switchover => "Approve switchover",
        };
        return json!({"type": "button", "action_id": ACTION_APPROVE, "style": "primary", "value": key, "text": plain(label)});
    }
    let (label, loss) = match d.rpo_estimate_s {
        Some(s) if s >= 0.0 => (
            format!("Approve — accept up to {} s data loss", s.ceil()),
            format!("up to {} s of writes made in P", s.ceil()),
        ),
        _ => (
            "Approve — accept unknown data loss".to_owned(),
            "an unknown amount of writes made in P".to_owned(),
        ),
    };
    json!({
        "type": "button",
        "action_id": ACTION_APPROVE_DATA_LOSS,
        "style": "danger",
        "value": key,
        "text": plain(&clip(&label, 75)),
        "confirm": {
            "title": plain("Accept data loss?"),
            "text": mrkdwn(&clip(&format!(
                "The RPO estimate ({}) is over the target of {} s. Promoting now loses {loss}. Promotion cannot be undone.",
                rpo_text(d.rpo_estimate_s), d.rpo_target_s
            ), 300)),
            "confirm": plain("Promote, accept the loss"),
            "deny": plain("Cancel"),
            "style": "danger",
        },
    })
}

fn reject_button(key: &str) -> Value {
    json!({"type": "button", "action_id": ACTION_REJECT, "value": key, "text": plain("Reject")})
}

/// The commands that decide without Slack: the `handover` CLI with the
/// operator's own AWS credentials, through the same single-use key as a
/// click. The task token is never in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliCommands {
    /// `handover approve …` (with `--accept-data-loss` when approving
    /// accepts possible data loss).
    pub approve: String,
    /// `handover reject …`.
    pub reject: String,
}

/// The CLI commands for this question.
pub fn cli_commands(v: &ApprovalView<'_>) -> CliCommands {
    let (url, region, key) = (&v.cli.decision_url, &v.cli.region, v.key);
    let ack = if v.diagnosis.rpo_over_target {
        " --accept-data-loss"
    } else {
        ""
    };
    CliCommands {
        approve: format!(
            "handover approve --key {key} --decision-url {url} --region {region}{ack}"
        ),
        reject: format!("handover reject --key {key} --decision-url {url} --region {region}"),
    }
}

/// The question in plain text: what `handover approve` shows before it
/// asks for confirmation, and what the operator notice carries. The same
/// facts as the Slack message.
pub fn question_text(
    state: &ExecutionState,
    d: &Diagnosis,
    expires_at: DateTime<Utc>,
    readiness: Option<&str>,
) -> String {
    let input = &state.input;
    let mode = mode_word(input);
    let mut out = vec![
        format!(
            "{mode} approval: {} — {}",
            input.plan.service, input.incident_id
        ),
        format!(
            "{} {} → {}: database {} → promote {}",
            verb(input),
            input.primary.region,
            input.standby.region,
            input.primary.db_instance_id,
            input.standby.db_instance_id
        ),
        format!(
            "T0 (first failing probe): {}",
            input.t0.format("%Y-%m-%d %H:%M:%S UTC")
        ),
        format!("Decide by: {}", expires_at.format("%Y-%m-%d %H:%M:%S UTC")),
        fallback_summary(d),
        format!(
            "Last readiness: {}",
            readiness.unwrap_or("never evaluated (no readiness result in the table)")
        ),
    ];
    if !d.evidence.is_empty() {
        out.push("Evidence:".into());
        for e in d.evidence.iter().take(MAX_EVIDENCE) {
            out.push(format!("  - {}: {}", e.source, clip(&e.observation, 200)));
        }
        let more = d.evidence.len().saturating_sub(MAX_EVIDENCE);
        if more > 0 {
            out.push(format!("  …and {more} more"));
        }
    }
    if d.rpo_over_target {
        out.push(format!(
            "DATA LOSS: the RPO estimate ({}) is over the target of {} s. Approving promotes S without the writes it never got; promotion cannot be undone.",
            rpo_text(d.rpo_estimate_s),
            d.rpo_target_s
        ));
    }
    out.join("\n")
}

fn cli_hint(v: &ApprovalView<'_>) -> Vec<Value> {
    let c = cli_commands(v);
    vec![
        mrkdwn(
            "Not in Slack? Decide with your own AWS credentials (a principal on the plan's `cli_approvers`); it shows this question again and asks before it acts.",
        ),
        mrkdwn(&format!("Approve: `{}`\nReject: `{}`", c.approve, c.reject)),
    ]
}

/// The operator-topic notice sent when Slack refuses the approval request:
/// the same question in plain text, with the commands to answer it.
pub fn approval_fallback(v: &ApprovalView<'_>, slack_error: &str) -> (String, String) {
    let input = &v.state.input;
    let mode = mode_word(input);
    let subject = format!(
        "Handover {mode}: approval needed for {} (Slack refused)",
        input.incident_id
    );
    let c = cli_commands(v);
    let body = format!(
        "Handover needs a decision and could not ask in Slack ({slack_error}).\n\n\
         {}\n\n\
         The run is waiting. Decide with the operator's own AWS credentials, as \
         a principal on the plan's cli_approvers (nobody else's decision is acted \
         on). The command shows this question again and asks before it acts; the \
         key is single-use, as a Slack click is.\n\n\
         Approve:\n{}\n\nReject:\n{}\n",
        question_text(v.state, v.diagnosis, v.expires_at, v.readiness),
        c.approve,
        c.reject
    );
    (subject, body)
}

fn fallback_summary(d: &Diagnosis) -> String {
    let name = |v: serde_json::Result<String>| v.unwrap_or_default().trim_matches('"').to_owned();
    let rpo = d
        .rpo_estimate_s
        .map_or_else(|| "unknown".to_owned(), |s| format!("{s:.0} s"));
    format!(
        "Diagnosis: {}\nRisk {} ({}), action {}, RPO estimate {rpo} against {} s{}",
        d.summary,
        name(serde_json::to_string(&d.risk)),
        d.risk_rule,
        name(serde_json::to_string(&d.action)),
        d.rpo_target_s,
        if d.rpo_over_target {
            ": OVER the target, approving accepts that data loss"
        } else {
            ""
        }
    )
}

fn evidence(d: &Diagnosis) -> Option<String> {
    let mut items: Vec<_> = d.evidence.iter().collect();
    // Evidence that P is down first, then the rest, keeping the original order.
    items.sort_by_key(|e| match e.supports_p_down {
        Some(true) => 0,
        None => 1,
        Some(false) => 2,
    });
    let lines: Vec<String> = items
        .iter()
        .take(MAX_EVIDENCE)
        .map(|e| format!("• `{}` {}", e.source, clip(&e.observation, 200)))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let more = d.evidence.len().saturating_sub(MAX_EVIDENCE);
    let tail = if more > 0 {
        format!("\n…and {more} more")
    } else {
        String::new()
    };
    Some(clip(
        &format!("*Key evidence*\n{}{tail}", lines.join("\n")),
        3000,
    ))
}

/// The model's words, labelled advisory and escaped so they cannot mention
/// anyone, link anywhere or pose as Handover's own text.
fn explanation(x: &Explanation) -> Value {
    match &x.outcome {
        ExplanationOutcome::Text(text) => {
            let head = format!(
                "*AI explanation* _(advisory, {}; the rules above decide)_\n",
                escape(&x.model_id)
            );
            json!({"type": "section", "text": mrkdwn(&clip(&format!("{head}{}", escape(text)), 3000))})
        }
        ExplanationOutcome::Unavailable(why) => json!({
            "type": "context",
            "elements": [mrkdwn(&clip(
                &format!("AI explanation unavailable ({}): the summary above is the rules' own.", escape(why)),
                2000,
            ))],
        }),
    }
}

/// Escape text for mrkdwn: `&`, `<` and `>` are the control characters of
/// Slack's markup (mentions, links, `<!channel>`).
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn rpo_line(d: &Diagnosis) -> String {
    let over = if d.rpo_over_target {
        " — *over target*"
    } else {
        ""
    };
    format!(
        "{} (target {} s){over}",
        rpo_text(d.rpo_estimate_s),
        d.rpo_target_s
    )
}

fn rpo_text(s: Option<f64>) -> String {
    match s {
        None => "unknown".into(),
        Some(s) if s < 0.0 => "replication stopped".into(),
        Some(s) => format!("{s:.0} s"),
    }
}

fn risk_word(r: RiskLevel) -> &'static str {
    match r {
        RiskLevel::Low => "LOW",
        RiskLevel::Medium => "MEDIUM",
        RiskLevel::High => "HIGH",
        RiskLevel::Blocked => "BLOCKED",
    }
}

fn human(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

fn field(title: &str, value: &str) -> Value {
    mrkdwn(&clip(&format!("*{title}*\n{value}"), 2000))
}

fn plain(text: &str) -> Value {
    json!({"type": "plain_text", "text": text, "emoji": true})
}

fn mrkdwn(text: &str) -> Value {
    json!({"type": "mrkdwn", "text": text})
}

/// At most `max` characters, with an ellipsis when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
