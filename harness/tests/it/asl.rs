//! Static checks on statemachine.asl.json: the rules the flow relies on.

use handover::error::ErrorName;
use serde_json::Value;

const ASL: &str = include_str!("../../../statemachine.asl.json");

fn states() -> serde_json::Map<String, Value> {
    let v: Value = serde_json::from_str(ASL).expect("statemachine.asl.json is JSON");
    v["States"].as_object().expect("States").clone()
}

/// Every JSONPath a Choice rule reads, recursively (And/Or/Not).
fn choice_paths(rule: &Value, out: &mut Vec<String>) {
    if let Some(obj) = rule.as_object() {
        for (k, v) in obj {
            if (k == "Variable" || k.ends_with("Path"))
                && let Some(s) = v.as_str()
            {
                out.push(s.to_owned());
            }
            if matches!(k.as_str(), "And" | "Or" | "Not" | "Choices") {
                match v {
                    Value::Array(a) => a.iter().for_each(|r| choice_paths(r, out)),
                    other => choice_paths(other, out),
                }
            }
        }
    }
}

#[test]
fn no_choice_reads_model_output() {
    let mut paths = Vec::new();
    for (_, s) in states() {
        if s["Type"] == "Choice" {
            choice_paths(&s, &mut paths);
        }
    }
    assert!(!paths.is_empty());
    for p in &paths {
        assert!(!p.contains("explanation"), "a Choice reads AI text: {p}");
        // Only deterministic fields decide.
        let allowed = [
            "$.diagnosis.action",
            "$.recheck.action",
            "$.fence.may_proceed",
            "$.promotion.status",
            "$.promotion.polls",
            "$.promotion.past_budget",
            "$.plan.timings.promotion_max_polls",
            // A planned switchover: the run's kind, readiness's fail count,
            // the fence's outcome and the catch-up's status.
            "$.mode",
            "$.readiness.fail",
            "$.fence.outcome",
            "$.catch_up.status",
        ];
        assert!(
            allowed.contains(&p.as_str()),
            "a Choice reads {p}, which is not a deterministic decision field"
        );
    }
}

#[test]
fn every_task_resource_is_a_substitution_or_the_callback_integration() {
    for (name, s) in states() {
        if s["Type"] == "Task" {
            let r = s["Resource"].as_str().unwrap();
            assert!(
                (r.starts_with("${") && r.ends_with("FunctionArn}"))
                    || r == "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "{name}: {r}"
            );
            assert!(
                !r.contains("aws-sdk"),
                "{name}: no aws-sdk integrations (moto quirks)"
            );
        }
    }
}

#[test]
fn error_names_are_the_stable_ones() {
    let ours: Vec<&str> = ErrorName::ALL.iter().map(|n| n.as_str()).collect();
    // What Lambda itself reports when the runtime process dies (an
    // out-of-memory kill) or the function times out (Lambda Developer Guide,
    // "Troubleshoot invocation issues"); Step Functions may name either
    // Lambda.Unknown.
    let runtime = ["Runtime.ExitError", "Sandbox.Timedout"];
    for (name, s) in states() {
        for key in ["Retry", "Catch"] {
            for r in s[key].as_array().into_iter().flatten() {
                for e in r["ErrorEquals"].as_array().unwrap() {
                    let e = e.as_str().unwrap();
                    assert!(
                        ours.contains(&e)
                            || runtime.contains(&e)
                            || e.starts_with("States.")
                            || e.starts_with("Lambda."),
                        "{name}: {key} matches unknown error {e}"
                    );
                }
            }
        }
        if s["Type"] == "Fail"
            && let Some(e) = s["Error"].as_str()
        {
            assert!(e.starts_with("Handover."), "{name}: {e}");
        }
    }
}

/// The tasks after the fence whose retries must outlast minutes of
/// throttling: P is fenced and nobody can write until S is promoted.
const AFTER_THE_FENCE: [&str; 2] = ["Promote", "PromotionStatus"];

