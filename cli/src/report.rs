//! `handover report`: the after-action report of a run, as audit stored it
//! in the report bucket, or rebuilt from the execution history now
//! (`--render`), writing nothing.

use crate::TableContext;
use crate::args::Format;
use crate::exit::{Exit, Failure};
use handover::error::chain;
use handover::execution::ExecutionInput;
use handover::report::audit::render_from_history;
use handover::report::output::files;
use handover::report::sources::{ExecutionLookup, ReportReader, S3Reports, SfnHistory};

fn refused(m: impl std::fmt::Display) -> Failure {
    (Exit::Refused, format!("refused: {m}"))
}

fn failed(m: impl std::fmt::Display) -> Failure {
    (
        Exit::Failed,
        format!("failed (nothing was written; retry): {m}"),
    )
}

/// Print the report of `--execution` (default: the last run the primary
/// record names) in `--format` md (default), html or json.
pub async fn report(
    ctx: TableContext,
    execution: Option<String>,
    format: Format,
    render: bool,
) -> Result<String, Failure> {
    let file = format.file();
    let execution = crate::execution_or_last(
        &ctx.store,
        execution.as_ref(),
        "no --execution, and the primary record names no run Handover completed",
    )
    .await?;
    let history = SfnHistory::new(&ctx.aws, &ctx.region).await;
    let (status, input) = history
        .describe(&execution)
        .await
        .map_err(|e| failed(format!("reading the run: {}", chain(&e))))?;
    if !status.is_terminal() {
        return Err(refused(format!(
            "{execution} is still {}: its report is written when it ends (`handover status` shows where it is)",
            status.status
        )));
    }
    if render {
        let report = render_from_history(
            &ctx.aws,
            &ctx.store,
            &history,
            &execution,
            chrono::Utc::now(),
        )
        .await
        .map_err(|e| failed(format!("rebuilding the report: {}", chain(&e))))?;
        let body = files(&report)
            .into_iter()
            .find(|(name, ..)| *name == file)
            .map(|(.., body)| body)
            .unwrap_or_default();
        return Ok(body);
    }
    let input: ExecutionInput = serde_json::from_str(&input)
        .map_err(|e| failed(format!("the run's input is not Handover's: {e}")))?;
    let plan = &input.plan;
    let key = format!("{}{}/{file}", plan.report.prefix, input.incident_id);
    let s3 = S3Reports::new(&ctx.aws, &plan.regions.standby.region).await;
    match s3.get(&plan.report.bucket, &key).await {
        Ok(Some(bytes)) => String::from_utf8(bytes).map_err(|e| {
            failed(format!(
                "s3://{}/{key} is not UTF-8: {e}",
                plan.report.bucket
            ))
        }),
        Ok(None) => Err(refused(format!(
            "no report at s3://{}/{key} (audit has not written it, or it failed): `--render` rebuilds it from the history without writing",
            plan.report.bucket
        ))),
        // Without s3:ListBucket (the on-call policy grants none), S3 answers
        // a missing key with AccessDenied rather than NoSuchKey.
        Err(e) if e.code() == Some("AccessDenied") => Err(refused(format!(
            "s3://{}/{key} could not be read (AccessDenied: missing, or not granted): `--render` rebuilds it from the history without writing",
            plan.report.bucket
        ))),
        Err(e) => Err(failed(chain(&e))),
    }
}
