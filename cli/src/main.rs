//! `handover`: the operator's command line. It runs with the operator's own
//! AWS credentials (profile or environment) and reaches AWS through the same
//! adapters as the functions.
//!
//! Commands:
//! - `handover init [--table T] [--plan-parameter NAME | --plan-file PATH] [--region R]`:
//!   write the primary record from RDS reality (part of deploying; see the
//!   docs/how-to/deploy.md, step 8). The table and plan default to `TABLE_NAME` and
//!   `PLAN_PARAMETER` / `PLAN_FILE`; the Region to `AWS_REGION` (the stack's, S).
//!
//! - `handover rpo [--execution ARN] [--p-host H] [--p-port N] [--s-host H] [--s-port N]
//!   [--table T] [--plan-parameter NAME | --plan-file PATH] [--region R]`:
//!   measure on both databases what S never got in a failover (the
//!   execution, or the last one the primary record names) on the plan's
//!   `rpo_table`, keep it in the table and rewrite that run's report with
//!   the measured RPO next to the estimate. Each side is reached at its RDS
//!   endpoint, or at the host and port given (a tunnel to the fenced P),
//!   with TLS verifying the endpoint's name as the canary does.
//!
//! - `handover status [--json]`: the primary record and epoch, a transition
//!   in progress, the lock and cooldown, P's probe counters and T0, the
//!   pause flag and the last readiness.
//! - `handover pause --reason TEXT [--by NAME]` / `handover resume [--by NAME]`:
//!   stop detect from starting failovers (it goes on probing), and let it again.
//! - `handover readiness [--json] [--fence-role-arn ARN --promote-role-arn ARN] [--table T] [--plan-parameter NAME | --plan-file PATH] [--region R]`:
//!   would a failover work now? Every check of `handover::readiness` with
//!   its verdict, what was observed and expected, and the fix. Read calls only
//!   (the roles, the stack's outputs, are simulated with IAM's policy simulator).
//!   With `--last [--bucket B]`: the latest result the readiness function
//!   stored in the report bucket, evaluating nothing.
//!
//! - `handover approve` / `handover reject [--key K | --execution ARN | --incident ID | --table T]
//!   [--decision-url URL] [--yes] [--accept-data-loss] [--region R]`: decide a
//!   waiting approval when Slack cannot (with `--table` alone: the failover
//!   holding the lock). The request is SigV4-signed with the operator's
//!   credentials and decided on the server (`POST /decisions`, AWS_IAM): the
//!   same single-use key as a click, the caller's IAM principal checked
//!   against the run's plan `cli_approvers` and recorded as the approver. It
//!   shows the question and asks the operator to type the decision (`--yes`
//!   for scripts); approving a possible data loss needs `--accept-data-loss`.
//!   The endpoint is `--decision-url` or `HANDOVER_DECISION_URL` (the stack
//!   output DecisionUrl).
//!
//! - `handover report [--execution ARN] [--format md|html|json] [--render]`:
//!   print the after-action report audit stored (default: the last run the
//!   primary record names), or rebuild it from the execution history now,
//!   writing nothing.
//! - `handover release [--yes]`: clear a transition or lock that an ended
//!   run left, after showing what holds it and checking its execution has
//!   closed; the transition goes through audit's compensation (P unfenced
//!   when nothing was promoted).
//!
//! - `handover switchover [--state-machine ARN] [--yes] [--drill]`: start a
//!   planned switchover P → S with RPO 0 (see `switchover.rs`): it takes the
//!   lock detect takes, and the run checks readiness, asks for approval,
//!   fences P and promotes only once S has replayed all of P's WAL.
//!
//! - `handover failback [--state-machine ARN] [--yes] [--drill] [--p-host H] [--p-port N]
//!   [--s-host H] [--s-port N]`: back to P after a failover (see
//!   `failback.rs`): under the lock, re-protect (a replica of S under P's
//!   identifier, the old P renamed and kept), compare the data on both
//!   sides, then start a planned switchover in the reversed plan, which
//!   asks for approval and puts the writer endpoint and traffic back.
//! - `handover reprotect [--yes]`: give the primary a replica in the other
//!   Region under the standby's identifier (after a failback: S again).
//!
//! Exit codes: 0 done, 2 usage, 3 refused (the world is not as the plan
//! says: nothing written), 4 an AWS call or the table failed (retry),
//! 5 readiness found a check that fails.

