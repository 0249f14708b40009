//! The plan's defaults: what a field is when the plan leaves it out.
//! docs/reference/plan.md lists each with its field.

pub(super) fn default_reprotect_timeout_s() -> u64 {
    4 * 60 * 60
}

pub(super) fn default_reprotect_lag_s() -> f64 {
    1.0
}

pub(super) fn default_settle_s() -> u64 {
    5
}

pub(super) fn default_catch_up_timeout_s() -> u64 {
    120
}

pub(super) fn default_catch_up_poll_s() -> u64 {
    2
}

pub(super) fn default_fence_confirm_s() -> u64 {
    180
}

pub(super) fn default_backup_retention() -> i32 {
    7
}

pub(super) fn default_health_path() -> String {
    "/health".into()
}

pub(super) fn default_pg_port() -> u16 {
    5432
}

pub(super) fn default_canary_table() -> String {
    "handover_canary".into()
}

pub(super) fn default_true() -> bool {
    true
}

pub(super) fn default_rto() -> u64 {
    15 * 60
}

pub(super) fn default_rpo() -> u64 {
    60
}

pub(super) fn default_k() -> u32 {
    3
}

pub(super) fn default_probe_timeout() -> u64 {
    3_000
}

pub(super) fn default_healthy_share() -> f64 {
    0.5
}

pub(super) fn default_alarm_region() -> String {
    "us-east-1".into()
}

pub(super) fn default_approval_timeout() -> u64 {
    15 * 60
}

pub(super) fn default_poll() -> u64 {
    30
}

pub(super) fn default_max_polls() -> u32 {
    60
}

pub(super) fn default_verify_deadline() -> u64 {
    300
}

pub(super) fn default_lease() -> u64 {
    2 * 60 * 60
}

pub(super) fn default_cooldown() -> u64 {
    30 * 60
}

pub(super) fn default_call_budget() -> u64 {
    5_000
}

/// Route 53: changes "generally propagate to all Route 53 name servers
/// within 60 seconds" (API Reference, GetChange); a half more for margin.
pub(super) fn default_dns_sync() -> u64 {
    90
}

pub(super) fn default_explain_budget() -> u64 {
    8_000
}

pub(super) fn default_report_prefix() -> String {
    "reports/".into()
}
