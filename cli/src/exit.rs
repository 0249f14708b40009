//! How `handover` ends: one exit code per kind of outcome.
//!
//! A script reads the code, a person reads the text. The codes never change
//! meaning; docs/reference/cli.md lists them.

use std::process::ExitCode;

/// The exit code of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// It did what was asked.
    Done = 0,
    /// The command line was wrong (clap's own errors use this code too).
    Usage = 2,
    /// Refused: the world is not as the plan says, or the operator did not
    /// confirm. Nothing was written unless the text says otherwise (a
    /// decision whose key may have been consumed, a partial release).
    Refused = 3,
    /// An AWS call or the table failed. Retry.
    Failed = 4,
    /// Readiness found a check that fails.
    NotReady = 5,
    /// The run started, or may have, but a step after the start failed
    /// (the text says which). Running the command again could start a
    /// second run: look first (`handover status`).
    Started = 6,
}

impl Exit {
    /// The number the process exits with.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Every code, in order (for the reference page).
    pub const ALL: [Exit; 6] = [
        Exit::Done,
        Exit::Usage,
        Exit::Refused,
        Exit::Failed,
        Exit::NotReady,
        Exit::Started,
    ];

    /// What the code means, in one line.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Done => "done",
            Exit::Usage => {
                "usage: the command line or a value in it was wrong; nothing was written"
            }
            Exit::Refused => {
                "refused: the world is not as the plan says, or not confirmed; nothing was written unless the text says otherwise"
            }
            Exit::Failed => "failed: an AWS call or the table failed; retry",
            Exit::NotReady => "readiness found a check that fails",
            Exit::Started => {
                "started, or may have, but a step after the start failed: do not run the command again; look first"
            }
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}

/// A command that did not do what was asked: its exit code and its text.
pub type Failure = (Exit, String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_are_the_documented_numbers() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn the_help_names_every_code() {
        for e in Exit::ALL {
            let code = format!(" {} ", e.code());
            assert!(crate::args::EXIT_CODES.contains(&code), "{code}");
        }
    }

    #[test]
    fn clap_reports_a_usage_error_with_the_usage_code() {
        use clap::Parser;
        let e = crate::args::Cli::try_parse_from(["handover", "status", "--nope"]).unwrap_err();
        assert_eq!(e.exit_code(), i32::from(Exit::Usage.code()));
    }
}
