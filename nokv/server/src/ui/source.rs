//! What a page reads and how: Workbench facade calls (the tools' own validation, paging and
//! error codes) and, for a file's bytes, the SDK's reader at the live state or at a snapshot —
//! the same calls as `/v1/` (`workbench_list`, `workbench_stat`, `workbench_read`,
//! `Client::snapshot_reader`, the download route's entry lookup `handler::entry_at`,
//! `Client::read_entry_range`).

use serde_json::{json, Map, Value};

use super::super::handler::entry_at;
use super::layout::Cx;
use nokv::snapshot::parse_selector;
use nokv::workbench::errors::ToolError;

/// Calls Workbench tool `tool` with `input`: the success envelope, or the error envelope's
/// message (`Code: message`).
pub(crate) fn tool(cx: &Cx, tool: &str, input: Value) -> Result<Value, String> {
    let out = cx.state.workbench.call(tool, &input);
    if out.get("status").and_then(Value::as_str) == Some("success") {
        Ok(out)
    } else {
        Err(super::layout::envelope_message(&out))
    }
}

/// A tool input object: `pairs` with `Null` values left out.
pub(crate) fn input(pairs: &[(&str, Value)]) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        if !v.is_null() {
            m.insert((*k).to_string(), v.clone());
        }
    }
    Value::Object(m)
}

/// The `at_snapshot` selector of a page parameter: a number is a snapshot id, other text a
/// name, absent the live state.
pub(crate) fn at_snapshot(at: Option<&str>) -> Value {
    match at {
        None => Value::Null,
        Some(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse::<u64>().map_or_else(|_| json!(s), |n| json!(n))
        }
        Some(s) => json!(s),
    }
}

/// A file opened for its bytes: the reader it was resolved at, its path and its entry.
pub(crate) struct OpenFile {
    /// The normalized workbench-relative path (with its section).
    pub(crate) path: meta::NormPath,
    /// The read state (live or the snapshot's).
    pub(crate) reader: meta::Reader,
    /// The file's PathCurrent entry at that state.
    pub(crate) entry: meta::PathEntry,
}

impl OpenFile {
    /// The read version the file was resolved at (download links pin it).
    pub(crate) fn version(&self) -> u64 {
        self.reader.version()
    }
}

fn message(e: ToolError) -> String {
    format!("{}: {}", e.code.as_str(), e.message)
}

/// Resolves `path` (workbench-relative, with its section) of `workbench` at snapshot `at` (the
/// live state when `None`).
///
/// Errors: the tool error's `Code: message` (unknown workbench, expired snapshot, no such
/// file, a directory).
pub(crate) fn open_file(
    cx: &Cx,
    workbench: &str,
    path: &str,
    at: Option<&str>,
) -> Result<OpenFile, String> {
    let client = &cx.state.client;
    let fail = |e: nokv::Error| message(nokv::workbench::tool_error(client, workbench, e));
    let norm = nokv::Client::normalize(path).map_err(fail)?;
    let reader = match at {
        None => client.meta().read(),
        Some(sel) => {
            let selector = parse_selector(sel).map_err(fail)?;
            client
                .snapshot_reader(workbench, &selector)
                .map_err(fail)?
                .1
        }
    };
    let entry = entry_at(client, &reader, workbench, &norm).map_err(message)?;
    Ok(OpenFile {
        path: norm,
        reader,
        entry,
    })
}

/// `len` bytes of `file` from `offset` (clamped to its size), each block verified.
///
/// Errors: the tool error's `Code: message` (`ObjectUnavailable` for a missing block).
pub(crate) fn read_range(
    cx: &Cx,
    workbench: &str,
    file: &OpenFile,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, String> {
    let size = file.entry.logical_size;
    if offset >= size || len == 0 {
        return Ok(Vec::new());
    }
    let len = len.min(size - offset);
    let client = &cx.state.client;
    client
        .read_entry_range(&file.reader, &file.entry, offset, len)
        .map_err(|e| message(nokv::workbench::tool_error(client, workbench, e)))
}
