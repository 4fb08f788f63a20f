//! `nokv cat WB PATH`: the body of one file on stdout, streamed block by block (memory bounded
//! by one block), every block verified against its SHA-256 before a byte of it is written.
//!
//! Embedded and through `--server` alike, the file is found in the listing `nokv materialize`
//! uses ([`nokv::materialize::list_files`] / `RemoteClient::list_files`: one read version), so a
//! missing path is `NotFound`, a directory is refused with the files below it named by count,
//! and the body printed is the one of that read version, however the path changes meanwhile.
//! Failures print `nokv: …` on stderr and exit 1; a reader that closes the pipe early
//! (`nokv cat … | head`) ends the command quietly with exit 0.

use std::io::Write;
use std::path::Path;

use clap::Args;
use nokv::client::Client;
use nokv_commands::{read_only, EXIT_OK, EXIT_TOOL_ERROR};
use nokv_remote::RemoteClient;

/// `nokv cat` arguments.
#[derive(Debug, Clone, Args)]
pub struct CatArgs {
    /// Workbench id.
    pub workbench: String,
    /// File path relative to the workbench root, e.g. `outputs/summary.json`.
    pub path: String,
}

/// The one listed file at `path`, or why there is none.
fn the_file(
    path: &str,
    files: Vec<(meta::NormPath, meta::PathEntry)>,
) -> nokv::Result<(meta::NormPath, meta::PathEntry)> {
    let wanted = Client::normalize(path)?;
    let count = files.len();
    let noun = if count == 1 { "file" } else { "files" };
    match files.into_iter().find(|(p, _)| *p == wanted) {
        Some(found) => Ok(found),
        None => Err(nokv::Error::InvalidArgument(format!(
            "`{}` is a directory ({count} {noun} below it); name a file, or use `nokv ls` / \
             `nokv tree`",
            wanted.as_str()
        ))),
    }
}

/// The exit code of a finished `cat`: a closed pipe is a normal end.
fn finish(result: nokv::Result<u64>, message: impl FnOnce(nokv::Error) -> String) -> u8 {
    match result {
        Ok(_) => EXIT_OK,
        Err(nokv::Error::LocalIo { source, .. })
            if source.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            EXIT_OK
        }
        Err(e) => {
            nokv_commands::eprint_error(message(e));
            EXIT_TOOL_ERROR
        }
    }
}

/// Runs `nokv cat` on the store in `dir` (opened read-only); returns the exit code.
pub(crate) fn run_cat(dir: &Path, args: &CatArgs, out: &mut dyn Write) -> u8 {
    let client = match read_only::open_existing(dir, true) {
        Ok(c) => c,
        Err(e) => {
            nokv_commands::eprint_error(nokv::workbench::store_error(e).message);
            return EXIT_TOOL_ERROR;
        }
    };
    let result = (|| {
        let (_, files) = nokv::materialize::list_files(&client, &args.workbench, Some(&args.path))?;
        let (_, entry) = the_file(&args.path, files)?;
        // The entry's revision and its manifest are immutable: any later reader reads them.
        let written = client.read_to_writer(&client.meta().read(), &entry, out, &mut |_| {})?;
        flush(out)?;
        Ok(written)
    })();
    finish(result, |e| {
        nokv::workbench::tool_error(&client, &args.workbench, e).message
    })
}

/// Runs `nokv cat` through a `nokv serve` server; returns the exit code.
pub(crate) fn run_cat_remote(remote: &RemoteClient, args: &CatArgs, out: &mut dyn Write) -> u8 {
    let result = (|| {
        let (version, files) = remote.list_files(&args.workbench, Some(&args.path))?;
        let (path, _) = the_file(&args.path, files)?;
        let written =
            remote.read_to_writer_at(&args.workbench, path.as_str(), version, out, &mut |_| {})?;
        flush(out)?;
        Ok(written)
    })();
    // The server's refusals arrive as their tool messages; the local ones are shaped alike.
    finish(result, |e| match e {
        nokv::Error::InvalidArgument(message) => message,
        other => other.to_string(),
    })
}

fn flush(out: &mut dyn Write) -> nokv::Result<()> {
    out.flush().map_err(|source| nokv::Error::LocalIo {
        op: "write",
        path: std::path::PathBuf::from("<output>"),
        source,
    })
}
