//! What AWS delivers to each function, derived from the SAM template.
//!
//! The harness, the drill and the tests never compose a trigger payload by
//! hand. They ask this module, which reads `infra/template.yaml` as
//! CloudFormation will deploy it (expanded by `scripts/sam_expand.py`, the
//! same transform SAM applies) and builds the payload that the event source
//! found there sends:
//!
//! | event source in the expanded template | payload (shape source) |
//! |---|---|
//! | `AWS::Scheduler::Schedule`, target without `Input` | `source: aws.scheduler`, `detail-type: Scheduled Event`, `detail: "{}"` (a JSON *string*): EventBridge Scheduler's default payload, as recorded in aws/aws-lambda-dotnet#1864, aws-powertools/powertools-lambda-python#6134 and cloud-custodian#9566 |
//! | `AWS::Events::Rule` with `ScheduleExpression` | `source: aws.events`, `detail-type: Scheduled Event`, `detail: {}` (EventBridge user guide, "Amazon EventBridge events" / scheduled rules) |
//! | `AWS::Events::Rule` with `EventPattern` | the service's event (EventBridge envelope, `detail` an object), checked against the rule's pattern |
//! | `AWS::ApiGatewayV2::Api` route, `payloadFormatVersion` 2.0 | API Gateway HTTP API Lambda proxy payload 2.0 ("Working with AWS Lambda proxy integrations for HTTP APIs"); bodies other than text/JSON/XML/JavaScript arrive base64-encoded with `isBase64Encoded: true`, form bodies included (verified against AWS in ministackorg/ministack#766) |
//!
//! A trigger type with no builder here panics with its name, so changing the
//! event source in the template without teaching the code (and this module)
//! the new payload fails every test that delivers it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

/// The account every emulated ARN carries.
pub const ACCOUNT: &str = "123456789012";

/// One event source of a function, as the expanded template declares it.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// EventBridge Scheduler (`ScheduleV2` in SAM).
    Schedule {
        /// Logical id of the schedule.
        name: String,
        /// `Target.Input`, when the template sets one.
        input: Option<Value>,
    },
    /// An EventBridge rule on a schedule (`Schedule` in SAM).
    ScheduledRule {
        /// Logical id of the rule.
        name: String,
    },
    /// An EventBridge rule with an event pattern (`EventBridgeRule` in SAM).
    PatternRule {
        /// Logical id of the rule.
        name: String,
        /// The pattern, with `Ref`s left unresolved.
        pattern: Value,
    },
    /// An HTTP API route (`HttpApi` in SAM).
    HttpRoute {
        /// `POST`, …
        method: String,
        /// `/slack/interactions`.
        path: String,
        /// `2.0` or `1.0`.
        payload_format: String,
        /// Behind API Gateway's `AWS_IAM` authorisation (SigV4): the
        /// router serves it as API Gateway does (`iam_routes`).
        iam: bool,
    },
}

/// The expanded template (read once per process).
pub fn expanded_template() -> &'static Value {
    static T: OnceLock<Value> = OnceLock::new();
    T.get_or_init(|| {
        let root = crate::process::workspace_root();
        let out = std::env::temp_dir().join(crate::unique("template-expanded") + ".json");
        let status = std::process::Command::new(root.join(".venv/bin/python"))
            .arg(root.join("scripts/sam_expand.py"))
            .arg(root.join("infra/template.yaml"))
            .arg(&out)
            .status()
            .expect("run scripts/sam_expand.py (run `make venv`)");
        assert!(
            status.success(),
            "sam_expand.py failed on infra/template.yaml"
        );
        let text = std::fs::read_to_string(&out).expect("expanded template");
        let _ = std::fs::remove_file(&out);
        serde_json::from_str(&text).expect("expanded template is JSON")
    })
}

fn resources() -> &'static Map<String, Value> {
    expanded_template()["Resources"]
        .as_object()
        .expect("Resources")
}

/// Does `v` name `function` (`{"Fn::GetAtt": [function, "Arn"]}`, `{"Ref": function}`,
/// or a `Fn::Sub` string with `${function.Arn}`)?
fn names(v: &Value, function: &str) -> bool {
    v["Fn::GetAtt"][0] == function
        || v["Ref"] == function
        || v["Fn::Sub"]
            .as_str()
            .is_some_and(|s| s.contains(&format!("${{{function}.Arn}}")))
}

