//! `workbench_list`, `workbench_stat`, `workbench_read`, `workbench_grep` (live state).

use base64::Engine as _;
use meta::{NormPath, PathEntry, Reader, WorkspaceCurrent};
use serde_json::{Map, Value};

use super::cursor::{self, CursorState, Fence};
use super::error_map::tool_error;
use super::facade::Workbench;
use super::grep as grep_match;
use super::scope::{opt_bool, opt_str, opt_u64, present, req_str, split_section, Scope};
use super::shape;
use crate::client::{Client, SECTIONS};
use nokv_protocol::errors::{ToolError, ToolResult};

/// grep budget: files scanned per call.
const GREP_MAX_FILES: u64 = 10_000;
/// grep budget: bytes scanned per call.
const GREP_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// Page size of the metadata scans behind grep (entries per engine call).
const SCAN_PAGE: usize = 255;

fn visible(client: &Client, read: &Reader, id: &str) -> ToolResult<WorkspaceCurrent> {
    read.visible_workspace(id)
        .map_err(|e| tool_error(client, id, e.into()))
}

/// The reader and workspace marker of a list/stat/read call: the live state, or the frozen
/// state of `at_snapshot` (holt `view_at` at the snapshot's read version) with its fence.
fn view(
    wb: &Workbench,
    id: &str,
    args: &Map<String, Value>,
) -> ToolResult<(Reader, WorkspaceCurrent, Option<Fence>)> {
    let client = wb.client();
    match super::snapshot_tools::open_snapshot(wb, id, args.get("at_snapshot"))? {
        None => {
            let read = client.meta().read();
            let ws = visible(client, &read, id)?;
            Ok((read, ws, None))
        }
        Some((info, read)) => {
            let ws = visible(client, &read, id)?;
            if ws.incarnation != info.incarnation {
                return Err(ToolError::new(
                    nokv_protocol::errors::ErrorCode::SnapshotNotFound,
                    format!("no such snapshot in workbench `{id}`"),
                ));
            }
            let fence = Fence::Snapshot {
                read_version: info.record.read_version,
            };
            Ok((read, ws, Some(fence)))
        }
    }
}

/// Echoes `at_snapshot` into a result when the call gave one.
fn echo_snapshot(out: &mut Map<String, Value>, args: &Map<String, Value>) {
    if let Some(sel) = args.get("at_snapshot").filter(|v| !v.is_null()) {
        out.insert("at_snapshot".into(), sel.clone());
    }
}

fn meta_err<'a>(client: &'a Client, id: &'a str) -> impl Fn(meta::Error) -> ToolError + 'a {
    move |e| tool_error(client, id, e.into())
}

/// The live fence of a cursor: the workspace incarnation (as a digest — cursors are opaque but
/// decodable, and no storage identity may leave the store) and the workspace revision.
fn live_fence(ws: &WorkspaceCurrent) -> Fence {
    let digest = cursor::scope_digest(&[b"nokv.cursor.incarnation.v1", ws.incarnation.as_bytes()]);
    Fence::Live {
        incarnation_hex: objstore::hex_lower(&digest[..16]),
        workspace_revision: ws.workspace_revision,
    }
}

/// Decodes a list/grep cursor and checks its live fence against the current workspace.
fn resume(
    wb: &Workbench,
    tool: &str,
    digest: &[u8; 32],
    cursor: Option<&str>,
    ws: &WorkspaceCurrent,
) -> ToolResult<Option<CursorState>> {
    let Some(raw) = cursor else { return Ok(None) };
    let state = cursor::decode_cursor(wb.cursor_key(), tool, digest, raw)?;
    state.check_fence(&live_fence(ws))?;
    Ok(Some(state))
}

/// Decodes a list cursor and checks it against an explicit fence (live or snapshot).
fn resume_at(
    wb: &Workbench,
    tool: &str,
    digest: &[u8; 32],
    cursor: Option<&str>,
    fence: &Fence,
) -> ToolResult<Option<CursorState>> {
    let Some(raw) = cursor else { return Ok(None) };
    let state = cursor::decode_cursor(wb.cursor_key(), tool, digest, raw)?;
    state.check_fence(fence)?;
    Ok(Some(state))
}

