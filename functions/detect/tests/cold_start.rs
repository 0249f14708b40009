//! The real detect binary at cold start: a plan that disagrees with the
//! stack it is deployed in stops the function before its first tick, with
//! one error naming the plan field, the stack parameter and both values.

use std::process::Command;

fn example_plan() -> handover::plan::Plan {
    handover::plan::Plan::from_json(include_str!("../../../infra/plan.example.jsonc")).unwrap()
}

/// Run `detect` as Lambda would start it, with the stack's environment for
/// `stack_plan` and the plan file `plan`; no runtime API is needed because
/// the configuration is read first.
fn cold_start(
    name: &str,
    stack_plan: &handover::plan::Plan,
    plan: &handover::plan::Plan,
) -> (i32, String) {
    let file = std::env::temp_dir().join(format!("detect-cold-{name}-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_detect"));
    cmd.env_clear()
        .env("AWS_REGION", "ap-northeast-1")
        .env("PLAN_FILE", &file)
        .env("TABLE_NAME", "handover")
        .env(
            "STATE_MACHINE_ARN",
            "arn:aws:states:ap-northeast-1:123456789012:stateMachine:handover",
        )
        .env("HANDOVER_STACK_NAME", "handover-shop")
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9");
    for (k, v) in handover::stack::StackBinding::environment_for(stack_plan) {
        cmd.env(k, v);
    }
    cmd.env("HANDOVER_REPORT_BUCKET", "handover-shop-reportbucket");
    let log = std::env::temp_dir().join(format!("detect-cold-{name}-{}.log", std::process::id()));
    let sink = std::fs::File::create(&log).unwrap();
    let mut child = cmd
        .stdout(sink.try_clone().unwrap())
        .stderr(sink)
        .spawn()
        .expect("run detect");
    // Bounded: a binary that got past its configuration waits for the runtime API.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break -1;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&log);
    (code, text)
}

#[test]
fn a_plan_naming_another_primary_db_than_the_stack_stops_detect_at_cold_start() {
    let stack = example_plan();
    let mut plan = stack.clone();
    plan.regions.primary.db_instance_id = "shop-db-v2".into();
    let (code, text) = cold_start("mismatch", &stack, &plan);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("InvalidInput"), "{text}");
    assert!(
        text.contains("plan.regions.primary.db_instance_id is"),
        "{text}"
    );
    assert!(text.contains("shop-db-v2"), "{text}");
    // The runtime prints the error with Debug, so its quotes come escaped.
    assert!(
        text.contains(r#"PrimaryDbInstanceId is \"shop-db\""#),
        "{text}"
    );
}

#[test]
fn a_plan_that_matches_its_stack_gets_past_the_binding() {
    let stack = example_plan();
    let (_, text) = cold_start("match", &stack, &stack);
    // Its own configuration passed: it went on to the Lambda runtime's
    // (which wants the variables Lambda sets, absent here).
    assert!(!text.contains("but the stack's"), "{text}");
    assert!(text.contains("AWS_LAMBDA_FUNCTION_NAME"), "{text}");
}