mod decide;
mod failback;
mod readiness;
mod release;
mod report;
mod rpo;
mod state;
mod switchover;

use handover::adapters::Rds;
use handover::aws::Aws;
use handover::bootstrap::{InitError, Initialised, init_primary_record};
use handover::config::PlanSource;
use handover::error::{Classify, ErrorName};
use handover::store::Store;
use std::process::ExitCode;

pub(crate) const USAGE: &str = "usage: handover init [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover status [--json] [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover pause --reason TEXT [--by NAME] [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover resume [--by NAME] [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover readiness [--json] [--fence-role-arn ARN --promote-role-arn ARN | --last [--bucket BUCKET]] [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover approve [--key KEY | --execution ARN | --incident ID | --table TABLE] [--decision-url URL] [--yes] [--accept-data-loss] [--region REGION]
       handover reject [--key KEY | --execution ARN | --incident ID | --table TABLE] [--decision-url URL] [--yes] [--region REGION]
       handover report [--execution ARN] [--format md|html|json] [--render] [--table TABLE] [--region REGION]
       handover release [--yes] [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover switchover [--state-machine ARN] [--yes] [--drill] [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover failback [--state-machine ARN] [--yes] [--drill] [--p-host HOST] [--p-port PORT] [--s-host HOST] [--s-port PORT]
                         [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover reprotect [--yes] [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]
       handover rpo [--execution ARN] [--p-host HOST] [--p-port PORT] [--s-host HOST] [--s-port PORT]
                    [--table TABLE] [--plan-parameter NAME | --plan-file PATH] [--region REGION]";

/// The arguments every command takes: where the table and the plan are.
#[derive(Debug, Default, PartialEq)]
struct InitArgs {
    table: Option<String>,
    plan_parameter: Option<String>,
    plan_file: Option<String>,
    region: Option<String>,
    /// The command's own flags, by name (`--execution` → value).
    extra: std::collections::BTreeMap<&'static str, String>,
}

/// Flags that take no value (present means `true`).
const SWITCHES: &[&str] = &[
    "--json",
    "--yes",
    "--accept-data-loss",
    "--accept-unmeasured-loss",
    "--render",
    "--drill",
    "--last",
];

/// Parse `args`: the common flags plus the command's own (`extra`).
fn parse_args(args: &[String], extra: &[&'static str]) -> Result<InitArgs, String> {
    let mut out = InitArgs::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let slot = match flag.as_str() {
            "--table" => &mut out.table,
            "--plan-parameter" => &mut out.plan_parameter,
            "--plan-file" => &mut out.plan_file,
            "--region" => &mut out.region,
            other if SWITCHES.contains(&other) && extra.contains(&other) => {
                let name = SWITCHES
                    .iter()
                    .find(|s| **s == other)
                    .copied()
                    .unwrap_or_default();
                if out.extra.insert(name, "true".into()).is_some() {
                    return Err(format!("{flag} given twice"));
                }
                continue;
            }
            other => match extra.iter().find(|e| **e == other) {
                Some(name) => {
                    let v = it
                        .next()
                        .ok_or_else(|| format!("{flag} needs a value"))?
                        .clone();
                    if out.extra.insert(*name, v).is_some() {
                        return Err(format!("{flag} given twice"));
                    }
                    continue;
                }
                None => return Err(format!("unknown argument {other:?}")),
            },
        };
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        *slot = Some(value.clone());
    }
    if out.plan_parameter.is_some() && out.plan_file.is_some() {
        return Err("give --plan-parameter or --plan-file, not both".into());
    }
    Ok(out)
}

fn parse_init(args: &[String]) -> Result<InitArgs, String> {
    parse_args(args, &[])
}

pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `--execution`, or the last failover the primary record names; `none`
/// says why there is nothing to work on when it names none.
pub(crate) async fn execution_or_last(
    store: &Store,
    flags: &std::collections::BTreeMap<&'static str, String>,
    none: &str,
) -> Result<String, (u8, String)> {
    match flags.get("--execution") {
        Some(e) => Ok(e.clone()),
        None => store
            .primary()
            .await
            .map_err(|e| {
                (
                    4,
                    format!(
                        "failed (nothing was written; retry): {}",
                        handover::error::chain(&e)
                    ),
                )
            })?
            .and_then(|r| r.last_execution)
            .ok_or_else(|| (3, format!("refused: {none}"))),
    }
}

/// The Region and the table a command works on, without a plan (`report`
/// acts on the run's own plan, read from the execution).
pub(crate) struct TableContext {
    pub aws: Aws,
    pub region: String,
    pub store: Store,
}

async fn table_context(args: &InitArgs) -> Result<TableContext, (u8, String)> {
    let usage = |m: String| (2u8, format!("{m}\n{USAGE}"));
    if args.plan_parameter.is_some() || args.plan_file.is_some() {
        return Err(usage(
            "this command acts on the run's own plan: --plan-parameter / --plan-file do not apply"
                .into(),
        ));
    }
    let region = args
        .region
        .clone()
        .or_else(|| env("AWS_REGION"))
        .ok_or_else(|| {
            usage("no Region: pass --region (the stack's Region, S) or set AWS_REGION".into())
        })?;
    let table = args
        .table
        .clone()
        .or_else(|| env("TABLE_NAME"))
        .ok_or_else(|| usage("no table: pass --table (the stack output StateTableName)".into()))?;
    let aws = Aws::named(handover::aws::CLI_APP_NAME);
    let store = Store::new(aws.dynamodb(&region).await, table);
    Ok(TableContext { aws, region, store })
}

/// The Region, the table and the plan the command works on.
pub(crate) struct Context {
    pub aws: Aws,
    pub region: String,
    pub store: Store,
    pub plan: handover::plan::Plan,
}

async fn context(args: &InitArgs) -> Result<Context, (u8, String)> {
    let usage = |m: String| (2u8, format!("{m}\n{USAGE}"));
    let args = InitArgs {
        table: args.table.clone(),
        plan_parameter: args.plan_parameter.clone(),
        plan_file: args.plan_file.clone(),
        region: args.region.clone(),
        extra: Default::default(),
    };
    let region = args.region.or_else(|| env("AWS_REGION")).ok_or_else(|| {
        usage("no Region: pass --region (the stack's Region, S) or set AWS_REGION".into())
    })?;
    let table = args
        .table
        .or_else(|| env("TABLE_NAME"))
        .ok_or_else(|| usage("no table: pass --table (the stack output StateTableName)".into()))?;
    // An explicit flag wins over the environment; two sources in the
    // environment are refused rather than picked between.
    let source = match (args.plan_parameter, args.plan_file) {
        (Some(name), None) => PlanSource::Parameter {
            name,
            region: region.clone(),
        },
        (None, Some(path)) => PlanSource::File(path),
        _ => match (env("PLAN_PARAMETER"), env("PLAN_FILE")) {
            (Some(name), None) => PlanSource::Parameter {
                name,
                region: region.clone(),
            },
            (None, Some(path)) => PlanSource::File(path),
            (Some(_), Some(_)) => return Err(usage(
                "both PLAN_PARAMETER and PLAN_FILE are set: pass --plan-parameter or --plan-file"
                    .into(),
            )),
            (None, None) => {
                return Err(usage(
                    "no plan: pass --plan-parameter (e.g. /handover/plan) or --plan-file".into(),
                ));
            }
        },
    };
    let aws = Aws::named(handover::aws::CLI_APP_NAME);
    let plan = source.load(&aws).await.map_err(|e| {
        // A throttled or unreachable SSM is worth a retry; a bad plan is not.
        let code = if e.error_name() == ErrorName::Transient {
            4
        } else {
            3
        };
        (code, format!("plan: {}", handover::error::chain(&e)))
    })?;
    let store = Store::new(aws.dynamodb(&region).await, table);
    Ok(Context {
        aws,
        region,
        store,
        plan,
    })
}

async fn init(args: InitArgs) -> Result<String, (u8, String)> {
    let Context {
        aws, store, plan, ..
    } = context(&args).await?;
    let p = Rds::new(&aws, &plan.regions.primary.region).await;
    let s = Rds::new(&aws, &plan.regions.standby.region).await;
    match init_primary_record(&plan, &p, &s, &store, chrono::Utc::now()).await {
        Ok(Initialised::Created(r)) => Ok(format!(
            "primary record written: {} in {} is primary at epoch {}",
            r.db_instance_id, r.region, r.epoch
        )),
        Ok(Initialised::AlreadyThere(r)) => Ok(format!(
            "primary record already there: {} in {} at epoch {} (nothing changed)",
            r.db_instance_id, r.region, r.epoch
        )),
        Err(
            e @ (InitError::NotFound { .. } | InitError::Ambiguous(_) | InitError::Conflict { .. }),
        ) => Err((3, format!("refused: {e}"))),
        Err(e) => Err((
            4,
            format!(
                "failed (nothing was written; retry): {}",
                handover::error::chain(&e)
            ),
        )),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.split_first() {
        Some((cmd, rest)) if cmd == "init" => match parse_init(rest) {
            Ok(a) => init(a).await,
            Err(m) => Err((2, format!("{m}\n{USAGE}"))),
        },
        Some((cmd, rest)) if cmd == "status" || cmd == "pause" || cmd == "resume" => {
            let flags = match cmd.as_str() {
                "status" => state::STATUS_FLAGS,
                "pause" => state::PAUSE_FLAGS,
                _ => state::RESUME_FLAGS,
            };
            match parse_args(rest, flags) {
                Ok(a) => match context(&a).await {
                    Ok(ctx) => match cmd.as_str() {
                        "status" => state::status(ctx, &a.extra).await,
                        "pause" => state::pause(ctx, &a.extra).await,
                        _ => state::resume(ctx, &a.extra).await,
                    },
                    Err(e) => Err(e),
                },
                Err(m) => Err((2, format!("{m}\n{USAGE}"))),
            }
        }
        Some((cmd, rest)) if cmd == "readiness" => match parse_args(rest, readiness::FLAGS) {
            Ok(a) => match context(&a).await {
                Ok(ctx) => readiness::readiness(ctx, &a.extra).await,
                Err(e) => Err(e),
            },
            Err(m) => Err((2, format!("{m}\n{USAGE}"))),
        },
        Some((cmd, rest)) if cmd == "approve" || cmd == "reject" => {
            let decision = if cmd == "approve" {
                handover::store::approval::Decision::Approve
            } else {
                handover::store::approval::Decision::Reject
            };
            match parse_args(rest, decide::FLAGS) {
                Ok(a) => decide::decide(&a, decision).await,
                Err(m) => Err((2, format!("{m}\n{USAGE}"))),
            }
        }
        Some((cmd, rest)) if cmd == "report" => match parse_args(rest, report::FLAGS) {
            Ok(a) => match table_context(&a).await {
                Ok(ctx) => report::report(ctx, &a.extra).await,
                Err(e) => Err(e),
            },
            Err(m) => Err((2, format!("{m}\n{USAGE}"))),
        },
        Some((cmd, rest)) if cmd == "release" => match parse_args(rest, release::FLAGS) {
            Ok(a) => match context(&a).await {
                Ok(ctx) => release::release(ctx, &a.extra).await,
                Err(e) => Err(e),
            },
            Err(m) => Err((2, format!("{m}\n{USAGE}"))),
        },
        Some((cmd, rest)) if cmd == "switchover" => match parse_args(rest, switchover::FLAGS) {
            Ok(a) => match context(&a).await {
                Ok(ctx) => switchover::switchover(ctx, &a.extra).await,
                Err(e) => Err(e),
            },
            Err(m) => Err((2, format!("{m}\n{USAGE}"))),
        },
        Some((cmd, rest)) if cmd == "failback" => match parse_args(rest, failback::FLAGS) {
            Ok(a) => match context(&a).await {
                Ok(ctx) => failback::failback(ctx, &a.extra).await,
                Err(e) => Err(e),
            },
            Err(m) => Err((2, format!("{m}\n{USAGE}"))),
        },
        Some((cmd, rest)) if cmd == "reprotect" => {
            match parse_args(rest, failback::REPROTECT_FLAGS) {
                Ok(a) => match context(&a).await {
                    Ok(ctx) => failback::reprotect_standby(ctx, &a.extra).await,
                    Err(e) => Err(e),
                },
                Err(m) => Err((2, format!("{m}\n{USAGE}"))),
            }
        }
        Some((cmd, rest)) if cmd == "rpo" => match parse_args(rest, rpo::FLAGS) {
            Ok(a) => match context(&a).await {
                Ok(ctx) => rpo::rpo(ctx, &a.extra).await,
                Err(e) => Err(e),
            },
            Err(m) => Err((2, format!("{m}\n{USAGE}"))),
        },
        Some((cmd, _)) if cmd == "--help" || cmd == "-h" || cmd == "help" => Ok(USAGE.to_owned()),
        Some((cmd, _)) => Err((2, format!("unknown command {cmd:?}\n{USAGE}"))),
        None => Err((2, USAGE.to_owned())),
    };
    match result {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        // Not ready is a result to read, not an error message.
        Err((code, text)) if code == readiness::NOT_READY => {
            println!("{text}");
            ExitCode::from(code)
        }
        Err((code, text)) => {
            eprintln!("handover: {text}");
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn init_arguments_parse_and_bad_ones_say_why() {
        let a = parse_init(&args(&["--table", "t", "--plan-parameter", "/p"])).unwrap();
        assert_eq!(a.table.as_deref(), Some("t"));
        assert_eq!(a.plan_parameter.as_deref(), Some("/p"));
        assert!(
            parse_init(&args(&["--table"]))
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            parse_init(&args(&["--force"]))
                .unwrap_err()
                .contains("unknown argument")
        );
        assert!(
            parse_init(&args(&["--plan-parameter", "/p", "--plan-file", "f"]))
                .unwrap_err()
                .contains("not both")
        );
    }

    #[test]
    fn a_commands_own_flags_parse_once_and_others_are_refused() {
        let a = parse_args(
            &args(&["--execution", "arn:x", "--p-port", "6543", "--table", "t"]),
            rpo::FLAGS,
        )
        .unwrap();
        assert_eq!(
            a.extra.get("--execution").map(String::as_str),
            Some("arn:x")
        );
        assert_eq!(a.extra.get("--p-port").map(String::as_str), Some("6543"));
        assert_eq!(a.table.as_deref(), Some("t"));
        assert!(
            parse_args(&args(&["--execution", "a", "--execution", "b"]), rpo::FLAGS)
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            parse_args(&args(&["--p-host"]), rpo::FLAGS)
                .unwrap_err()
                .contains("needs a value")
        );
        // init takes none of rpo's flags.
        assert!(
            parse_init(&args(&["--execution", "a"]))
                .unwrap_err()
                .contains("unknown argument")
        );
    }
}
