//! The command line as clap reads it.
//!
//! Each command's flags are typed here. The command modules receive them
//! parsed and never see a string. `handover <command> --help` prints what
//! is written here, and docs/reference/cli.md is generated from it.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Handover's operator command line.
///
/// It runs with your own AWS credentials (a profile or the environment),
/// in the stack's Region (S) unless you say otherwise.
#[derive(Debug, Parser)]
#[command(name = "handover", version, propagate_version = true)]
#[command(after_help = EXIT_CODES)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The exit codes, as `--help` shows them (see `exit::Exit`).
pub const EXIT_CODES: &str = "Exit codes: 0 done, 2 usage, 3 refused (nothing written unless \
the text says otherwise), 4 an AWS call or the table failed (retry), 5 readiness found a \
check that fails, 6 the run started or may have, but a step after failed (look first: do \
not run the command again).";

/// Where the state table is.
#[derive(Debug, Clone, Default, Args)]
pub struct TableArgs {
    /// The state table (the stack output StateTableName) [default: $TABLE_NAME]
    #[arg(long, value_name = "TABLE")]
    pub table: Option<String>,
    /// The stack's Region, S [default: $AWS_REGION]
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
}

/// Where the state table and the plan are.
#[derive(Debug, Clone, Default, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub at: TableArgs,
    /// The plan's SSM parameter, e.g. /handover/plan [default: $PLAN_PARAMETER]
    #[arg(long, value_name = "NAME", conflicts_with = "plan_file")]
    pub plan_parameter: Option<String>,
    /// A plan file, JSON or JSONC [default: $PLAN_FILE]
    #[arg(long, value_name = "PATH")]
    pub plan_file: Option<String>,
}

/// Where each database is reached, when not at its RDS endpoint (a tunnel
/// to a fenced P, say).
#[derive(Debug, Clone, Default, Args)]
pub struct DbReach {
    /// P's database host
    #[arg(long, value_name = "HOST")]
    pub p_host: Option<String>,
    /// P's database port
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub p_port: Option<u16>,
    /// S's database host
    #[arg(long, value_name = "HOST")]
    pub s_host: Option<String>,
    /// S's database port
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub s_port: Option<u16>,
}