fn entry_json(
    client: &Client,
    id: &str,
    full: &NormPath,
    name: &str,
    file: Option<&PathEntry>,
) -> Value {
    let (section, relative) = split_section(full);
    let mut m = Map::new();
    m.insert("name".into(), Value::from(name));
    m.insert("path".into(), Value::from(present(client, id, Some(full))));
    m.insert("section".into(), section.map_or(Value::Null, Value::from));
    m.insert(
        "relative_path".into(),
        relative.map_or(Value::Null, Value::from),
    );
    m.insert(
        "kind".into(),
        Value::from(if file.is_some() { "file" } else { "directory" }),
    );
    m.insert(
        "size_bytes".into(),
        file.map_or(Value::Null, |e| Value::from(e.logical_size)),
    );
    m.insert("entry_count".into(), Value::Null);
    Value::Object(m)
}

pub(super) fn list(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let scope = Scope::resolve(id, opt_str(args, "section"), opt_str(args, "path"))?;
    let limit = opt_u64(args, "limit")?.unwrap_or(100) as usize;
    let client = wb.client();
    let (read, ws, frozen) = view(wb, id, args)?;
    let fence = frozen.clone().unwrap_or_else(|| live_fence(&ws));
    let view_tag = match &frozen {
        Some(Fence::Snapshot { read_version }) => format!("snapshot:{read_version}"),
        _ => "live".to_string(),
    };
    let me = meta_err(client, id);
    // The listed directory must exist (sections and the root always do).
    if let Some(full) = &scope.full {
        let is_section = full.len_components() == 1 && SECTIONS.contains(&full.as_str());
        if !is_section {
            if read
                .path_entry(&ws.incarnation, full)
                .map_err(&me)?
                .is_some()
            {
                return Err(ToolError::not_directory(&present(client, id, Some(full))));
            }
            if !read.has_descendants(&ws.incarnation, full).map_err(&me)? {
                return Err(ToolError::not_found(&present(client, id, Some(full))));
            }
        }
    }
    let digest = cursor::scope_digest(&[
        b"workbench_list",
        id.as_bytes(),
        scope
            .full
            .as_ref()
            .map_or(b"" as &[u8], |p| p.as_str().as_bytes()),
        view_tag.as_bytes(),
    ]);
    let anchor = resume_at(
        wb,
        "workbench_list",
        &digest,
        opt_str(args, "cursor"),
        &fence,
    )?
    .map(|s| s.anchor);
    let page = read
        .list_children(
            &ws.incarnation,
            scope.full.as_ref(),
            anchor.as_deref(),
            limit + 1,
        )
        .map_err(&me)?;
    // (name, file entry)
    let mut items: Vec<(String, Option<PathEntry>)> =
        page.items.into_iter().map(|c| (c.name, c.file)).collect();
    if scope.full.is_none() {
        // Sections are virtual directories of the root and cannot be shadowed.
        for sec in SECTIONS {
            if anchor.as_deref().is_none_or(|a| sec > a) && !items.iter().any(|(n, _)| n == sec) {
                items.push((sec.to_string(), None));
            }
        }
        items.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    }
    let more = items.len() > limit || page.more;
    items.truncate(limit);
    let entries: Vec<Value> = items
        .iter()
        .map(|(name, file)| {
            let full = match &scope.full {
                None => meta::normalize(name),
                Some(dir) => dir.join(name),
            };
            match full {
                Ok(full) => entry_json(client, id, &full, name, file.as_ref()),
                Err(_) => Value::Null,
            }
        })
        .collect();
    let next_cursor = if more {
        items.last().map(|(name, _)| {
            cursor::encode_cursor(
                wb.cursor_key(),
                &CursorState {
                    tool: "workbench_list".into(),
                    scope_digest: digest,
                    fence: fence.clone(),
                    anchor: name.clone(),
                    extra: Value::Null,
                },
            )
        })
    } else {
        None
    };
    let mut out = scope.fields(client);
    out.insert("entry_count".into(), Value::from(entries.len()));
    out.insert("entries".into(), Value::from(entries));
    out.insert("truncated".into(), Value::from(next_cursor.is_some()));
    out.insert(
        "next_cursor".into(),
        next_cursor.map_or(Value::Null, Value::from),
    );
    echo_snapshot(&mut out, args);
    Ok(out)
}

