//! The embedded CLI's entries in the store's audit trail (docs/server.md, "Audit trail"): a
//! mutating command run on the store directly is recorded with the local user as its actor
//! (`local:<user>`), after it ran and before the process exits.

use std::io::Write;
use std::path::Path;

use nokv::access::{tool_action, Action, AuditEntry, AuditLog};
use nokv_commands::demo::DemoChange;
use nokv_commands::request::CommandRequest;
use serde_json::Value;

use crate::args::Command;

/// The record a command will get (outcome still open), or `None` for a command that changes
/// nothing.
pub(crate) fn pending(command: &Command) -> Option<AuditEntry> {
    let entry = |tool: &str, workbench: Option<String>, path: Option<String>| AuditEntry {
        actor: nokv::access::audit::local_actor(),
        tool: tool.to_string(),
        workbench,
        path,
        ..AuditEntry::default()
    };
    let request = match command {
        Command::Workbench {
            tool,
            input,
            request_id,
        } => {
            let name = nokv::workbench::schema::canonical_tool_name(tool)?;
            if tool_action(name) == Some(Action::Read) {
                return None;
            }
            let input: Value = input
                .as_deref()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or(Value::Null);
            let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
            let path = match (s("section"), s("path")) {
                (Some(section), Some(path)) => Some(format!("{section}/{path}")),
                (_, path) => path,
            };
            let mut e = entry(name, s("id"), path);
            e.request_id = request_id.clone();
            e.generation_before = input.get("expected_generation").and_then(Value::as_u64);
            return Some(e);
        }
        Command::Collect {
            workbench,
            path,
            request_id,
            ..
        } => {
            let mut e = entry("collect", Some(workbench.clone()), Some(path.clone()));
            e.request_id = request_id.clone();
            return Some(e);
        }
        Command::Append {
            workbench, path, ..
        } => return Some(entry("append", Some(workbench.clone()), Some(path.clone()))),
        Command::Commit(a) => CommandRequest::Commit(a.clone()),
        Command::Tag { action } => CommandRequest::Tag(action.clone()),
        Command::Snapshot { action } => CommandRequest::Snapshot(action.clone()),
        Command::Restore { action } => CommandRequest::Restore(action.clone()),
        Command::Operation { action } => CommandRequest::Operation(action.clone()),
        Command::Demo => CommandRequest::Demo,
        Command::Rm(a) => CommandRequest::Rm(a.clone()),
        Command::Mv(a) => CommandRequest::Mv(a.clone()),
        Command::Gc(a) => CommandRequest::Gc(a.clone()),
        Command::Fsck(a) => CommandRequest::Fsck(a.clone()),
        Command::Config { action } => CommandRequest::Config(action.clone()),
        Command::Expire(a) => CommandRequest::Expire(a.clone()),
        Command::Token { action } => CommandRequest::Token(action.clone()),
        _ => return None,
    };
    if !request.mutates() {
        return None;
    }
    Some(entry(
        &request.audit_name(),
        request.workbench(),
        request.path(),
    ))
}

/// Completes and appends `entry` after the command exited with `code`, having printed
/// `printed`, after one record for each of `parts` (the changes a `demo` made). Nothing is
/// recorded for a directory that holds no store (a failed first create). A record that cannot
/// be written is reported on stderr and turns a success into exit code 1.
pub(crate) fn finish(
    dir: &Path,
    mut entry: AuditEntry,
    parts: &[DemoChange],
    code: u8,
    printed: &[u8],
) -> u8 {
    if !store_exists(dir) {
        return code;
    }
    let mut answer: Value = serde_json::from_slice(printed).unwrap_or(Value::Null);
    if !answer.is_object() {
        answer = Value::Object(serde_json::Map::new());
    }
    let printed_envelope = answer.get("status").is_some();
    if let Some(o) = answer.as_object_mut() {
        if !printed_envelope {
            o.insert("exit_code".into(), Value::from(code));
        }
    }
    nokv::access::audit::describe_answer(&mut entry, None, &answer);
    let now = nokv_commands::token_cmd::wall_unix_ms();
    let log = AuditLog::at_store(dir);
    let appended = parts
        .iter()
        .try_for_each(|c| log.append(&c.audit_entry(&entry.actor), now).map(drop))
        .and_then(|()| log.append(&entry, now));
    match appended {
        Ok(_) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "nokv: {e}");
            code.max(1)
        }
    }
}

/// Whether `dir` holds a store (its configuration file or its metadata directory).
pub(crate) fn store_exists(dir: &Path) -> bool {
    dir.join("nokv-store.json").exists() || dir.join("meta").exists()
}

/// Stdout that also keeps a copy of what was written while `capture` is on.
pub(crate) struct Tee<W: Write> {
    inner: Option<W>,
    capture: bool,
    copy: Vec<u8>,
}

impl<W: Write> Tee<W> {
    /// Passes everything to `inner`, copying it when `capture`.
    pub(crate) fn new(inner: W, capture: bool) -> Self {
        Tee {
            inner: Some(inner),
            capture,
            copy: Vec::new(),
        }
    }

    /// Lets go of `inner` (stdout's lock, for a command whose output another thread writes);
    /// later writes are dropped.
    pub(crate) fn release(&mut self) {
        self.inner = None;
    }

    /// What was written (empty unless capturing).
    pub(crate) fn copied(&self) -> &[u8] {
        &self.copy
    }
}

impl<W: Write> Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match self.inner.as_mut() {
            Some(w) => w.write(buf)?,
            None => buf.len(),
        };
        if self.capture && self.copy.len() < (16 << 20) {
            self.copy.extend_from_slice(&buf[..n]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.inner.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}