/// Every event source that invokes the function with logical id `function`.
pub fn triggers_of(function: &str) -> Vec<Trigger> {
    let mut out = Vec::new();
    for (name, res) in resources() {
        let props = &res["Properties"];
        match res["Type"].as_str().unwrap_or_default() {
            "AWS::Scheduler::Schedule" if names(&props["Target"]["Arn"], function) => {
                let input = props["Target"]["Input"]
                    .as_str()
                    .map(|s| serde_json::from_str(s).expect("Target.Input of a schedule is JSON"));
                out.push(Trigger::Schedule {
                    name: name.clone(),
                    input,
                });
            }
            "AWS::Events::Rule" => {
                let targets = props["Targets"].as_array().cloned().unwrap_or_default();
                if !targets.iter().any(|t| names(&t["Arn"], function)) {
                    continue;
                }
                if props.get("ScheduleExpression").is_some() {
                    out.push(Trigger::ScheduledRule { name: name.clone() });
                } else {
                    out.push(Trigger::PatternRule {
                        name: name.clone(),
                        pattern: props["EventPattern"].clone(),
                    });
                }
            }
            "AWS::ApiGatewayV2::Api" => {
                let paths = props["Body"]["paths"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                for (path, methods) in paths {
                    for (method, op) in methods.as_object().cloned().unwrap_or_default() {
                        let integration = &op["x-amazon-apigateway-integration"];
                        if names(&integration["uri"], function) {
                            let schemes = &props["Body"]["components"]["securitySchemes"];
                            let iam = op["security"].as_array().is_some_and(|reqs| {
                                reqs.iter()
                                    .filter_map(Value::as_object)
                                    .flat_map(|r| r.keys())
                                    .any(|scheme| {
                                        schemes[scheme]["x-amazon-apigateway-authtype"]
                                            == "awsSigv4"
                                    })
                            });
                            out.push(Trigger::HttpRoute {
                                method: method.to_uppercase(),
                                path: path.clone(),
                                payload_format: integration["payloadFormatVersion"]
                                    .as_str()
                                    .unwrap_or("1.0")
                                    .to_owned(),
                                iam,
                            });
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn event_id() -> String {
    let r: u128 = crate::unique("e")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u128, |h, b| {
            (h ^ u128::from(b)).wrapping_mul(0x1000_0000_01b3)
        });
    let h = format!("{r:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The one payload that the template's schedule delivers to `function` at `at`.
///
/// Panics when the function has no schedule, more than one, or one of a kind
/// this module cannot build.
pub fn scheduled_payload(function: &str, region: &str, at: DateTime<Utc>) -> Value {
    let schedules: Vec<Trigger> = triggers_of(function)
        .into_iter()
        .filter(|t| !matches!(t, Trigger::PatternRule { .. } | Trigger::HttpRoute { .. }))
        .collect();
    let [trigger] = schedules.as_slice() else {
        panic!("{function} should have exactly one schedule in the template, found {schedules:?}");
    };
    match trigger {
        // EventBridge Scheduler's default payload for a templated Lambda target.
        Trigger::Schedule { name, input: None } => json!({
            "version": "0",
            "id": event_id(),
            "detail-type": "Scheduled Event",
            "source": "aws.scheduler",
            "account": ACCOUNT,
            "time": time(at),
            "region": region,
            "resources": [format!("arn:aws:scheduler:{region}:{ACCOUNT}:schedule/default/{name}")],
            "detail": "{}"
        }),
        // With Target.Input, Scheduler delivers the input verbatim.
        Trigger::Schedule {
            input: Some(input), ..
        } => input.clone(),
        Trigger::ScheduledRule { name } => json!({
            "version": "0",
            "id": event_id(),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT,
            "time": time(at),
            "region": region,
            "resources": [format!("arn:aws:events:{region}:{ACCOUNT}:rule/{name}")],
            "detail": {}
        }),
        other => panic!("no payload builder for {other:?}"),
    }
}

/// An EventBridge event from `source` with `detail`, as a rule of the
/// template would deliver it to `function`. `refs` resolves the `Ref`s in the
/// rules' patterns (`Workflow` → the state machine ARN, parameters → values).
///
/// Panics when no rule of `function` matches the event: the template would
/// never deliver it.
pub fn rule_event(
    function: &str,
    region: &str,
    source: &str,
    detail_type: &str,
    resources: &[String],
    detail: Value,
    refs: &[(&str, &str)],
) -> Value {
    let event = json!({
        "version": "0",
        "id": event_id(),
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT,
        "time": time(Utc::now()),
        "region": region,
        "resources": resources,
        "detail": detail,
    });
    let rules: Vec<Trigger> = triggers_of(function)
        .into_iter()
        .filter(|t| matches!(t, Trigger::PatternRule { .. }))
        .collect();
    let matched = rules.iter().any(|t| match t {
        Trigger::PatternRule { pattern, .. } => matches_pattern(pattern, &event, refs),
        _ => false,
    });
    assert!(
        matched,
        "no EventBridge rule of {function} in the template matches this {source} / {detail_type} event; rules: {rules:?}"
    );
    event
}

/// EventBridge pattern matching for the forms the template uses: an array of
/// allowed values, or a nested object. A `Ref` is resolved through `refs`; an
/// unresolved one matches nothing.
fn matches_pattern(pattern: &Value, event: &Value, refs: &[(&str, &str)]) -> bool {
    let Some(fields) = pattern.as_object() else {
        return false;
    };
    fields.iter().all(|(key, want)| {
        let got = &event[key];
        match want {
            Value::Array(allowed) => allowed.iter().any(|a| {
                let a = match a["Ref"].as_str() {
                    Some(r) => match refs.iter().find(|(k, _)| *k == r) {
                        Some((_, v)) => Value::String((*v).to_owned()),
                        None => return false,
                    },
                    None => a.clone(),
                };
                &a == got
            }),
            Value::Object(_) => matches_pattern(want, got, refs),
            _ => false,
        }
    })
}

/// API Gateway HTTP API's payload for `method path` with `body`, as the
/// template's route to `function` delivers it (payload format 2.0).
pub fn http_event(
    function: &str,
    region: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> Value {
    let routes = triggers_of(function);
    let found = routes.iter().find(
        |t| matches!(t, Trigger::HttpRoute { method: m, path: p, .. } if m == method && p == path),
    );
    let Some(Trigger::HttpRoute {
        payload_format,
        iam,
        ..
    }) = found
    else {
        panic!("the template routes no {method} {path} to {function}: {routes:?}");
    };
    assert!(
        !iam,
        "{method} {path} is behind AWS_IAM: API Gateway invokes it only for a SigV4-signed request, which the router authenticates (send one to the router, as the CLI does)"
    );
    assert_eq!(
        payload_format, "2.0",
        "no payload builder for HTTP API payload format {payload_format}"
    );
    let api_id = "abc123def4";
    let host = format!("{api_id}.execute-api.{region}.amazonaws.com");
    let now = Utc::now();
    let mut h = Map::new();
    h.insert("content-length".into(), json!(body.len().to_string()));
    h.insert("host".into(), json!(host));
    h.insert("x-forwarded-proto".into(), json!("https"));
    h.insert("x-forwarded-port".into(), json!("443"));
    h.insert("x-forwarded-for".into(), json!("54.209.2.133"));
    for (k, v) in headers {
        h.insert(k.to_ascii_lowercase(), json!(v));
    }
    let content_type = h
        .get("content-type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let text = content_type.starts_with("text/")
        || [
            "application/json",
            "application/xml",
            "application/javascript",
        ]
        .iter()
        .any(|t| content_type.starts_with(t));
    let (body, encoded) = if text {
        (body.to_owned(), false)
    } else {
        (STANDARD.encode(body), true)
    };
    let user_agent = h
        .get("user-agent")
        .and_then(Value::as_str)
        .unwrap_or("Slackbot 1.0 (+https://api.slack.com/robots)")
        .to_owned();
    json!({
        "version": "2.0",
        "routeKey": format!("{method} {path}"),
        "rawPath": path,
        "rawQueryString": "",
        "headers": h,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": api_id,
            "domainName": host,
            "domainPrefix": api_id,
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "54.209.2.133", "userAgent": user_agent},
            "requestId": event_id(),
            "routeKey": format!("{method} {path}"),
            "stage": "$default",
            "time": now.format("%d/%b/%Y:%H:%M:%S +0000").to_string(),
            "timeEpoch": now.timestamp_millis(),
        },
        "body": body,
        "isBase64Encoded": encoded,
    })
}

/// An HTTP API route behind `AWS_IAM`, with the function binary it invokes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamRoute {
    /// The binary (`Metadata.BuildProperties.Binary`).
    pub function: String,
    /// `POST`.
    pub method: String,
    /// `/decisions`.
    pub path: String,
}

/// Every route of the template's HTTP APIs behind `AWS_IAM`.
pub fn iam_routes() -> Vec<IamRoute> {
    let mut out = Vec::new();
    for (name, res) in resources() {
        if res["Type"] != "AWS::Lambda::Function" {
            continue;
        }
        let binary = res["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} names no binary (Metadata.BuildProperties.Binary)"));
        for t in triggers_of(name) {
            if let Trigger::HttpRoute {
                method,
                path,
                payload_format,
                iam: true,
            } = t
            {
                assert_eq!(payload_format, "2.0", "the router builds payload 2.0 only");
                out.push(IamRoute {
                    function: binary.to_owned(),
                    method,
                    path,
                });
            }
        }
    }
    out
}

/// The URL of the template's `POST /decisions` in the local world (the
/// router, as API Gateway).
pub fn decision_url() -> String {
    let route = iam_routes()
        .into_iter()
        .find(|r| r.path == handover::approval::iam::ROUTE_PATH && r.method == "POST")
        .expect("the template routes POST /decisions behind AWS_IAM");
    format!("{}{}", crate::endpoint(), route.path)
}

/// The binary a function runs: its `Metadata.BuildProperties.Binary`,
/// what `sam build` builds for it and its name in the local world.
pub fn binary_of(function: &str) -> String {
    resources()[function]["Metadata"]["BuildProperties"]["Binary"]
        .as_str()
        .unwrap_or_else(|| panic!("{function} has no Metadata.BuildProperties.Binary"))
        .to_owned()
}

/// Every function's `Environment.Variables` in the expanded template, by
/// logical id.
pub fn function_environments() -> Vec<(String, Map<String, Value>)> {
    resources()
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Lambda::Function")
        .map(|(name, r)| {
            let vars = r["Properties"]["Environment"]["Variables"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            (name.clone(), vars)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Handover watches itself: what the expanded template must contain.
    #[test]
    fn the_stack_alarms_on_handover_itself() {
        let all: Vec<(&String, &Value)> = resources().iter().collect();
        let of_type = |t: &str| all.iter().filter(|(_, r)| r["Type"] == t).count();
        assert_eq!(of_type("AWS::SNS::Topic"), 1, "the operator topic");
        assert!(of_type("AWS::SQS::Queue") >= 1, "the failure queue");
        let alarms: Vec<&Value> = all
            .iter()
            .filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm")
            .map(|(_, r)| &r["Properties"])
            .collect();
        let heartbeat = alarms
            .iter()
            .find(|a| a["MetricName"] == "DetectTicks")
            .expect("the heartbeat alarm");
        assert_eq!(
            heartbeat["TreatMissingData"], "breaching",
            "a dead-man's switch"
        );
        let errors = alarms
            .iter()
            .filter(|a| a["Namespace"] == "AWS/Lambda" && a["MetricName"] == "Errors")
            .count();
        assert_eq!(
            errors,
            function_environments().len(),
            "an Errors alarm per function"
        );
        for m in [
            "ExecutionsFailed",
            "ExecutionsTimedOut",
            "ExecutionsAborted",
            "UnreadableSignals",
        ] {
            assert!(
                alarms.iter().any(|a| a["MetricName"] == m),
                "no alarm on {m}"
            );
        }
        assert!(
            alarms
                .iter()
                .all(|a| a["AlarmActions"][0]["Ref"] == "OperatorTopic")
        );
        // The asynchronous triggers have somewhere to fail to.
        let schedule = &resources()["DetectFunctionEveryMinute"]["Properties"]["Target"];
        assert!(
            schedule["DeadLetterConfig"]["Arn"].is_object(),
            "Scheduler DLQ"
        );
        for (name, r) in &all {
            if r["Type"] == "AWS::Events::Rule" {
                assert!(
                    r["Properties"]["Targets"][0]["DeadLetterConfig"]["Arn"].is_object(),
                    "{name} has no DLQ"
                );
            }
            if r["Type"] == "AWS::Lambda::EventInvokeConfig" {
                assert!(
                    r["Properties"]["DestinationConfig"]["OnFailure"]["Destination"].is_object(),
                    "{name} has no on-failure destination"
                );
            }
        }
        assert_eq!(
            of_type("AWS::Lambda::EventInvokeConfig"),
            3,
            "detect, audit and readiness"
        );
    }

    /// The variables `handover::stack` reads are the ones the template sets
    /// on every function, each from the parameter or resource it claims.
    #[test]
    fn every_function_gets_the_stack_binding_the_code_reads() {
        let envs = function_environments();
        assert!(envs.len() >= 9, "{} functions", envs.len());
        for (function, vars) in &envs {
            for (name, reference) in handover::stack::StackBinding::variables() {
                let v = vars
                    .get(name)
                    .unwrap_or_else(|| panic!("{function} lacks {name} in the template"));
                let named = v["Ref"] == reference
                    || (v["Fn::Join"][0] == "," && v["Fn::Join"][1]["Ref"] == reference);
                assert!(
                    named,
                    "{function}.{name} = {v}, expected a Ref to {reference}"
                );
            }
        }
    }

    #[test]
    fn detect_is_scheduled_by_eventbridge_scheduler_with_its_default_payload() {
        let at = "2026-11-30T14:11:55Z".parse().unwrap();
        let p = scheduled_payload("DetectFunction", "ap-northeast-1", at);
        assert_eq!(p["source"], "aws.scheduler");
        assert_eq!(p["detail"], "{}", "Scheduler's detail is a JSON string");
        assert_eq!(p["time"], "2026-11-30T14:11:55Z");
    }

    #[test]
    fn the_slack_route_is_an_http_api_with_a_base64_form_body() {
        let e = http_event(
            "SlackFunction",
            "ap-northeast-1",
            "POST",
            "/slack/interactions",
            &[(
                "Content-Type",
                "application/x-www-form-urlencoded".to_owned(),
            )],
            "payload=%7B%7D",
        );
        assert_eq!(e["isBase64Encoded"], true);
        assert_eq!(e["body"], STANDARD.encode("payload=%7B%7D"));
        assert_eq!(e["routeKey"], "POST /slack/interactions");
    }

    /// The fixtures the functions' own tests parse are events the template
    /// really delivers (or, for `running.json`, one it filters out).
    #[test]
    fn the_audit_and_slack_fixtures_are_what_the_template_delivers() {
        let fixture = |name: &str| -> Value {
            let text = std::fs::read_to_string(
                crate::process::workspace_root()
                    .join("functions")
                    .join(name),
            )
            .unwrap();
            serde_json::from_str(&text).unwrap()
        };
        let rules: Vec<Value> = triggers_of("AuditFunction")
            .into_iter()
            .filter_map(|t| match t {
                Trigger::PatternRule { pattern, .. } => Some(pattern),
                _ => None,
            })
            .collect();
        for (name, delivered) in [
            ("audit/events/succeeded.json", true),
            ("audit/events/failed.json", true),
            ("audit/events/backup-finished.json", true),
            ("audit/events/running.json", false),
        ] {
            let e = fixture(name);
            let sm = e["detail"]["stateMachineArn"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let refs = [
                ("Workflow", sm.as_str()),
                ("StandbyDbInstanceId", "shop-db-replica"),
            ];
            assert_eq!(
                rules.iter().any(|p| matches_pattern(p, &e, &refs)),
                delivered,
                "{name}"
            );
        }
        let click = fixture("slack/events/interaction.json");
        assert!(triggers_of("SlackFunction").contains(&Trigger::HttpRoute {
            method: "POST".into(),
            path: click["rawPath"].as_str().unwrap().into(),
            payload_format: click["version"].as_str().unwrap().into(),
            iam: false,
        }));
        assert_eq!(
            click["isBase64Encoded"], true,
            "a form body arrives base64-encoded"
        );
        // The CLI's decision: the fixture's route, behind AWS_IAM, and the
        // only route the router serves as API Gateway's IAM authoriser.
        let decision = fixture("slack/events/decision.json");
        assert!(triggers_of("SlackFunction").contains(&Trigger::HttpRoute {
            method: "POST".into(),
            path: decision["rawPath"].as_str().unwrap().into(),
            payload_format: decision["version"].as_str().unwrap().into(),
            iam: true,
        }));
        assert_eq!(
            iam_routes(),
            vec![IamRoute {
                function: "slack".into(),
                method: "POST".into(),
                path: handover::approval::iam::ROUTE_PATH.into(),
            }]
        );
        assert!(
            decision["requestContext"]["authorizer"]["iam"]["userArn"].is_string(),
            "API Gateway names the principal"
        );
    }

    /// Compensation (audit, the sweep, `handover release`) waits `TAIL`
    /// after a run closed from outside for its fence or promote invocation
    /// to end: their timeouts, plus a minute, must fit in it.
    #[test]
    fn compensation_outwaits_the_fence_and_promote_invocations() {
        let tail = handover::failover::compensate::TAIL.num_seconds();
        for f in ["FenceFunction", "PromoteFunction"] {
            let timeout = resources()[f]["Properties"]["Timeout"]
                .as_i64()
                .unwrap_or_else(|| panic!("{f} has a Timeout"));
            assert!(
                timeout + 60 <= tail,
                "{f} Timeout {timeout} s: raise TAIL in shared/src/failover/compensate.rs"
            );
        }
    }

    /// The on-call policy cannot read approval keys (their items hold task
    /// tokens) or send a decision; only the responders' policy can.
    #[test]
    fn no_operator_policy_can_decide_or_reach_a_task_token() {
        let statements = |name: &str| -> Vec<Value> {
            resources()[name]["Properties"]["PolicyDocument"]["Statement"]
                .as_array()
                .unwrap_or_else(|| panic!("{name} in the template"))
                .clone()
        };
        // An Action is a list or one string (IAM's grammar).
        let actions = |s: &Value| -> Vec<String> {
            match &s["Action"] {
                Value::String(one) => vec![one.clone()],
                v => v
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        };
        // A decision is the decision endpoint's (the slack function's):
        // neither policy sends one, nor reads an approval key's token.
        for policy in ["OperatorPolicy", "ResponderPolicy"] {
            for s in statements(policy) {
                let acts = actions(&s);
                assert!(
                    !acts.iter().any(|a| a.starts_with("states:SendTask")
                        || string_like(a, "states:SendTaskSuccess")),
                    "{policy} sends decisions: {s}"
                );
                if acts.iter().any(|a| a.starts_with("dynamodb:") || a == "*") {
                    // Every operator of the condition, each pattern read as
                    // IAM reads StringLike (`*`, `?`): none may match an
                    // approval key or its pointer.
                    let conditions = s["Condition"]
                        .as_object()
                        .unwrap_or_else(|| panic!("{policy}: an unconditioned table grant: {s}"));
                    let mut keys: Vec<&str> = Vec::new();
                    for (op, v) in conditions {
                        assert!(
                            ["ForAllValues:StringLike", "ForAllValues:StringEquals"]
                                .contains(&op.as_str()),
                            "{policy}: {op} does not bound every key the call names"
                        );
                        keys.extend(
                            v["dynamodb:LeadingKeys"]
                                .as_array()
                                .unwrap_or_else(|| panic!("{policy}: {op} without LeadingKeys"))
                                .iter()
                                .filter_map(Value::as_str),
                        );
                    }
                    assert!(!keys.is_empty(), "{policy}: no LeadingKeys: {s}");
                    for item in [
                        "APPROVAL#q2T8f3K9aZ0wXy1VbN4mLg",
                        "APPROVAL_FOR#arn:aws:states:ap-northeast-1:123456789012:execution:handover-x:inc",
                        "APPROVAL_FOR#shop-ap-northeast-2-20261130T141155Z",
                    ] {
                        assert!(
                            !keys.iter().any(|k| string_like(k, item)),
                            "{policy} reaches {item} through {keys:?}"
                        );
                    }
                    if policy == "OperatorPolicy" && acts.iter().any(|a| a != "dynamodb:GetItem") {
                        assert_eq!(
                            keys,
                            ["CONTROL"],
                            "OperatorPolicy writes more than the pause"
                        );
                    }
                }
            }
        }
        // The responder decides through POST /decisions only.
        let invoke: Vec<Value> = statements("ResponderPolicy")
            .into_iter()
            .filter(|s| actions(s).iter().any(|a| a.starts_with("execute-api:")))
            .collect();
        assert_eq!(invoke.len(), 1, "{invoke:?}");
        assert_eq!(actions(&invoke[0]), ["execute-api:Invoke"]);
        let resource = invoke[0]["Resource"]["Fn::Sub"]
            .as_str()
            .unwrap_or_default();
        assert!(
            resource.ends_with("${SlackApi}/*/POST/decisions"),
            "the decision route only: {resource}"
        );
    }

    /// IAM's StringLike: `*` any run of characters, `?` any one.
    fn string_like(pattern: &str, value: &str) -> bool {
        fn go(p: &[char], v: &[char]) -> bool {
            match p.split_first() {
                None => v.is_empty(),
                Some(('*', rest)) => (0..=v.len()).any(|i| go(rest, &v[i..])),
                Some(('?', rest)) => !v.is_empty() && go(rest, &v[1..]),
                Some((c, rest)) => v.first() == Some(c) && go(rest, &v[1..]),
            }
        }
        let (p, v): (Vec<char>, Vec<char>) = (pattern.chars().collect(), value.chars().collect());
        go(&p, &v)
    }

    #[test]
    fn string_like_reads_patterns_as_iam_does() {
        assert!(string_like("PROBE#*", "PROBE#ap-northeast-2"));
        assert!(string_like("APPR*", "APPROVAL#k"));
        assert!(string_like("*", "APPROVAL#k"));
        assert!(string_like("APPROVAL?k", "APPROVAL#k"));
        assert!(!string_like("PRIMARY", "APPROVAL#k"));
        assert!(!string_like("RPO#*", "APPROVAL#k"));
    }

    #[test]
    fn readiness_runs_after_its_own_stack_completes_a_deploy_only() {
        let text = std::fs::read_to_string(
            crate::process::workspace_root()
                .join("functions/readiness/events/stack-status-change.json"),
        )
        .unwrap();
        let fixture: Value = serde_json::from_str(&text).unwrap();
        let stack = fixture["detail"]["stack-id"].as_str().unwrap().to_owned();
        let deliver = |status: &str, stack_id: &str| {
            let mut detail = fixture["detail"].clone();
            detail["status-details"]["status"] = json!(status);
            std::panic::catch_unwind(|| {
                rule_event(
                    "ReadinessFunction",
                    "ap-northeast-1",
                    fixture["source"].as_str().unwrap(),
                    fixture["detail-type"].as_str().unwrap(),
                    &[],
                    detail,
                    &[("AWS::StackId", stack_id)],
                )
            })
            .is_ok()
        };
        assert!(deliver("UPDATE_COMPLETE", &stack));
        assert!(deliver("CREATE_COMPLETE", &stack));
        assert!(!deliver("UPDATE_ROLLBACK_COMPLETE", &stack));
        assert!(!deliver(
            "UPDATE_COMPLETE",
            "arn:aws:cloudformation:ap-northeast-1:123456789012:stack/other/1"
        ));
    }

    #[test]
    fn audit_receives_terminal_status_changes_of_its_own_state_machine_only() {
        let detail = |status: &str| json!({"status": status, "stateMachineArn": "arn:sm"});
        let deliver = |status: &str, refs: &[(&str, &str)]| {
            std::panic::catch_unwind(|| {
                rule_event(
                    "AuditFunction",
                    "ap-northeast-1",
                    "aws.states",
                    "Step Functions Execution Status Change",
                    &[],
                    detail(status),
                    refs,
                )
            })
            .is_ok()
        };
        assert!(deliver("SUCCEEDED", &[("Workflow", "arn:sm")]));
        assert!(deliver("TIMED_OUT", &[("Workflow", "arn:sm")]));
        assert!(!deliver("RUNNING", &[("Workflow", "arn:sm")]));
        assert!(!deliver("SUCCEEDED", &[("Workflow", "arn:other")]));
    }
}