fn card(
    client: &Client,
    id: &str,
    scope: &Scope,
    file: Option<&PathEntry>,
    dir_generation: u64,
) -> Value {
    let name = match &scope.full {
        None => id.to_string(),
        Some(p) => p.file_name().to_string(),
    };
    let mut m = Map::new();
    m.insert("name".into(), Value::from(name));
    m.insert(
        "path".into(),
        Value::from(present(client, id, scope.full.as_ref())),
    );
    m.insert(
        "section".into(),
        scope.section.map_or(Value::Null, Value::from),
    );
    m.insert(
        "relative_path".into(),
        scope.relative.clone().map_or(Value::Null, Value::from),
    );
    m.insert(
        "kind".into(),
        Value::from(if file.is_some() { "file" } else { "directory" }),
    );
    m.insert(
        "size_bytes".into(),
        file.map_or(Value::Null, |e| Value::from(e.logical_size)),
    );
    m.insert("entry_count".into(), Value::Null);
    m.insert("record_count".into(), Value::Null);
    m.insert(
        "generation".into(),
        Value::from(file.map_or(dir_generation, |e| e.generation)),
    );
    m.insert(
        "content_type".into(),
        file.map_or(Value::Null, |e| Value::from(e.content_type.clone())),
    );
    m.insert(
        "digest_uri".into(),
        file.map_or(Value::Null, |e| Value::from(e.body_digest_uri.clone())),
    );
    m.insert(
        "producer".into(),
        file.map_or(Value::Null, |e| Value::from(e.producer.clone())),
    );
    m.insert(
        "manifest_id".into(),
        file.and_then(|e| e.manifest_id.clone())
            .map_or(Value::Null, Value::from),
    );
    Value::Object(m)
}

pub(super) fn stat(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let scope = Scope::resolve(id, opt_str(args, "section"), opt_str(args, "path"))?;
    let client = wb.client();
    let (read, ws, _) = view(wb, id, args)?;
    let me = meta_err(client, id);
    let card = match &scope.full {
        None => card(client, id, &scope, None, ws.workspace_revision),
        Some(full) if full.len_components() == 1 && SECTIONS.contains(&full.as_str()) => {
            card(client, id, &scope, None, ws.workspace_revision)
        }
        Some(full) => match read.path_entry(&ws.incarnation, full).map_err(&me)? {
            Some(entry) => card(client, id, &scope, Some(&entry), 0),
            None if read.has_descendants(&ws.incarnation, full).map_err(&me)? => {
                card(client, id, &scope, None, ws.workspace_revision)
            }
            None => return Err(ToolError::not_found(&present(client, id, Some(full)))),
        },
    };
    let mut out = scope.fields(client);
    out.insert("card".into(), card);
    echo_snapshot(&mut out, args);
    Ok(out)
}

pub(super) fn read(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let scope = Scope::resolve_file(id, opt_str(args, "section"), req_str(args, "path")?)?;
    let format = opt_str(args, "format").unwrap_or("structured");
    let limit = opt_u64(args, "limit")?.unwrap_or(100);
    let offset = opt_u64(args, "offset")?;
    let cursor_in = opt_str(args, "cursor");
    let client = wb.client();
    let (read, ws, _) = view(wb, id, args)?;
    let me = meta_err(client, id);
    let full = scope
        .full
        .clone()
        .ok_or_else(|| ToolError::invalid_arguments("path must name a file"))?;
    let presented = present(client, id, Some(&full));
    let entry = match read.path_entry(&ws.incarnation, &full).map_err(&me)? {
        Some(e) => e,
        None if read.has_descendants(&ws.incarnation, &full).map_err(&me)? => {
            return Err(ToolError::not_artifact(&presented))
        }
        None => return Err(ToolError::not_found(&presented)),
    };
    let mut out = scope.fields(client);
    echo_snapshot(&mut out, args);
    if opt_u64(args, "if_none_match")? == Some(entry.generation) {
        out.insert("not_modified".into(), Value::from(true));
        out.insert("generation".into(), Value::from(entry.generation));
        return Ok(out);
    }
    out.insert("generation".into(), Value::from(entry.generation));
    out.insert("total_size_bytes".into(), Value::from(entry.logical_size));
    out.insert("format".into(), Value::from(format));
    if format == "bytes" {
        let (start, end, next) = shape::byte_range(entry.logical_size, offset, cursor_in, limit)?;
        let bytes = client
            .read_entry_range(&read, &entry, start, end - start)
            .map_err(|e| tool_error(client, id, e))?;
        out.insert("record_type".into(), Value::Null);
        out.insert("record_count".into(), Value::Null);
        out.insert(
            "cursor".into(),
            Value::from(cursor_in.map_or_else(|| format!("b:{start}"), str::to_string)),
        );
        out.insert("items".into(), Value::Array(Vec::new()));
        out.insert(
            "bytes".into(),
            Value::from(base64::engine::general_purpose::STANDARD.encode(&bytes)),
        );
        out.insert("bytes_encoding".into(), Value::from("base64"));
        out.insert("truncated".into(), Value::from(next.is_some()));
        out.insert("next_cursor".into(), next.map_or(Value::Null, Value::from));
        return Ok(out);
    }
    if offset.is_some() {
        return Err(ToolError::invalid_arguments(
            "offset is only allowed with format=bytes; structured reads page with cursor r:N",
        ));
    }
    if entry.logical_size > shape::MAX_STRUCTURED_BYTES {
        return Err(ToolError::resource_exhausted(
            "workbench_read",
            "structured_body_bytes",
            shape::MAX_STRUCTURED_BYTES,
        ));
    }
    let body = client
        .read_entry(&read, &entry)
        .map_err(|e| tool_error(client, id, e))?;
    let structured = shape::decode_structured(&presented, &entry.content_type, &body)?;
    let record_count = structured.records.len();
    let (items, next) = shape::page_records(&structured.records, cursor_in, limit)?;
    out.insert("record_type".into(), Value::from(structured.record_type));
    out.insert("record_count".into(), Value::from(record_count));
    out.insert(
        "cursor".into(),
        Value::from(cursor_in.unwrap_or("r:0").to_string()),
    );
    out.insert("items".into(), Value::from(items));
    out.insert("bytes".into(), Value::Null);
    out.insert("bytes_encoding".into(), Value::Null);
    out.insert("truncated".into(), Value::from(next.is_some()));
    out.insert("next_cursor".into(), next.map_or(Value::Null, Value::from));
    Ok(out)
}

