//! The generated part of docs/reference/cli.md: each command's `--help`
//! and the exit codes, rendered from clap's definition in `args.rs`.
//!
//! A test compares the page with what this renders. When a flag changes,
//! regenerate the page with `HANDOVER_WRITE_REFERENCE=1 cargo test -p
//! handover-cli reference`. Only the tests build it.

use crate::args::Cli;
use crate::exit::Exit;
use clap::CommandFactory;

/// Where the generated part starts in the page.
const BEGIN: &str = "<!-- generated from cli/src/args.rs: HANDOVER_WRITE_REFERENCE=1 cargo test -p handover-cli reference -->";
/// Where it ends.
const END: &str = "<!-- end of the generated part -->";

/// The generated Markdown: the exit codes, then every command's help.
fn render() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut out = String::from("## Exit codes\n\n| code | meaning |\n|---|---|\n");
    for e in Exit::ALL {
        out.push_str(&format!("| {} | {} |\n", e.code(), e.meaning()));
    }
    out.push_str("\n## Every command's help\n\n");
    out.push_str("What `handover <command> --help` prints.\n");
    // clap's own `help` command is left out: it prints what this page does.
    for sub in cli.get_subcommands_mut().filter(|s| s.get_name() != "help") {
        let help = sub.render_long_help().to_string();
        out.push_str(&format!(
            "\n### `handover {}`\n\n```text\n{}\n```\n",
            sub.get_name(),
            help.trim_end()
        ));
    }
    out
}

/// The page with its generated part replaced by `generated`.
fn splice(page: &str, generated: &str) -> Option<String> {
    let start = page.find(BEGIN)? + BEGIN.len();
    let end = page[start..].find(END)? + start;
    Some(format!(
        "{}\n\n{generated}\n{}",
        &page[..start],
        &page[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_path() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/cli.md")
    }

    #[test]
    fn the_reference_page_says_what_clap_says() {
        let page = std::fs::read_to_string(page_path()).expect("docs/reference/cli.md");
        let want = splice(&page, &render()).expect("the page has the generated markers");
        if std::env::var_os("HANDOVER_WRITE_REFERENCE").is_some() {
            std::fs::write(page_path(), &want).expect("write docs/reference/cli.md");
            return;
        }
        assert!(
            page == want,
            "docs/reference/cli.md is stale: run HANDOVER_WRITE_REFERENCE=1 cargo test -p handover-cli reference"
        );
    }

    #[test]
    fn every_command_and_code_is_on_the_page() {
        let md = render();
        for sub in Cli::command().get_subcommands() {
            assert!(md.contains(&format!("### `handover {}`", sub.get_name())));
        }
        for e in Exit::ALL {
            assert!(md.contains(&format!("| {} | {} |", e.code(), e.meaning())));
        }
    }

    #[test]
    fn splicing_keeps_what_is_written_by_hand() {
        let page = format!("intro\n{BEGIN}\nold\n{END}\noutro\n");
        let new = splice(&page, "new").unwrap();
        assert_eq!(new, format!("intro\n{BEGIN}\n\nnew\n{END}\noutro\n"));
        assert!(splice("no markers", "x").is_none());
    }
}
