//! What the embedded and the remote runner of a command share: the client-side checks of
//! `nokv workbench` and `nokv append` input, the one path that runs a tool call on a
//! [`Store`] and prints its envelope, the progress bar of collect/materialize and the lines they print. A leaf of
//! this crate.

use std::io::{Read, Write};
use std::path::Path;

use nokv::client::Client;
use nokv::publication::parse_operation_id;
use nokv::workbench::errors::ToolError;
use nokv::workbench::schema;
use nokv::Store;
use nokv_commands::{envelope_exit_code, print_json, request_id_arg, EXIT_TOOL_ERROR, EXIT_USAGE};
use serde_json::Value;

/// A byte progress bar on stderr for collect/materialize; inert when `--quiet` or when stdout
/// is not a terminal.
pub(crate) struct Bar {
    enabled: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Bar {
    pub(crate) fn new(quiet: bool) -> Bar {
        use std::io::IsTerminal;
        Bar {
            enabled: !quiet && std::io::stdout().is_terminal(),
            bar: None,
        }
    }

    pub(crate) fn event(&mut self, event: nokv::materialize::ProgressEvent<'_>) {
        if !self.enabled {
            return;
        }
        match event {
            nokv::materialize::ProgressEvent::Begin { phase, path, total } => {
                if let Some(old) = self.bar.take() {
                    old.finish_and_clear();
                }
                let bar = indicatif::ProgressBar::new(total);
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_message(format!("{phase} {path}"));
                self.bar = Some(bar);
            }
            nokv::materialize::ProgressEvent::Advance { done } => {
                if let Some(bar) = &self.bar {
                    bar.set_position(done);
                }
            }
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// The client-side half of `nokv append`: checks the operation id and the positional argument,
/// then reads the bytes (`--file F`, else stdin). Errors: the envelope to print and the exit
/// code.
pub(crate) fn append_input(
    file: Option<&Path>,
    stdin: Option<&str>,
    operation_id: &str,
) -> std::result::Result<Vec<u8>, (ToolError, u8)> {
    if parse_operation_id(operation_id).is_none() {
        return Err((
            ToolError::invalid_arguments("--operation-id must be exactly 32 hex characters"),
            EXIT_USAGE,
        ));
    }
    if let Some(s) = stdin {
        if s != "-" {
            return Err((
                ToolError::invalid_arguments("the only positional input is `-` (stdin)"),
                EXIT_USAGE,
            ));
        }
    }
    match file {
        Some(f) if f != Path::new("-") => std::fs::read(f).map_err(|e| {
            (
                ToolError::invalid_arguments(format!(
                    "cannot read the input file {}: {}",
                    f.display(),
                    e.kind()
                ))
                .with_detail("file", Value::from(f.display().to_string())),
                EXIT_TOOL_ERROR,
            )
        }),
        _ => {
            let mut b = Vec::new();
            match std::io::stdin().read_to_end(&mut b) {
                Ok(_) => Ok(b),
                Err(e) => Err((
                    ToolError::invalid_arguments(format!("cannot read stdin: {}", e.kind())),
                    EXIT_TOOL_ERROR,
                )),
            }
        }
    }
}

/// Runs one checked tool call on `store` (embedded or remote), under the caller's request id
/// when one was given, prints its envelope and returns the exit code of the envelope: the one
/// `nokv workbench` path of both front doors.
pub(crate) fn run_tool(
    store: &dyn Store,
    name: &str,
    input: &Value,
    request_id: Option<[u8; 16]>,
    out: &mut dyn Write,
) -> u8 {
    let result = match request_id {
        Some(rid) => store.call_tool_with_request_id(name, input, rid),
        None => store.call_tool(name, input),
    };
    print_json(out, &result);
    envelope_exit_code(&result)
}

/// The `--request-id` of `nokv collect` (human output): a malformed one prints `nokv: …` on
/// stderr; the error is the usage exit code.
pub(crate) fn collect_request_id(
    request_id: Option<&str>,
) -> std::result::Result<Option<[u8; 16]>, u8> {
    request_id_arg(request_id).map_err(|(err, code)| {
        nokv_commands::eprint_error(err.message);
        code
    })
}

/// A failed collect as the CLI reports it: the refusals of a request id (bound to another
/// request; running right now) in the facade's words, as `--server` prints them; every other
/// error as it is.
pub(crate) fn collect_error(client: &Client, workbench: &str, e: nokv::Error) -> nokv::Error {
    match e {
        nokv::Error::Meta(
            meta::Error::OperationIntentMismatch { .. } | meta::Error::OperationState { .. },
        ) => {
            let t = nokv::workbench::tool_error(client, workbench, e);
            nokv::Error::OperationFailed {
                code: t.code.as_str().to_string(),
                message: t.message,
            }
        }
        other => other,
    }
}

/// `options` with the caller's request id (collect passes the file's publication options
/// through this before its put: the request id is the file's publication id).
pub(crate) fn with_request_id(
    options: &nokv::client::PutOptions,
    request_id: Option<[u8; 16]>,
) -> nokv::client::PutOptions {
    nokv::client::PutOptions {
        request_id,
        ..options.clone()
    }
}

/// A checked `nokv workbench` call: the canonical tool name, its input and the parsed
/// `--request-id`.
pub(crate) type WorkbenchCall = (&'static str, Value, Option<[u8; 16]>);

/// The client-side checks of `nokv workbench` (`--request-id`, tool name, JSON syntax, schema),
/// in that order — all before any store is touched, so a refused call opens, creates and writes
/// nothing. Errors: the envelope to print and the exit code.
pub(crate) fn workbench_input(
    tool: &str,
    input: Option<&str>,
    request_id: Option<&str>,
) -> std::result::Result<WorkbenchCall, (Value, u8)> {
    let request_id = request_id_arg(request_id).map_err(|(err, code)| (err.envelope(), code))?;
    let Some(name) = schema::canonical_tool_name(tool) else {
        return Err((ToolError::unknown_tool(tool).envelope(), EXIT_TOOL_ERROR));
    };
    let text = match input {
        None => "{}".to_string(),
        Some("-") => {
            let mut buf = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut buf) {
                let err = ToolError::invalid_arguments(format!("cannot read stdin: {e}"));
                return Err((err.envelope(), EXIT_USAGE));
            }
            buf
        }
        Some(s) => s.to_string(),
    };
    let input: Value = match serde_json::from_str(if text.trim().is_empty() { "{}" } else { &text })
    {
        Ok(v) => v,
        Err(e) => {
            let err =
                ToolError::invalid_arguments(format!("the tool input is not valid JSON: {e}"));
            return Err((err.envelope(), EXIT_USAGE));
        }
    };
    if let Err(err) = schema::validate(name, &input) {
        return Err((err.envelope(), EXIT_TOOL_ERROR));
    }
    Ok((name, input, request_id))
}

/// Prints the lines of a finished materialize (shared by the embedded and the remote path).
pub(crate) fn print_materialized(
    out: &mut dyn Write,
    files: &[nokv::materialize::MaterializedFile],
    dest: &Path,
) {
    let total: u64 = files.iter().map(|f| f.size_bytes).sum();
    for f in files {
        let _ = writeln!(out, "{}  {}  {} bytes", f.digest_uri, f.path, f.size_bytes);
    }
    let _ = writeln!(
        out,
        "materialized {} files ({total} bytes) into {}, digests verified",
        files.len(),
        dest.display()
    );
}

/// Prints the line of a finished collect (shared by the embedded and the remote path); a
/// replayed one (same `--request-id`) ends in `  idempotent replay`.
pub(crate) fn print_collected(out: &mut dyn Write, c: &nokv::materialize::CollectedFile) {
    let replay = if c.idempotent_replay {
        "  idempotent replay"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "{}  {}  {} bytes  generation {}{replay}",
        c.digest_uri, c.path, c.size_bytes, c.generation
    );
}

/// The checks `nokv collect` makes before anything is created or sent (index fields, the local
/// file, the path, `--index-json`): a refused collect leaves nothing behind. Returns the index
/// fields to publish with.
pub(crate) fn collect_precheck(
    file: &Path,
    path: &str,
    fields: &[String],
    index_json: bool,
) -> nokv::Result<nokv::materialize::CollectIndex> {
    let mut index = nokv::materialize::CollectIndex {
        index_json,
        ..Default::default()
    };
    for spec in fields {
        let (name, value) = nokv::index_fields::parse_field_arg(spec)?;
        index.fields.insert(name, value);
    }
    let meta = std::fs::metadata(file).map_err(|source| nokv::Error::LocalIo {
        op: "open",
        path: file.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Err(nokv::Error::InvalidArgument(format!(
            "{} is not a regular file",
            file.display()
        )));
    }
    Client::normalize(path)?;
    meta::index::projection::validate_index_fields(&index.fields)
        .map_err(|e| nokv::Error::InvalidArgument(e.to_string()))?;
    if index.index_json {
        if meta.len() > nokv::index_fields::MAX_INDEX_JSON_BYTES as u64 {
            return Err(nokv::Error::InvalidArgument(format!(
                "--index-json files are at most {} bytes",
                nokv::index_fields::MAX_INDEX_JSON_BYTES
            )));
        }
        let body = std::fs::read(file).map_err(|source| nokv::Error::LocalIo {
            op: "read",
            path: file.to_path_buf(),
            source,
        })?;
        nokv::index_fields::json_object_fields(&body)?;
    }
    Ok(index)
}
