//! `handover`: the operator's command line. It runs with the operator's own
//! AWS credentials (profile or environment) and reaches AWS through the same
//! adapters as the functions.
//!
//! The commands and their flags are in `args.rs`; `handover <command>
//! --help` prints them, and docs/reference/cli.md is generated from them.
//! Each command lives in its own module. How a command ends is one
//! [`exit::Exit`].

mod args;
mod decide;
mod exit;
mod failback;
mod readiness;
#[cfg(test)]
mod reference;
mod release;
mod report;
mod rpo;
mod state;
mod switchover;

use args::{Cli, Command, PlanArgs, TableArgs};
use clap::Parser;
use exit::{Exit, Failure};
use handover::adapters::Rds;
use handover::aws::Aws;
use handover::bootstrap::{InitError, Initialised, init_primary_record};
use handover::config::PlanSource;
use handover::error::{Classify, ErrorName};
use handover::store::Store;
use handover::store::approval::Decision;
use std::process::ExitCode;

pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `--execution`, or the last failover the primary record names; `none`
/// says why there is nothing to work on when it names none.
pub(crate) async fn execution_or_last(
    store: &Store,
    execution: Option<&String>,
    none: &str,
) -> Result<String, Failure> {
    match execution {
        Some(e) => Ok(e.clone()),
        None => store
            .primary()
            .await
            .map_err(|e| {
                (
                    Exit::Failed,
                    format!(
                        "failed (nothing was written; retry): {}",
                        handover::error::chain(&e)
                    ),
                )
            })?
            .and_then(|r| r.last_execution)
            .ok_or_else(|| (Exit::Refused, format!("refused: {none}"))),
    }
}

/// The Region and the table a command works on, without a plan (`report`
/// acts on the run's own plan, read from the execution).
pub(crate) struct TableContext {
    pub aws: Aws,
    pub region: String,
    pub store: Store,
}

/// A usage error: the command line lacks what the environment did not give.
pub(crate) fn usage(m: impl Into<String>) -> Failure {
    (Exit::Usage, m.into())
}

/// The Region: `--region`, else `AWS_REGION`.
pub(crate) fn region(at: &TableArgs) -> Result<String, Failure> {
    at.region
        .clone()
        .or_else(|| env("AWS_REGION"))
        .ok_or_else(|| usage("no Region: pass --region (the stack's Region, S) or set AWS_REGION"))
}

/// The table: `--table`, else `TABLE_NAME`.
fn table(at: &TableArgs) -> Result<String, Failure> {
    at.table
        .clone()
        .or_else(|| env("TABLE_NAME"))
        .ok_or_else(|| usage("no table: pass --table (the stack output StateTableName)"))
}

async fn table_context(at: &TableArgs) -> Result<TableContext, Failure> {
    let region = region(at)?;
    let table = table(at)?;
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

/// Where the plan is: a flag wins over the environment; two sources in
/// the environment are refused rather than picked between.
fn plan_source(args: &PlanArgs, region: &str) -> Result<PlanSource, Failure> {
    let parameter = |name: String| PlanSource::Parameter {
        name,
        region: region.to_owned(),
    };
    match (args.plan_parameter.clone(), args.plan_file.clone()) {
        (Some(name), _) => Ok(parameter(name)),
        (None, Some(path)) => Ok(PlanSource::File(path)),
        (None, None) => match (env("PLAN_PARAMETER"), env("PLAN_FILE")) {
            (Some(name), None) => Ok(parameter(name)),
            (None, Some(path)) => Ok(PlanSource::File(path)),
            (Some(_), Some(_)) => Err(usage(
                "both PLAN_PARAMETER and PLAN_FILE are set: pass --plan-parameter or --plan-file",
            )),
            (None, None) => Err(usage(
                "no plan: pass --plan-parameter (e.g. /handover/plan) or --plan-file",
            )),
        },
    }
}

async fn context(args: &PlanArgs) -> Result<Context, Failure> {
    let region = region(&args.at)?;
    let table = table(&args.at)?;
    let source = plan_source(args, &region)?;
    let aws = Aws::named(handover::aws::CLI_APP_NAME);
    let plan = source.load(&aws).await.map_err(|e| {
        // A throttled or unreachable SSM is worth a retry; a bad plan is not.
        let code = if e.error_name() == ErrorName::Transient {
            Exit::Failed
        } else {
            Exit::Refused
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

async fn init(args: &PlanArgs) -> Result<String, Failure> {
    let Context {
        aws, store, plan, ..
    } = context(args).await?;
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
        ) => Err((Exit::Refused, format!("refused: {e}"))),
        Err(e) => Err((
            Exit::Failed,
            format!(
                "failed (nothing was written; retry): {}",
                handover::error::chain(&e)
            ),
        )),
    }
}

/// Run the command clap parsed.
async fn run(command: Command) -> Result<String, Failure> {
    match command {
        Command::Init { at } => init(&at).await,
        Command::Status { json, at } => state::status(context(&at).await?, json).await,
        Command::Pause { reason, by, at } => state::pause(context(&at).await?, reason, by).await,
        Command::Resume { by, at } => state::resume(context(&at).await?, by).await,
        Command::Readiness {
            json,
            fence_role_arn,
            promote_role_arn,
            last,
            bucket,
            at,
        } => {
            let flags = readiness::Flags {
                json,
                fence_role_arn,
                promote_role_arn,
                last,
                bucket,
            };
            readiness::readiness(context(&at).await?, flags).await
        }
        Command::Approve {
            which,
            accept_data_loss,
        } => decide::decide(&which, Decision::Approve, accept_data_loss).await,
        Command::Reject { which } => decide::decide(&which, Decision::Reject, false).await,
        Command::Report {
            execution,
            format,
            render,
            at,
        } => {
            let ctx = table_context(&at).await?;
            report::report(ctx, execution, format, render).await
        }
        Command::Release { yes, at } => release::release(context(&at).await?, yes).await,
        Command::Switchover { start, at } => {
            switchover::switchover(context(&at).await?, &start).await
        }
        Command::Failback {
            start,
            accept_unmeasured_loss,
            reach,
            at,
        } => {
            let ctx = context(&at).await?;
            failback::failback(ctx, &start, accept_unmeasured_loss, &reach).await
        }
        Command::Reprotect { yes, at } => {
            failback::reprotect_standby(context(&at).await?, yes).await
        }
        Command::Rpo {
            execution,
            reach,
            at,
        } => rpo::rpo(context(&at).await?, execution, &reach).await,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // Help and version exit 0; a wrong command line exits 2 with clap's text.
    let cli = Cli::parse();
    match run(cli.command).await {
        Ok(text) => {
            println!("{text}");
            Exit::Done.into()
        }
        // Not ready is a result to read, not an error message.
        Err((Exit::NotReady, text)) => {
            println!("{text}");
            Exit::NotReady.into()
        }
        Err((code, text)) => {
            eprintln!("handover: {text}");
            code.into()
        }
    }
}