/// Starting a run of the state machine.
#[derive(Debug, Clone, Default, Args)]
pub struct StartArgs {
    /// The state machine (the stack output StateMachineArn) [default: $STATE_MACHINE_ARN]
    #[arg(long, value_name = "ARN")]
    pub state_machine: Option<String>,
    /// Start without asking to type the command's name
    #[arg(long)]
    pub yes: bool,
    /// Mark the run a drill (its report says so)
    #[arg(long)]
    pub drill: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the primary record from RDS reality (part of deploying).
    Init {
        #[command(flatten)]
        at: PlanArgs,
    },
    /// The primary and its epoch, a transition, the lock and cooldown, P's
    /// probes, the pause flag and the last readiness.
    Status {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Stop detect from starting failovers. It goes on probing.
    Pause {
        /// Why (shown in `handover status` and to whoever wonders why nothing fails over)
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Who pauses [default: $USER]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Let detect start failovers again.
    Resume {
        /// Who resumes [default: $USER]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Would a failover work now? Every check, with its verdict and fix.
    ///
    /// Read calls only. The fence and promote roles are simulated with IAM's
    /// policy simulator. With --last, print the result the readiness
    /// function stored instead, evaluating nothing.
    Readiness {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        /// The fence role to simulate (the stack output FenceRoleArn)
        #[arg(long, value_name = "ARN")]
        fence_role_arn: Option<String>,
        /// The promote role to simulate (the stack output PromoteRoleArn)
        #[arg(long, value_name = "ARN")]
        promote_role_arn: Option<String>,
        /// Print the latest stored result (readiness/latest.json)
        #[arg(long)]
        last: bool,
        /// The report bucket, with --last (the stack output ReportBucketName) [default: the plan's, else $HANDOVER_REPORT_BUCKET]
        #[arg(long, value_name = "BUCKET")]
        bucket: Option<String>,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Approve a waiting failover when Slack cannot.
    ///
    /// The request is signed with your credentials and decided on the
    /// server: the same single-use key as a click, your IAM principal
    /// checked against the plan's cli_approvers. Name the approval with
    /// --key, --execution or --incident; with none of them, it is the
    /// failover holding the lock in the table.
    Approve {
        #[command(flatten)]
        which: DecideArgs,
        /// Accept the possible data loss the question names
        #[arg(long)]
        accept_data_loss: bool,
    },
    /// Reject a waiting failover when Slack cannot.
    ///
    /// Decided on the server as approve is. Name the approval with --key,
    /// --execution or --incident; with none of them, it is the failover
    /// holding the lock in the table.
    Reject {
        #[command(flatten)]
        which: DecideArgs,
    },
    /// Print the after-action report of a run, or rebuild it.
    Report {
        /// The run [default: the last run the primary record names]
        #[arg(long, value_name = "ARN")]
        execution: Option<String>,
        /// The report's format
        #[arg(long, value_enum, default_value_t = Format::Md)]
        format: Format,
        /// Rebuild it from the execution history now, writing nothing
        #[arg(long)]
        render: bool,
        #[command(flatten)]
        at: TableArgs,
    },
    /// Clear a transition or lock that an ended run left.
    ///
    /// It shows what holds it and checks that its execution has closed. A
    /// transition goes through audit's compensation: P is unfenced when
    /// nothing was promoted.
    Release {
        /// Release without asking to type `release`
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Start a planned switchover P → S with RPO 0.
    Switchover {
        #[command(flatten)]
        start: StartArgs,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Go back to P after a failover: re-protect, compare, switch back.
    Failback {
        #[command(flatten)]
        start: StartArgs,
        /// Go on when the failover's loss was never measured (`handover rpo`)
        #[arg(long)]
        accept_unmeasured_loss: bool,
        #[command(flatten)]
        reach: DbReach,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Give the primary a replica in the other Region, under the standby's
    /// identifier.
    Reprotect {
        /// Start without asking to type `reprotect`
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        at: PlanArgs,
    },
    /// Measure on both databases what S never got in a failover.
    ///
    /// It keeps the measurement in the table and rewrites the run's report
    /// with it next to the estimate.
    Rpo {
        /// The failover [default: the last one the primary record names]
        #[arg(long, value_name = "ARN")]
        execution: Option<String>,
        #[command(flatten)]
        reach: DbReach,
        #[command(flatten)]
        at: PlanArgs,
    },
}

/// Which approval to decide, and how.
#[derive(Debug, Clone, Default, Args)]
pub struct DecideArgs {
    /// The approval's short key (in the Slack message)
    // URL-safe base64 may start with '-': it is the key, not a flag.
    #[arg(
        long,
        value_name = "KEY",
        group = "approval",
        allow_hyphen_values = true
    )]
    pub key: Option<String>,
    /// The waiting run
    #[arg(long, value_name = "ARN", group = "approval")]
    pub execution: Option<String>,
    /// The incident id
    #[arg(long, value_name = "ID", group = "approval")]
    pub incident: Option<String>,
    /// The decision endpoint (the stack output DecisionUrl) [default: $HANDOVER_DECISION_URL]
    #[arg(long, value_name = "URL")]
    pub decision_url: Option<String>,
    /// Decide without asking to type the decision
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub at: TableArgs,
}

/// The formats of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Markdown (report.md)
    #[value(alias = "markdown")]
    Md,
    /// HTML (report.html)
    Html,
    /// JSON (report.json)
    Json,
}

impl Format {
    /// The stored file of this format.
    pub fn file(self) -> &'static str {
        match self {
            Format::Md => "report.md",
            Format::Html => "report.html",
            Format::Json => "report.json",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("handover").chain(a.iter().copied()))
    }

    #[test]
    fn the_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn common_and_own_flags_parse_typed() {
        let Command::Rpo {
            execution,
            reach,
            at,
        } = parse(&[
            "rpo",
            "--execution",
            "arn:x",
            "--p-port",
            "6543",
            "--table",
            "t",
        ])
        .unwrap()
        .command
        else {
            panic!("not rpo");
        };
        assert_eq!(execution.as_deref(), Some("arn:x"));
        assert_eq!(reach.p_port, Some(6543));
        assert_eq!(at.at.table.as_deref(), Some("t"));
    }

    /// One key in 64 starts with '-' (URL-safe base64): still the key.
    #[test]
    fn a_key_that_starts_with_a_hyphen_is_the_key() {
        let Command::Approve { which, .. } =
            parse(&["approve", "--key", "-MkZ8w"]).unwrap().command
        else {
            panic!("not approve");
        };
        assert_eq!(which.key.as_deref(), Some("-MkZ8w"));
    }

    #[test]
    fn bad_command_lines_are_refused_with_the_reason() {
        let cases: &[(&[&str], &str)] = &[
            (&["init", "--table"], "a value is required"),
            (&["init", "--force"], "unexpected argument"),
            (
                &["init", "--plan-parameter", "/p", "--plan-file", "f"],
                "cannot be used with",
            ),
            (
                &["rpo", "--execution", "a", "--execution", "b"],
                "cannot be used multiple times",
            ),
            (&["rpo", "--p-port", "70000"], "invalid value"),
            (&["init", "--execution", "a"], "unexpected argument"),
            (&["reject", "--accept-data-loss"], "unexpected argument"),
            (
                &["approve", "--key", "k", "--incident", "i"],
                "cannot be used with",
            ),
            (&["report", "--plan-file", "f"], "unexpected argument"),
            (&["report", "--format", "pdf"], "invalid value"),
            (&["frobnicate"], "unrecognized subcommand"),
        ];
        for (line, why) in cases {
            let e = parse(line).expect_err(&format!("{line:?} parsed"));
            assert_eq!(e.exit_code(), 2, "{line:?}");
            assert!(e.to_string().contains(why), "{line:?}: {e}");
        }
    }

    #[test]
    fn each_command_has_its_own_help() {
        for name in [
            "init",
            "status",
            "pause",
            "resume",
            "readiness",
            "approve",
            "reject",
            "report",
            "release",
            "switchover",
            "failback",
            "reprotect",
            "rpo",
        ] {
            let e = parse(&[name, "--help"]).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{name}");
            assert_eq!(e.exit_code(), 0, "{name}");
            assert!(
                e.to_string().contains(&format!("handover {name}")),
                "{name}: {e}"
            );
        }
    }
}