pub(super) fn grep(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let pattern = req_str(args, "pattern")?;
    let recursive = opt_bool(args, "recursive", false);
    let patterns_arg: Option<Vec<String>> =
        args.get("patterns").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        });
    let patterns = grep_match::pattern_set(pattern, patterns_arg.as_deref())?;
    let glob = opt_str(args, "glob");
    if let Some(g) = glob {
        grep_match::validate_glob(g)?;
    }
    let limit = opt_u64(args, "limit")?.unwrap_or(100) as usize;
    let scope = Scope::resolve(id, opt_str(args, "section"), opt_str(args, "path"))?;
    let client = wb.client();
    let read = client.meta().read();
    let ws = visible(client, &read, id)?;
    let me = meta_err(client, id);

    let mut digest_parts: Vec<Vec<u8>> = vec![
        b"workbench_grep".to_vec(),
        id.as_bytes().to_vec(),
        scope
            .full
            .as_ref()
            .map_or(Vec::new(), |p| p.as_str().as_bytes().to_vec()),
        vec![u8::from(recursive)],
        glob.unwrap_or("").as_bytes().to_vec(),
    ];
    digest_parts.extend(patterns.iter().map(|p| p.as_bytes().to_vec()));
    let parts: Vec<&[u8]> = digest_parts.iter().map(Vec::as_slice).collect();
    let digest = cursor::scope_digest(&parts);
    let resumed = resume(wb, "workbench_grep", &digest, opt_str(args, "cursor"), &ws)?;
    // Anchor: "<line>:<path>" of the last emitted match.
    let (anchor_path, anchor_line) = match &resumed {
        None => (None, 0u64),
        Some(state) => {
            let (line, path) = state
                .anchor
                .split_once(':')
                .ok_or_else(|| ToolError::invalid_arguments("cursor is invalid"))?;
            let line: u64 = line
                .parse()
                .map_err(|_| ToolError::invalid_arguments("cursor is invalid"))?;
            let path = meta::path::normalize_stored(path)
                .map_err(|_| ToolError::invalid_arguments("cursor is invalid"))?;
            (Some(path), line)
        }
    };

    // Candidate files in canonical order.
    let mut files: Vec<(NormPath, PathEntry)> = Vec::new();
    let single = match &scope.full {
        Some(full) => read.path_entry(&ws.incarnation, full).map_err(&me)?,
        None => None,
    };
    match (&scope.full, single) {
        (Some(full), Some(entry)) => files.push((full.clone(), entry)),
        (dir, None) => {
            let is_virtual = dir
                .as_ref()
                .is_none_or(|d| d.len_components() == 1 && SECTIONS.contains(&d.as_str()));
            if let Some(d) = dir {
                if !is_virtual && !read.has_descendants(&ws.incarnation, d).map_err(&me)? {
                    return Err(ToolError::not_found(&present(client, id, Some(d))));
                }
            }
            if recursive {
                let mut after: Option<NormPath> = None;
                loop {
                    let (batch, more) = read
                        .scan_files(&ws.incarnation, dir.as_ref(), after.as_ref(), SCAN_PAGE)
                        .map_err(&me)?;
                    after = batch.last().map(|(p, _)| p.clone());
                    files.extend(batch);
                    if files.len() as u64 > GREP_MAX_FILES * 2 {
                        break;
                    }
                    if !more || after.is_none() {
                        break;
                    }
                }
            } else {
                let mut after: Option<String> = None;
                loop {
                    let page = read
                        .list_children(&ws.incarnation, dir.as_ref(), after.as_deref(), SCAN_PAGE)
                        .map_err(&me)?;
                    after = page.items.last().map(|c| c.name.clone());
                    for child in page.items {
                        if let Some(entry) = child.file {
                            let path = match dir {
                                None => meta::normalize(&child.name),
                                Some(d) => d.join(&child.name),
                            };
                            if let Ok(path) = path {
                                files.push((path, entry));
                            }
                        }
                    }
                    if !page.more || after.is_none() || files.len() as u64 > GREP_MAX_FILES * 2 {
                        break;
                    }
                }
            }
        }
        (None, Some(_)) => {}
    }

    let mut matches = Vec::new();
    let mut files_scanned = 0u64;
    let mut bytes_scanned = 0u64;
    let mut next_anchor: Option<String> = None;
    'files: for (path, entry) in &files {
        if let Some(g) = glob {
            if !grep_match::glob_matches(g, path.file_name()) {
                continue;
            }
        }
        if let Some(ap) = &anchor_path {
            if ordered(path) < ordered(ap) {
                continue;
            }
        }
        files_scanned += 1;
        bytes_scanned += entry.logical_size;
        if files_scanned > GREP_MAX_FILES {
            return Err(ToolError::resource_exhausted(
                "workbench_grep",
                "files_scanned",
                GREP_MAX_FILES,
            ));
        }
        if bytes_scanned > GREP_MAX_BYTES {
            return Err(ToolError::resource_exhausted(
                "workbench_grep",
                "bytes_scanned",
                GREP_MAX_BYTES,
            ));
        }
        let body = client.read_entry(&read, entry).map_err(|e| {
            tool_error(client, id, e)
                .with_detail("path", Value::from(present(client, id, Some(path))))
        })?;
        // Lines are matched on the UTF-8 text; invalid sequences become U+FFFD so a line with a
        // stray binary byte can still match.
        let text = String::from_utf8_lossy(&body);
        let skip_through = match &anchor_path {
            Some(ap) if ap == path => anchor_line,
            _ => 0,
        };
        let (section, relative) = split_section(path);
        for (line_number, snippet) in grep_match::grep_lines(&text, &patterns) {
            if line_number <= skip_through {
                continue;
            }
            if matches.len() == limit {
                next_anchor = matches
                    .last()
                    .and_then(|m: &Value| m.get("line_number").and_then(Value::as_u64))
                    .map(|l| format!("{l}:{}", last_path(&matches)));
                break 'files;
            }
            let mut m = Map::new();
            m.insert("path".into(), Value::from(present(client, id, Some(path))));
            m.insert("section".into(), section.map_or(Value::Null, Value::from));
            m.insert(
                "relative_path".into(),
                relative.clone().map_or(Value::Null, Value::from),
            );
            m.insert("line_number".into(), Value::from(line_number));
            m.insert("snippet".into(), Value::from(snippet));
            m.insert("_path".into(), Value::from(path.as_str()));
            matches.push(Value::Object(m));
        }
    }
    for m in &mut matches {
        if let Some(obj) = m.as_object_mut() {
            obj.remove("_path");
        }
    }
    let next_cursor = next_anchor.map(|anchor| {
        cursor::encode_cursor(
            wb.cursor_key(),
            &CursorState {
                tool: "workbench_grep".into(),
                scope_digest: digest,
                fence: live_fence(&ws),
                anchor,
                extra: Value::Null,
            },
        )
    });
    let mut out = scope.fields(client);
    out.insert("pattern".into(), Value::from(pattern));
    out.insert("recursive".into(), Value::from(recursive));
    out.insert("matches".into(), Value::from(matches));
    out.insert("files_scanned".into(), Value::from(files_scanned));
    out.insert("truncated".into(), Value::from(next_cursor.is_some()));
    out.insert(
        "next_cursor".into(),
        next_cursor.map_or(Value::Null, Value::from),
    );
    Ok(out)
}

fn ordered(p: &NormPath) -> Vec<u8> {
    meta::path::ordered_key(p)
}

fn last_path(matches: &[Value]) -> String {
    matches
        .last()
        .and_then(|m| m.get("_path"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
