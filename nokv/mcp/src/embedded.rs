//! The embedded backend: the Workbench facade over a store opened in this process.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::backend::{tool_hints, ToolBackend};
use nokv::access::audit::{describe_answer, local_actor};
use nokv::access::{AuditEntry, AuditLog};
use nokv::client::{Client, ClientOptions};
use nokv::lifetime::MaintenanceHandle;
use nokv::workbench::errors::ToolError;
use nokv::workbench::{schema, store_error, Workbench};

/// How often the background maintenance of an open store (snapshot reaper, then one GC pass)
/// runs.
const MAINTENANCE_EVERY: Duration = Duration::from_secs(60);

/// [`ToolBackend`] over an embedded store directory.
///
/// Every call is checked in the order of `nokv workbench`: tool name (`UnknownTool`), then the
/// tool's JSON schema (`InvalidArguments`) — neither touches the store — then the store is
/// opened if it is not open yet. Only `workbench_create` may create a missing store; any other
/// tool on a missing store is `NotFound` and creates nothing. Once open, the store and
/// background maintenance (snapshot reaper + GC pass, every 60 s) stay with the process until
/// [`ToolBackend::close`]; the store's writer lock is held only while a call writes, plus a short
/// grace (docs/design.md, "Many processes on one store"), so the CLI, Python and other MCP
/// servers write to the same store meanwhile. A call that cannot get the store (another process
/// kept the lock for the whole 30 s wait → `Conflict` with `details.reason: "store_locked"`, a
/// damaged or foreign store → `InvalidState`) fails that call only; the next call tries again.
///
/// Read tools run concurrently. Write tools of one process run one at a time, so that concurrent
/// calls of one MCP client never fail against each other's read-version fence (pipelining many
/// writers into group commit is the job of the shard owner, `nokv serve`).
#[derive(Debug)]
pub struct EmbeddedBackend {
    dir: PathBuf,
    options: ClientOptions,
    open: Mutex<Option<OpenStore>>,
    writes: Mutex<()>,
    /// The store's audit trail: every write tool call is recorded with the local user as its
    /// actor (docs/server.md, "Audit trail").
    audit: AuditLog,
}

#[derive(Debug)]
struct OpenStore {
    workbench: Workbench,
    /// Stops and joins the maintenance thread when dropped.
    _maintenance: MaintenanceHandle,
}

impl EmbeddedBackend {
    /// A backend over the store in `dir` with default [`ClientOptions`]. Opens nothing yet.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_options(dir, ClientOptions::default())
    }

    /// A backend of the read-only profile over the store in `dir`: every call opens the store
    /// read-only ([`ClientOptions::read_only`]: no lock, nothing written, the state as of that
    /// call) and closes it when it answers, so the backend never holds the store's lock and
    /// always reads the newest durable state. A write tool answers the `InvalidState` envelope
    /// of a read-only store (the MCP server's read-only profile refuses writes before they get
    /// here). Opens nothing yet.
    pub fn read_only(dir: impl Into<PathBuf>) -> Self {
        Self::with_options(
            dir,
            ClientOptions {
                read_only: true,
                ..ClientOptions::default()
            },
        )
    }

    /// A backend over the store in `dir` opened with `options` (its `create_if_missing` is
    /// decided per call: true only for `workbench_create`). Opens nothing yet.
    pub fn with_options(dir: impl Into<PathBuf>, options: ClientOptions) -> Self {
        let dir = dir.into();
        EmbeddedBackend {
            audit: AuditLog::at_store(&dir),
            dir,
            options,
            open: Mutex::new(None),
            writes: Mutex::new(()),
        }
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the store is open in this process (and so its lock held).
    pub fn is_open(&self) -> bool {
        lock(&self.open).is_some()
    }

    /// The facade over the open store, opening it first when needed (a read-only backend opens
    /// a fresh read-only handle for every call and keeps none).
    fn workbench(&self, create_if_missing: bool) -> Result<Workbench, ToolError> {
        if self.options.read_only {
            let client = Client::open_with(&self.dir, self.options.clone()).map_err(store_error)?;
            return Ok(Workbench::new(client));
        }
        let mut open = lock(&self.open);
        if let Some(store) = open.as_ref() {
            return Ok(store.workbench.clone());
        }
        let options = ClientOptions {
            create_if_missing,
            ..self.options.clone()
        };
        let client = Client::open_with(&self.dir, options).map_err(store_error)?;
        let maintenance = client.start_background_maintenance(MAINTENANCE_EVERY);
        let workbench = Workbench::new(client);
        *open = Some(OpenStore {
            workbench: workbench.clone(),
            _maintenance: maintenance,
        });
        Ok(workbench)
    }
}

impl ToolBackend for EmbeddedBackend {
    fn call(&self, tool: &str, input: &Value) -> Value {
        let Some(name) = schema::canonical_tool_name(tool) else {
            return ToolError::unknown_tool(tool).envelope();
        };
        if let Err(err) = schema::validate(name, input) {
            return err.envelope();
        }
        let workbench = match self.workbench(name == "workbench_create") {
            Ok(w) => w,
            Err(err) => return err.envelope(),
        };
        let read_only = tool_hints(name).is_some_and(|h| h.read_only);
        let _serialized = (!read_only).then(|| lock(&self.writes));
        let envelope = workbench.call(name, input);
        if read_only {
            return envelope;
        }
        // The answer leaves only once its audit record is durable.
        let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
        let mut entry = AuditEntry {
            actor: local_actor(),
            tool: name.to_string(),
            workbench: s("id"),
            path: match (s("section"), s("path")) {
                (Some(section), Some(path)) => Some(format!("{section}/{path}")),
                (_, path) => path,
            },
            generation_before: input.get("expected_generation").and_then(Value::as_u64),
            ..AuditEntry::default()
        };
        describe_answer(&mut entry, None, &envelope);
        match self.audit.append(&entry, workbench.client().now_unix_ms()) {
            Ok(_) => envelope,
            Err(e) => ToolError::internal(format!(
                "the call ran but its audit record could not be written ({e}); check the state \
                 with workbench_stat before retrying"
            ))
            .envelope(),
        }
    }

    fn describe(&self) -> String {
        if self.options.read_only {
            return format!(
                "embedded store {} (opened read-only for each call; no lock held)",
                self.dir.display()
            );
        }
        format!(
            "embedded store {} (shared with other writer processes: the writer lock is held only while a call writes)",
            self.dir.display()
        )
    }

    fn close(&self) {
        // Dropping the last handle stops the maintenance thread and closes the store, releasing its lock.
        let store = lock(&self.open).take();
        drop(store);
    }
}

/// Locks a mutex; a poisoned one (a panicking call elsewhere) is still usable: the guarded
/// state is replaced whole, never left half-updated.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
