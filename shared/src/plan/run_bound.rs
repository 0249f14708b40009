//! The longest a run can take, counted from the state machine's own bounds.
//!
//! Each attempt of a task state ends within its `TimeoutSeconds`. A state
//! runs at most once plus its retriers' `MaxAttempts`, with the retriers'
//! waits between the attempts ("Handling errors in Step Functions
//! workflows", AWS Step Functions Developer Guide). The figures below are
//! copied from statemachine.asl.json. `harness/tests/it/asl.rs` fails when
//! they drift from it.
//!
//! The lock's lease must outlive the longest run, or detect could start a
//! second execution beside a live one. So the lease counts every retry.

use super::{Plan, Timings};

/// What one task state can spend, its retries included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskBound {
    /// The state's name in statemachine.asl.json.
    pub state: &'static str,
    /// Its `TimeoutSeconds`: the longest one attempt runs.
    pub timeout_s: u64,
    /// Its retriers' `MaxAttempts`, summed. A run of mixed errors can use
    /// every retrier's count.
    pub retries: u64,
    /// The retriers' waits between attempts at their longest, summed and
    /// rounded up, seconds. Full jitter only shortens them.
    pub backoff_s: u64,
}

impl TaskBound {
    /// Every attempt at its timeout, and every wait at its longest.
    pub const fn worst_s(&self) -> u64 {
        self.timeout_s * (1 + self.retries) + self.backoff_s
    }
}

/// The retriers' figures of the task states the state machine times itself.
const fn task(state: &'static str, timeout_s: u64, retries: u64, backoff_s: u64) -> TaskBound {
    TaskBound {
        state,
        timeout_s,
        retries,
        backoff_s,
    }
}

/// The transient retrier most tasks share: 4 attempts from 2 s, doubling
/// (2 + 4 + 8 + 16 s).
const DIAGNOSE: TaskBound = task("Diagnose", 120, 4, 30);
/// The throttle retrier (12 from 10 s, x1.5, at most 30 s: 317.5 s) and
/// the transient one (30 s).
const READINESS: TaskBound = task("Readiness", 130, 16, 348);
const RECHECK: TaskBound = task("Recheck", 120, 4, 30);
const FENCE: TaskBound = task("Fence", 330, 4, 30);
const CATCH_UP: TaskBound = task("CatchUp", 60, 4, 30);
/// 10 attempts from 2 s, doubling, at most 30 s: 2 + 4 + 8 + 16 + 6 x 30.
const PROMOTE: TaskBound = task("Promote", 120, 10, 210);
const PROMOTION_STATUS: TaskBound = task("PromotionStatus", 120, 10, 210);
/// One retry after at most 1 s.
const FIRST_WRITE: TaskBound = task("FirstWrite", 20, 1, 1);
const SWITCH: TaskBound = task("Switch", 130, 4, 30);
const VERIFY: TaskBound = task("Verify", 910, 4, 30);

/// Every task state with a fixed `TimeoutSeconds`.
pub const TASKS: [TaskBound; 10] = [
    DIAGNOSE,
    READINESS,
    RECHECK,
    FENCE,
    CATCH_UP,
    PROMOTE,
    PROMOTION_STATUS,
    FIRST_WRITE,
    SWITCH,
    VERIFY,
];

/// RequestApproval's retriers: its `TimeoutSecondsPath` is the plan's
/// `approval_timeout_s`, so its `timeout_s` here is unused.
pub const APPROVAL: TaskBound = task("RequestApproval", 0, 4, 30);

/// The longest a failed approval attempt runs: the approval function's
/// `Timeout` (60 s, infra/template.yaml Globals) and Lambda's 10 s limit on
/// its init phase ("Lambda execution environment lifecycle", AWS Lambda
/// Developer Guide). Only a failure of that function is retried: a
/// rejection (`Handover.Rejected`) and `States.Timeout` are not.
pub const APPROVAL_FAILED_ATTEMPT_S: u64 = 60 + 10;

/// What a run holds the lock for outside its tasks' timeouts: Step
/// Functions' moves between states (300 s, a margin: AWS publishes no
/// bound), and one audit after the run ends, which releases the lock
/// (audit's `Timeout`, 300 s, infra/template.yaml). An audit that is late
/// (every delivery failed) is the sweep's, within about 20 minutes; the
/// sweep renews a running run's lease, not an ended one's.
pub const OUTSIDE_THE_TASKS_S: u64 = 300 + AUDIT_TIMEOUT_S;

/// The audit function's `Timeout` (infra/template.yaml).
pub const AUDIT_TIMEOUT_S: u64 = 300;

/// The approval wait: one attempt waits the whole timeout; each retried
/// attempt failed in the approval function first.
fn approval_s(t: &Timings) -> u64 {
    let failed = t.approval_timeout_s.min(APPROVAL_FAILED_ATTEMPT_S);
    t.approval_timeout_s
        .saturating_add(APPROVAL.retries.saturating_mul(failed))
        .saturating_add(APPROVAL.backoff_s)
}

/// The promotion's polls after the Promote task. The loop stops after
/// `promotion_max_polls` polls, or at the first poll that ends past the
/// budget from the call (`PromotionResult::past_budget`), whichever comes
/// first. A poll's retries count once against the budget, not per poll.
fn polling_s(t: &Timings) -> u64 {
    let poll = t
        .promotion_poll_s
        .saturating_add(PROMOTION_STATUS.worst_s());
    let by_count = u64::from(t.promotion_max_polls).saturating_mul(poll);
    let by_time = t.promotion_budget_s().saturating_add(poll);
    by_count.min(by_time)
}

/// From the promotion call to the end of verify.
fn after_the_fence_s(t: &Timings) -> u64 {
    [
        PROMOTE.worst_s(),
        polling_s(t),
        FIRST_WRITE.worst_s(),
        SWITCH.worst_s(),
        VERIFY.worst_s(),
    ]
    .into_iter()
    .fold(0, u64::saturating_add)
}

/// The longest failover run: Diagnose, the approval, Recheck, Fence, then
/// promotion, the first write, Switch and Verify, each retried to its
/// limit, and the time outside the tasks.
pub fn failover_run_s(t: &Timings) -> u64 {
    [
        OUTSIDE_THE_TASKS_S,
        DIAGNOSE.worst_s(),
        approval_s(t),
        RECHECK.worst_s(),
        FENCE.worst_s(),
        after_the_fence_s(t),
    ]
    .into_iter()
    .fold(0, u64::saturating_add)
}

/// The longest planned switchover: a failover's run, the readiness gate,
/// and the catch-up. The catch-up stops at the first reading past
/// `switchover.timeout_s` from its first, so it counts a reading before,
/// the timeout, one pause and a reading after.
pub fn switchover_run_s(plan: &Plan) -> u64 {
    let catch_up = (2 * CATCH_UP.worst_s())
        .saturating_add(plan.switchover.timeout_s)
        .saturating_add(plan.switchover.poll_s);
    [failover_run_s(&plan.timings), READINESS.worst_s(), catch_up]
        .into_iter()
        .fold(0, u64::saturating_add)
}