/// The retrier of `state` that takes Handover.Transient.
fn transient_retrier(state: &Value) -> Option<&Value> {
    state["Retry"].as_array()?.iter().find(|r| {
        r["ErrorEquals"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e == "Handover.Transient"))
    })
}

#[test]
fn every_task_retries_transient_errors_with_jitter_and_catches_the_rest() {
    for (name, s) in states() {
        if s["Type"] != "Task" {
            continue;
        }
        let r = transient_retrier(&s)
            .unwrap_or_else(|| panic!("{name}: no Retry of Handover.Transient"));
        // One run retries its own promotion: no herd to spread, and a
        // jittered wait could spend its budget in seconds.
        let jitter = if AFTER_THE_FENCE.contains(&name.as_str()) {
            "NONE"
        } else {
            "FULL"
        };
        assert!(
            r["JitterStrategy"] == jitter && r["BackoffRate"].as_f64().unwrap() > 1.0,
            "{name}: Handover.Transient must be retried with exponential backoff and {jitter} jitter"
        );
        let catch = s["Catch"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no Catch"));
        let last = catch.last().unwrap();
        assert_eq!(last["ErrorEquals"][0], "States.ALL", "{name}");
        assert_eq!(last["ResultPath"], "$.error", "{name}: the cause is kept");
        assert!(
            s["ResultPath"].as_str().unwrap().starts_with("$."),
            "{name}: output lands under its own key"
        );
    }
}

#[test]
fn no_timing_is_hard_coded_where_the_plan_sets_it() {
    for (name, s) in states() {
        if s["Type"] == "Wait" {
            let path = s["SecondsPath"].as_str().unwrap();
            // The catch-up echoes plan.switchover.poll_s (`CatchUpResult::poll_s`),
            // so a run whose input plan left the block out still waits.
            assert!(
                path.starts_with("$.plan.timings.") || path == "$.catch_up.poll_s",
                "{name}: {path}"
            );
        }
    }
    let approval = &states()["RequestApproval"];
    assert_eq!(
        approval["TimeoutSecondsPath"],
        "$.plan.timings.approval_timeout_s"
    );
}

#[test]
fn no_array_index_in_any_json_path() {
    // moto's JSONPath returns [x] for $.a[0].b; the flow uses object paths only.
    assert!(!ASL.contains("[0]"), "array index in a path");
}

/// The whole run's TimeoutSeconds is the bound the plan validates against.
#[test]
fn the_state_machine_times_out_where_the_plan_says_a_run_is_too_long() {
    let asl: Value = serde_json::from_str(include_str!("../../../statemachine.asl.json")).unwrap();
    assert_eq!(asl["TimeoutSeconds"], handover::plan::MAX_RUN_S);
}

/// A step whose process dies (out of memory, host failure) or times out is
/// run again: every step is written to read the world first, and a run that
/// fails on a crash would leave the fence or the promotion half-seen.
#[test]
fn every_task_retries_a_dead_or_timed_out_function() {
    for (name, s) in states() {
        if s["Type"] != "Task" {
            continue;
        }
        let retried: Vec<&str> = s["Retry"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["ErrorEquals"].as_array().unwrap())
            .filter_map(|e| e.as_str())
            .collect();
        for e in ["Lambda.Unknown", "Runtime.ExitError", "Sandbox.Timedout"] {
            assert!(retried.contains(&e), "{name} does not retry {e}");
        }
    }
}

/// A retrier's `MaxAttempts`, with the language's default of 3.
fn retrier_attempts(r: &Value) -> u64 {
    r["MaxAttempts"].as_u64().unwrap_or(3)
}

/// The longest a retrier waits between attempts, summed: each wait is
/// `IntervalSeconds x BackoffRate^n`, capped at `MaxDelaySeconds`, with the
/// language's defaults of 1 s and 2.0 (Amazon States Language, "Retrying
/// after an error").
fn retrier_waits_s(r: &Value) -> f64 {
    let mut wait = r["IntervalSeconds"].as_f64().unwrap_or(1.0);
    let cap = r["MaxDelaySeconds"].as_f64().unwrap_or(f64::MAX);
    let mut total = 0.0;
    for _ in 0..retrier_attempts(r) {
        total += wait.min(cap);
        wait *= r["BackoffRate"].as_f64().unwrap_or(2.0);
    }
    total
}

/// The lock's lease counts each task retried to its limit
/// (`handover::plan::run_bound`), from figures copied out of this
/// definition. A task added, or a timeout or retrier changed here and not
/// there, fails.
#[test]
fn the_lease_counts_every_task_as_the_state_machine_retries_it() {
    use handover::plan::run_bound::{APPROVAL, TASKS};
    let all = states();
    for b in TASKS.iter().chain([&APPROVAL]) {
        let s = &all[b.state];
        let retriers = s["Retry"].as_array().expect(b.state);
        let retries: u64 = retriers.iter().map(retrier_attempts).sum();
        let waits: f64 = retriers.iter().map(retrier_waits_s).sum();
        assert_eq!(
            (retries, waits.ceil() as u64),
            (b.retries, b.backoff_s),
            "{}: retries and waits",
            b.state
        );
        let timeout = if b.state == APPROVAL.state {
            assert_eq!(s["TimeoutSecondsPath"], "$.plan.timings.approval_timeout_s");
            0
        } else {
            s["TimeoutSeconds"].as_u64().expect(b.state)
        };
        assert_eq!(timeout, b.timeout_s, "{}: TimeoutSeconds", b.state);
    }
    let tasks: std::collections::BTreeSet<&str> = all
        .iter()
        .filter(|(_, s)| s["Type"] == "Task")
        .map(|(n, _)| n.as_str())
        .collect();
    let bounded = TASKS.iter().chain([&APPROVAL]).map(|b| b.state).collect();
    assert_eq!(tasks, bounded, "every task state is counted once");
    // The loops wait what the bound counts.
    assert_eq!(
        all["WaitPromotion"]["SecondsPath"],
        "$.plan.timings.promotion_poll_s"
    );
    assert_eq!(all["WaitCatchUp"]["SecondsPath"], "$.catch_up.poll_s");
}

/// A failed approval attempt is the approval function failing: it ends
/// within that function's Timeout and Lambda's 10 s init limit.
#[test]
fn a_failed_approval_attempt_is_bounded_by_the_approval_function() {
    let timeout = function_timeout_s("ApprovalFunction");
    assert_eq!(
        handover::plan::run_bound::APPROVAL_FAILED_ATTEMPT_S,
        timeout + 10
    );
}

/// Where a state may go next: `Next`, `Default`, each Choice rule's and
/// each Catch's.
fn successors(s: &Value) -> Vec<String> {
    let mut out: Vec<String> = [&s["Next"], &s["Default"]]
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    for list in ["Choices", "Catch"] {
        for r in s[list].as_array().into_iter().flatten() {
            out.extend(r["Next"].as_str().map(str::to_owned));
        }
    }
    out
}

/// The lease's bound holds only for the shape it counts: tasks, choices,
/// two waits, and no way back to an earlier state but the two polling
/// loops. A Parallel or Map branch, another Wait, or a new loop (a retry
/// edge from a Catch, say) fails here until the bound counts it.
#[test]
fn the_only_loops_are_the_two_the_lease_counts() {
    let all = states();
    let mut waits = Vec::new();
    for (name, s) in &all {
        let kind = s["Type"].as_str().unwrap_or_default();
        assert!(
            ["Task", "Choice", "Wait", "Pass", "Succeed", "Fail"].contains(&kind),
            "{name}: a {kind} state is not counted in the lease"
        );
        if kind == "Wait" {
            waits.push(name.as_str());
        }
    }
    assert_eq!(waits, ["WaitCatchUp", "WaitPromotion"]);
    // Without the two loops' way back, the graph has no cycle: Kahn's sort
    // reaches every state.
    let edges: Vec<(String, String)> = all
        .iter()
        .filter(|(name, _)| !waits.contains(&name.as_str()))
        .flat_map(|(name, s)| successors(s).into_iter().map(|n| (name.clone(), n)))
        .collect();
    let mut indegree: std::collections::BTreeMap<&str, usize> =
        all.keys().map(|k| (k.as_str(), 0)).collect();
    for (_, to) in &edges {
        *indegree.get_mut(to.as_str()).expect(to) += 1;
    }
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(k, _)| *k)
        .collect();
    let mut sorted = 0;
    while let Some(n) = ready.pop() {
        sorted += 1;
        for (_, to) in edges.iter().filter(|(from, _)| from == n) {
            let d = indegree.get_mut(to.as_str()).unwrap();
            *d -= 1;
            if *d == 0 {
                ready.push(to.as_str());
            }
        }
    }
    assert_eq!(sorted, all.len(), "a loop other than the two polling loops");
    // Each loop holds only its task, its choice and its wait: no other
    // state goes round with it (a Catch that re-enters through the wait,
    // say).
    let all_edges: Vec<(String, String)> = all
        .iter()
        .flat_map(|(name, s)| successors(s).into_iter().map(|n| (name.clone(), n)))
        .collect();
    for (wait, head, choice) in [
        ("WaitPromotion", "PromotionStatus", "PromotionChoice"),
        ("WaitCatchUp", "CatchUp", "CatchUpChoice"),
    ] {
        assert_eq!(
            successors(&all[wait]),
            [head],
            "{wait} goes back to its task"
        );
        let within: Vec<(String, String)> = all_edges
            .iter()
            .filter(|(from, _)| from != wait)
            .cloned()
            .collect();
        let after = reachable(head, &within, false);
        let before = reachable(wait, &within, true);
        let body: std::collections::BTreeSet<&str> =
            after.intersection(&before).map(String::as_str).collect();
        assert_eq!(body, [choice, head, wait].into(), "the {wait} loop");
    }
}

