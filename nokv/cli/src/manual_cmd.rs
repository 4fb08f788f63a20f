//! `nokv completions SHELL` and `nokv man [--dir DIR]`: a shell completion script and the man
//! pages, both generated from the clap command tree of [`crate::args::Cli`] at run time, so they
//! never drift from the commands and flags the binary accepts. Neither opens a store or talks to
//! a server.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use nokv_commands::{EXIT_OK, EXIT_TOOL_ERROR};

use crate::args::Cli;

/// Writes the completion script of `shell` for the `nokv` binary; returns the exit code (1 with
/// `nokv: …` on stderr when stdout fails; a closed pipe is a normal end).
pub(crate) fn run_completions(shell: clap_complete::Shell, out: &mut dyn Write) -> u8 {
    let mut cmd = Cli::command();
    // Generated into memory first: the generator treats a failed write as a bug.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "nokv", &mut script);
    written(out.write_all(&script).and_then(|()| out.flush()))
}

/// The exit code of writing generated text to stdout.
fn written(result: std::io::Result<()>) -> u8 {
    match result {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(e) => {
            eprintln!("nokv: writing to stdout failed: {}", e.kind());
            EXIT_TOOL_ERROR
        }
    }
}

/// `nokv man`: without `dir`, the `nokv(1)` page (roff: synopsis, description, global options,
/// the list of subcommands) on `out`; with `dir` (created when missing), one page per command
/// written there — `nokv.1`, `nokv-ls.1`, `nokv-snapshot-create.1`, … — and their paths listed
/// on `out`. Returns the exit code (1 with `nokv: …` on stderr when writing fails; a closed
/// pipe is a normal end).
pub(crate) fn run_man(dir: Option<&Path>, out: &mut dyn Write) -> u8 {
    let cmd = Cli::command();
    let result = (|| -> std::io::Result<()> {
        match dir {
            None => clap_mangen::Man::new(cmd).render(out)?,
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                clap_mangen::generate_to(cmd, dir)?;
                let mut pages: Vec<_> = std::fs::read_dir(dir)?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.extension().is_some_and(|x| x == "1")
                            && p.file_name()
                                .and_then(|n| n.to_str())
                                .is_some_and(|n| n.starts_with("nokv"))
                    })
                    .collect();
                pages.sort();
                for p in pages {
                    writeln!(out, "{}", p.display())?;
                }
            }
        }
        out.flush()
    })();
    written(result)
}