/// The states reachable from `from` over `edges` (`back`: against them),
/// `from` included.
fn reachable(
    from: &str,
    edges: &[(String, String)],
    back: bool,
) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::from([from.to_owned()]);
    let mut todo = vec![from.to_owned()];
    while let Some(n) = todo.pop() {
        for (a, b) in edges {
            let (src, dst) = if back { (b, a) } else { (a, b) };
            if *src == n && seen.insert(dst.clone()) {
                todo.push(dst.clone());
            }
        }
    }
    seen
}

/// The lease counts audit's compensation, which ends the run's hold on
/// the lock, at audit's own Lambda timeout.
#[test]
fn the_lease_counts_audit_at_its_timeout() {
    let timeout = function_timeout_s("AuditFunction");
    assert_eq!(handover::plan::run_bound::AUDIT_TIMEOUT_S, timeout);
}

/// The `Timeout` of the function `resource` in the expanded template.
fn function_timeout_s(resource: &str) -> u64 {
    let template = handover_testkit::triggers::expanded_template();
    template["Resources"][resource]["Properties"]["Timeout"]
        .as_u64()
        .unwrap_or_else(|| panic!("{resource}'s Timeout"))
}

/// The promotion loop also stops at a poll that ends past the budget, so
/// slow polls and their retries never stretch the run past its lease. The
/// rule first asks whether the field is there: a Choice that reads a
/// missing path fails the run with `States.Runtime`, which no Catch
/// handles, and a promote function older than the definition (a rollback
/// mid-incident) returns no such field.
#[test]
fn promotion_stops_polling_past_its_budget() {
    let all = states();
    let rules = all["PromotionChoice"]["Choices"].as_array().unwrap();
    let guarded = serde_json::json!([
        { "Variable": "$.promotion.past_budget", "IsPresent": true },
        { "Variable": "$.promotion.past_budget", "BooleanEquals": true }
    ]);
    assert!(
        rules
            .iter()
            .any(|r| r["And"] == guarded && r["Next"] == "PromotionStuck"),
        "{rules:?}"
    );
}

/// Throttling of S's RDS after the fence lasted about 40 s in the field
/// (issue 34); four attempts from 2 s were spent in 15 to 30 s, the run
/// failed and P was unfenced. The waits between the attempts of the steps
/// after the fence add up to minutes.
#[test]
fn the_steps_after_the_fence_retry_for_minutes() {
    let all = states();
    for name in AFTER_THE_FENCE {
        let r = transient_retrier(&all[name]).expect(name);
        let total = retrier_waits_s(r);
        assert!(total >= 180.0, "{name}: {total} s of waits between retries");
    }
}

/// The errors Step Functions documents for a Lambda service fault
/// ("Handling transient Lambda service exceptions", AWS Step Functions
/// Developer Guide). Each is worth a retry: the function may not have run.
const LAMBDA_SERVICE_ERRORS: [&str; 4] = [
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
];

#[test]
fn every_task_retries_the_lambda_service_errors_aws_lists() {
    for (name, s) in states() {
        if s["Type"] != "Task" {
            continue;
        }
        let r = transient_retrier(&s).unwrap_or_else(|| panic!("{name}: no retrier"));
        for e in LAMBDA_SERVICE_ERRORS {
            assert!(
                r["ErrorEquals"].as_array().unwrap().iter().any(|x| x == e),
                "{name} does not retry {e}"
            );
        }
    }
}

/// The function each Task invokes, by the state machine's substitutions
/// in the expanded template: `${SwitchFunctionArn}` → its Lambda resource.
fn task_function<'a>(template: &'a Value, state: &Value) -> Option<&'a Value> {
    let key = state["Resource"]
        .as_str()?
        .strip_prefix("${")?
        .strip_suffix('}')?;
    let resources = template["Resources"].as_object()?;
    let machine = resources
        .values()
        .find(|r| r["Type"] == "AWS::StepFunctions::StateMachine")?;
    let id = machine["Properties"]["DefinitionSubstitutions"][key]["Fn::GetAtt"][0].as_str()?;
    resources.get(id)
}

/// Tasks on verify's 900 s function that bound themselves in the code
/// well below it: the catch-up's one reading and the first write.
const SHORTER_BY_DESIGN: [&str; 2] = ["CatchUp", "FirstWrite"];

/// A task whose timeout equals its function's races it. When the state
/// ends first, the run sees States.Timeout, which no retrier takes; the
/// function's own timeout (Sandbox.Timedout) is retried. So a task lasts at
/// least 10 s longer than its function, or is one of [`SHORTER_BY_DESIGN`].
#[test]
fn a_task_outlives_its_function_or_is_meant_to_be_shorter() {
    let template = handover_testkit::triggers::expanded_template();
    let mut checked = 0;
    for (name, s) in states() {
        let Some(function) = task_function(template, &s) else {
            continue;
        };
        let lambda = function["Properties"]["Timeout"]
            .as_i64()
            .unwrap_or_else(|| panic!("{name}: its function has no Timeout"));
        let task = s["TimeoutSeconds"]
            .as_i64()
            .unwrap_or_else(|| panic!("{name}: no TimeoutSeconds"));
        let meant_shorter = SHORTER_BY_DESIGN.contains(&name.as_str());
        assert!(
            task >= lambda + 10 || (meant_shorter && task <= lambda - 10),
            "{name}: TimeoutSeconds {task} against its function's Timeout {lambda}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} tasks matched a function");
}
