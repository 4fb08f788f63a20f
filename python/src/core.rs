//! `nokv._nokv.Core`: one store behind the Python classes `nokv.Store` and `nokv.Workbench` —
//! an embedded one (the Rust SDK [`nokv::Client`] and the Workbench facade
//! [`nokv::workbench::Workbench`], `nokv.open`) or a running `nokv serve` reached through the
//! Rust remote client ([`nokv_remote::RemoteClient`], `nokv.connect`). [`Inner`] is the one
//! switch between the two: each method matches on it once, and an operation only an embedded
//! store has raises `nokv.errors.Unsupported` on a connected one.
//!
//! Threading: every storage and object I/O call runs with the GIL released (`Python::detach`);
//! the handle is `Send + Sync` and may be shared by any number of Python threads. `close()`
//! takes the store away from new calls, waits for calls already running, and drops the engine,
//! which releases the store's directory lock before it returns.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use meta::ops::snapshot::SnapshotSelector;
use meta::ops::tag::{TagCondition, TagInfo};
use meta::{PathEntry, Reader};
use nokv::workbench::errors::ToolError;
use nokv::{Client, ClientOptions, IndexFields, IndexValue, PutOptions, Store, WriteCondition};
use nokv_remote::RemoteClient;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use serde_json::{json, Map, Value};

use crate::backend::{Embedded, Inner, Remote, Shared};
use crate::convert::{from_py, to_py};
use crate::errors;
use crate::io::{PyReader, RangeReader};
use crate::types::{split_key, AppendResult, Change, PutResult, Stat};

/// One open store (see the module docs).
#[pyclass(frozen, module = "nokv._nokv")]
pub struct Core {
    shared: Arc<Shared>,
    /// The store directory (embedded) or `None` (connected).
    dir: Option<PathBuf>,
    /// The server URL (connected) or `None` (embedded).
    url: Option<String>,
}

/// Producer recorded on publications made through the Python SDK.
const PRODUCER: &str = "nokv python";

fn init_options(
    py: Python<'_>,
    objects: &Bound<'_, PyAny>,
) -> PyResult<nokv::store_config::InitOptions> {
    let mut opts = nokv::store_config::InitOptions::default();
    if let Ok(url) = objects.cast::<PyString>() {
        opts.objects = Some(url.to_cow()?.into_owned());
        return Ok(opts);
    }
    let Ok(map) = objects.cast::<PyDict>() else {
        return Err(errors::invalid(
            py,
            "objects must be an s3:// URL or a dict {url, endpoint, region, path_style, cache_dir, cache_bytes}",
        ));
    };
    for (k, v) in map.iter() {
        let key: String = k.extract()?;
        match key.as_str() {
            "url" => opts.objects = v.extract()?,
            "endpoint" => opts.endpoint = v.extract()?,
            "region" => opts.region = v.extract()?,
            "path_style" => opts.path_style = v.extract()?,
            "cache_dir" => opts.cache_dir = v.extract::<Option<PathBuf>>()?,
            "cache_bytes" => opts.cache_bytes = v.extract()?,
            other => {
                return Err(errors::invalid(
                    py,
                    format!("unknown objects option `{other}`"),
                ))
            }
        }
    }
    Ok(opts)
}

/// A snapshot selector from Python: an `int` id or a `str` name.
fn selector(py: Python<'_>, at: &Bound<'_, PyAny>) -> PyResult<SnapshotSelector> {
    if at.cast::<PyBool>().is_err() {
        if let Ok(id) = at.extract::<u64>() {
            return Ok(SnapshotSelector::Id(meta::ids::SnapshotId(id)));
        }
    }
    if let Ok(name) = at.cast::<PyString>() {
        return nokv::snapshot::name_selector(&name.to_cow()?)
            .map_err(|e| errors::invalid(py, e.to_string()));
    }
    Err(errors::invalid(
        py,
        "at_snapshot must be a snapshot id (int >= 0) or a snapshot name (str)",
    ))
}

/// Python index-field values → typed [`IndexFields`].
fn index_fields(py: Python<'_>, fields: &Bound<'_, PyAny>) -> PyResult<IndexFields> {
    let map = fields
        .cast::<PyDict>()
        .map_err(|_| errors::invalid(py, "fields must be a dict {name: value}"))?;
    let mut out = IndexFields::new();
    for (k, v) in map.iter() {
        let name: String = k
            .extract()
            .map_err(|_| errors::invalid(py, "index field names must be str"))?;
        let id =
            nokv::index_fields::field_id(&name).map_err(|e| errors::invalid(py, e.to_string()))?;
        let value = index_value(py, &name, &v)?;
        out.insert(id, value);
    }
    Ok(out)
}

fn index_value(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>) -> PyResult<IndexValue> {
    let bad = |why: &str| errors::invalid(py, format!("index field `{name}`: {why}"));
    if v.is_none() {
        return Ok(IndexValue::Null);
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(IndexValue::Bool(b.is_true()));
    }
    if v.cast::<PyInt>().is_ok() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(IndexValue::Int(i));
        }
        if let Ok(u) = v.extract::<u64>() {
            return Ok(IndexValue::UInt(u));
        }
        return Err(bad("integers must fit in 64 bits"));
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        return IndexValue::float(f.value()).map_err(|e| bad(&e.to_string()));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(IndexValue::String(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(IndexValue::Bytes(b.as_bytes().to_vec()));
    }
    if v.hasattr("isoformat")? && v.hasattr("tzinfo")? {
        if v.getattr("tzinfo")?.is_none() {
            return Err(bad("datetimes must be timezone-aware"));
        }
        let text: String = v.call_method0("isoformat")?.extract()?;
        return meta::index::Timestamp::parse_rfc3339(&text)
            .map(IndexValue::Timestamp)
            .ok_or_else(|| bad("the datetime is outside the supported range"));
    }
    Err(bad(
        "values must be None, bool, int, float, str, bytes or an aware datetime",
    ))
}

/// A copy of an object supporting the buffer protocol (`bytearray`, `memoryview`, `array`, …)
/// as `bytes`; `None` for anything else.
fn buffer_bytes<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> Option<Bound<'py, PyBytes>> {
    let builtins = py.import("builtins").ok()?;
    let view = builtins.getattr("memoryview").ok()?.call1((data,)).ok()?;
    builtins
        .getattr("bytes")
        .ok()?
        .call1((view,))
        .ok()?
        .cast_into::<PyBytes>()
        .ok()
}

/// The body of a put: borrowed bytes, a local file, or a Python stream.
enum Body<'a> {
    Slice(&'a [u8]),
    Owned(Vec<u8>),
    File(PathBuf),
    Stream(PyReader),
}

impl Core {
    fn new(inner: Inner, dir: Option<PathBuf>, url: Option<String>) -> Core {
        Core {
            shared: Arc::new(Shared::new(inner)),
            dir,
            url,
        }
    }

    fn inner(&self, py: Python<'_>) -> PyResult<Arc<Inner>> {
        self.shared.get(py)
    }

    /// The path entry (and a reader at its version) of a file, live or at a snapshot; `None`
    /// when no file is at `key`.
    fn entry_at(
        inner: &Embedded,
        workbench_id: &str,
        key: &str,
        at: Option<&SnapshotSelector>,
    ) -> Result<Option<(Reader, PathEntry)>, nokv::Error> {
        let norm = Client::normalize(key)?;
        match at {
            None => {
                let read = inner.client.meta().read();
                let ws = read.visible_workspace(workbench_id)?;
                Ok(read.path_entry(&ws.incarnation, &norm)?.map(|e| (read, e)))
            }
            Some(sel) => {
                let (info, read) = inner.client.snapshot_reader(workbench_id, sel)?;
                Ok(read
                    .path_entry(&info.incarnation, &norm)?
                    .map(|e| (read, e)))
            }
        }
    }

    /// The tool call behind every JSON-shaped method: the result fields, or the mapped
    /// exception (embedded: the facade; connected: `POST /v1/tools/{tool}`, whose envelope keeps
    /// the error's code and details).
    fn call_json(
        py: Python<'_>,
        inner: &Inner,
        tool: &str,
        input: &Value,
    ) -> PyResult<Map<String, Value>> {
        match inner {
            Inner::Embedded(e) => py
                .detach(|| e.facade.call_tool(tool, input))
                .map_err(|e| errors::to_pyerr(py, &e)),
            Inner::Remote(r) => {
                let envelope = py
                    .detach(|| r.client.call_tool(tool, input))
                    .map_err(|e| errors::remote(py, e))?;
                envelope_fields(py, envelope)
            }
        }
    }

    /// Runs one of the CLI's envelope commands on the server (`name`: `commit`, `tag`; `args`:
    /// the command's arguments as the protocol DTO of `POST /v1/commands/{name}`, see
    /// `docs/server.md`) — the same code the CLI runs — and returns its result fields, or
    /// raises the exception of its error envelope.
    fn remote_command(
        py: Python<'_>,
        remote: &Remote,
        name: &str,
        args: Value,
    ) -> PyResult<Map<String, Value>> {
        let out = py
            .detach(|| remote.client.command(name, &args))
            .map_err(|e| errors::remote(py, e))?;
        let envelope: Value = serde_json::from_str(&out.stdout).map_err(|_| {
            errors::remote(
                py,
                nokv::Error::Connection {
                    url: remote.client.url().to_string(),
                    reason: format!(
                        "the server's `{name}` answer is not a JSON envelope (exit {})",
                        out.exit_code
                    ),
                },
            )
        })?;
        envelope_fields(py, envelope)
    }

    /// The file at `key` (live or at a snapshot) with its reader; a directory is `NotArtifact`,
    /// a missing path `NotFound` (both as the facade reports them).
    fn file_at(
        &self,
        py: Python<'_>,
        inner: &Embedded,
        workbench_id: &str,
        key: &str,
        at_snapshot: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Reader, PathEntry)> {
        let sel = at_snapshot.map(|a| selector(py, a)).transpose()?;
        let found = py
            .detach(|| Self::entry_at(inner, workbench_id, key, sel.as_ref()))
            .map_err(|e| errors::sdk(py, &inner.client, workbench_id, e))?;
        if let Some(found) = found {
            return Ok(found);
        }
        // Not a file: let the facade say whether it is a directory or absent.
        let mut input = json!({"id": workbench_id, "path": key});
        if let Some(a) = at_snapshot {
            input["at_snapshot"] = from_py(a).map_err(|e| errors::invalid(py, e))?;
        }
        py.detach(|| inner.facade.call_tool("workbench_stat", &input))
            .map_err(|e| errors::to_pyerr(py, &e))?;
        Err(errors::to_pyerr(
            py,
            &ToolError::not_artifact(&format!(
                "{}/{key}",
                inner.client.workbench_path(workbench_id)
            )),
        ))
    }

    /// The live path entry of the file at `key` on a server; a directory is `NotArtifact`, a
    /// missing path `NotFound`.
    fn remote_file(
        py: Python<'_>,
        remote: &Remote,
        workbench_id: &str,
        key: &str,
    ) -> PyResult<PathEntry> {
        match py.detach(|| remote.client.stat(workbench_id, key)) {
            Ok(entry) => Ok(entry),
            Err(nokv::Error::OperationFailed { code, .. }) if code == "NotFound" => {
                // Not a file: the stat tool tells a directory from nothing.
                let input = json!({"id": workbench_id, "path": key});
                let envelope = py
                    .detach(|| remote.client.call_tool("workbench_stat", &input))
                    .map_err(|e| errors::remote(py, e))?;
                envelope_fields(py, envelope)?;
                Err(errors::to_pyerr(
                    py,
                    &ToolError::not_artifact(&format!("{}/{workbench_id}/{key}", remote.root)),
                ))
            }
            Err(e) => Err(errors::remote(py, e)),
        }
    }
}

impl Core {
    /// A file object over the file at `key` as of snapshot `at` on a server: the stat tool
    /// checks the snapshot (`SnapshotNotFound`, `SnapshotExpired`) and gives the file's card,
    /// the snapshot list its read version, and the bytes are range reads at that version (the
    /// snapshot's lease holds its history).
    fn remote_reader_at(
        py: Python<'_>,
        shared: &Arc<Shared>,
        remote: &Remote,
        workbench_id: &str,
        key: &str,
        at: &Bound<'_, PyAny>,
    ) -> PyResult<Py<RangeReader>> {
        let at_json = from_py(at).map_err(|e| errors::invalid(py, e))?;
        let input = json!({"id": workbench_id, "path": key, "at_snapshot": at_json});
        let stat = py
            .detach(|| remote.client.call_tool("workbench_stat", &input))
            .map_err(|e| errors::remote(py, e))?;
        let stat = envelope_fields(py, stat)?;
        let card = stat.get("card").cloned().unwrap_or(Value::Null);
        if card.get("kind").and_then(Value::as_str) != Some("file") {
            return Err(errors::to_pyerr(
                py,
                &ToolError::not_artifact(&format!("{}/{workbench_id}/{key}", remote.root)),
            ));
        }
        let list = py
            .detach(|| {
                remote
                    .client
                    .call_tool("workbench_snapshot_list", &json!({"id": workbench_id}))
            })
            .map_err(|e| errors::remote(py, e))?;
        let list = envelope_fields(py, list)?;
        let version = list
            .get("snapshots")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|s| match &at_json {
                Value::String(name) => s.get("name").and_then(Value::as_str) == Some(name),
                id => s.get("snapshot_id") == Some(id),
            })
            .and_then(|s| s.get("read_version").and_then(Value::as_u64));
        let (Some(version), Some(size), Some(generation)) = (
            version,
            card.get("size_bytes").and_then(Value::as_u64),
            card.get("generation").and_then(Value::as_u64),
        ) else {
            return Err(errors::remote(
                py,
                nokv::Error::Connection {
                    url: remote.client.url().to_string(),
                    reason: "the server's snapshot or file card lacks a read version, size or generation".into(),
                },
            ));
        };
        let text = |k: &str| {
            card.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let card = crate::io::RevisionCard {
            size,
            generation,
            digest_uri: text("digest_uri"),
            content_type: text("content_type"),
        };
        Py::new(
            py,
            RangeReader::remote_at(Arc::clone(shared), workbench_id, key, card, version),
        )
    }

    /// `walk_page` on a server: every file below `key` in one page (the server lists a prefix
    /// in one answer, at one read version), strictly after `after`.
    fn remote_walk(
        py: Python<'_>,
        remote: &Remote,
        workbench_id: &str,
        key: &str,
        after: Option<&str>,
    ) -> PyResult<(Vec<Stat>, Option<String>)> {
        let prefix = (!key.is_empty()).then_some(key);
        let (_, files) = py
            .detach(|| remote.client.list_files(workbench_id, prefix))
            .map_err(|e| errors::remote(py, e))?;
        let after = after
            .map(Client::normalize)
            .transpose()
            .map_err(|e| errors::remote(py, e))?;
        let wb_path = format!("{}/{workbench_id}", remote.root);
        let stats = files
            .iter()
            .filter(|(p, _)| after.as_ref().is_none_or(|a| p > a))
            .map(|(p, e)| Stat::file(py, &wb_path, p.as_str(), e))
            .collect::<PyResult<Vec<_>>>()?;
        Ok((stats, None))
    }
}

/// A `request_id=` argument: 32 hex characters as its 16 bytes.
fn request_id_arg(py: Python<'_>, request_id: Option<&str>) -> PyResult<Option<[u8; 16]>> {
    request_id
        .map(|hex| {
            nokv::publication::parse_operation_id(hex)
                .ok_or_else(|| errors::invalid(py, "request_id must be exactly 32 hex characters"))
        })
        .transpose()
}

/// The result fields of a success envelope (without `status`), or the exception of an error
/// envelope.
fn envelope_fields(py: Python<'_>, envelope: Value) -> PyResult<Map<String, Value>> {
    match envelope {
        Value::Object(mut fields)
            if fields.get("status").and_then(Value::as_str) == Some("success") =>
        {
            fields.remove("status");
            Ok(fields)
        }
        other => Err(errors::from_envelope(py, &other)),
    }
}

/// What a connected store answers for an operation only an embedded store has.
const EMBEDDED_ONLY: &str = "it reads the store's metadata or object store directly, which only the process that opened the store can do";

/// What a connected store answers for a recursive walk at a snapshot.
const NO_SNAPSHOT_WALK: &str = "the server's recursive listing endpoint reads the live state; list(at_snapshot=…) pages a snapshot's directories";

#[pymethods]
impl Core {
    /// Opens (or creates) the embedded store in directory `path`. See `nokv.open`.
    #[staticmethod]
    #[pyo3(signature = (path, *, create=true, objects=None, lock_timeout=30.0))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        create: bool,
        objects: Option<&Bound<'_, PyAny>>,
        lock_timeout: f64,
    ) -> PyResult<Core> {
        // At most a year: longer than any wait is meant to be, and within Duration and Instant.
        const MAX_LOCK_TIMEOUT_SECONDS: f64 = 366.0 * 86_400.0;
        if !(lock_timeout.is_finite() && (0.0..=MAX_LOCK_TIMEOUT_SECONDS).contains(&lock_timeout)) {
            return Err(errors::invalid(
                py,
                "lock_timeout must be a finite number of seconds from 0 to 31622400 (a year)",
            ));
        }
        let init = objects.map(|o| init_options(py, o)).transpose()?;
        let dir = path.clone();
        let client = py
            .detach(|| {
                if let Some(init) = &init {
                    if !create && !dir.join("meta").is_dir() {
                        return Err(nokv::Error::StoreNotFound);
                    }
                    nokv::store_config::init_store(&dir, init)?;
                }
                Client::open_with(
                    &dir,
                    ClientOptions {
                        create_if_missing: create,
                        lock_wait: Duration::from_secs_f64(lock_timeout),
                        ..Default::default()
                    },
                )
            })
            .map_err(|e| errors::store(py, e))?;
        let facade = nokv::workbench::Workbench::new(client.clone());
        Ok(Core::new(
            Inner::Embedded(Embedded { client, facade }),
            Some(path),
            None,
        ))
    }

    /// Connects to a running `nokv serve` at `url` (`http://HOST:PORT`). See `nokv.connect`.
    #[staticmethod]
    #[pyo3(signature = (url, *, token=None, retries=nokv_remote::DEFAULT_RETRIES))]
    fn connect(py: Python<'_>, url: &str, token: Option<String>, retries: u32) -> PyResult<Core> {
        if let Some(t) = &token {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(errors::invalid(
                    py,
                    "token must be non-empty visible ASCII (no spaces or control characters)",
                ));
            }
        }
        let client = RemoteClient::connect(url, token.as_deref())
            .map_err(|e| errors::remote(py, e))?
            .with_retries(retries);
        // One round trip proves the server answers and accepts the token, and reads the
        // presentation root every path the SDK reports starts with.
        let input = json!({"limit": 1});
        let envelope = py
            .detach(|| client.call_tool("workbench_find", &input))
            .map_err(|e| errors::remote(py, e))?;
        let fields = envelope_fields(py, envelope)?;
        let root = fields
            .get("path")
            .and_then(Value::as_str)
            .map(|p| p.trim_end_matches('/').to_string())
            .ok_or_else(|| {
                errors::remote(
                    py,
                    nokv::Error::Connection {
                        url: client.url().to_string(),
                        reason: "the server's workbench_find answer has no presentation root"
                            .into(),
                    },
                )
            })?;
        let url = client.url().to_string();
        Ok(Core::new(
            Inner::Remote(Remote { client, root }),
            None,
            Some(url),
        ))
    }

    /// Closes the store: new calls fail with `InvalidState`; calls already running finish; the
    /// engine is dropped (its directory lock released) before this returns. Idempotent.
    fn close(&self, py: Python<'_>) {
        let taken = self.shared.take();
        if let Some(mut arc) = taken {
            py.detach(|| loop {
                match Arc::try_unwrap(arc) {
                    Ok(inner) => {
                        drop(inner);
                        break;
                    }
                    Err(still_shared) => {
                        arc = still_shared;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            });
        }
    }

    /// True once `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The store directory (`None` for a connected store).
    #[getter]
    fn directory(&self) -> Option<PathBuf> {
        self.dir.clone()
    }

    /// The server URL (`None` for an embedded store).
    #[getter]
    fn url(&self) -> Option<String> {
        self.url.clone()
    }

    /// The store's presentation root (e.g. `/agents/local/wb`).
    #[getter]
    fn presentation_root(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match &*self.inner(py)? {
            Inner::Embedded(e) => e.client.presentation_root().to_string(),
            Inner::Remote(r) => r.root.clone(),
        })
    }

    /// Runs one Workbench tool and returns its envelope exactly as the CLI prints it
    /// (`{"status": "success", …}` or the error envelope); never raises for tool errors.
    fn tool<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let envelope = match from_py(args) {
            Ok(input) => py.detach(|| inner.store().call_tool(name, &input)),
            Err(msg) => ToolError::invalid_arguments(format!("the tool input is not JSON: {msg}"))
                .envelope(),
        };
        to_py(py, &envelope, None)
    }

    /// Runs one Workbench tool and returns its result fields (without `status`); a tool error
    /// raises the `nokv.errors` class of its code.
    #[pyo3(signature = (name, args, *, parse_float=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyAny>,
        parse_float: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let input = from_py(args).map_err(|e| errors::invalid(py, e))?;
        let out = Self::call_json(py, &inner, name, &input)?;
        to_py(py, &Value::Object(out), parse_float)
    }

    /// Publishes a body at `key` (create-only, or replace under a generation CAS); with
    /// `request_id` (32 hex characters) a rerun returns the first receipt
    /// (`idempotent_replay=True`) and writes nothing.
    #[pyo3(signature = (workbench_id, key, data, *, replace=false, expected_generation=None,
        content_type=None, fields=None, index_json=false, request_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        workbench_id: &str,
        key: &str,
        data: &Bound<'_, PyAny>,
        replace: bool,
        expected_generation: Option<u64>,
        content_type: Option<String>,
        fields: Option<&Bound<'_, PyAny>>,
        index_json: bool,
        request_id: Option<&str>,
    ) -> PyResult<PutResult> {
        let inner = self.inner(py)?;
        let request_id = request_id_arg(py, request_id)?;
        if expected_generation.is_some() && !replace {
            return Err(errors::invalid(
                py,
                "expected_generation is only allowed with replace=True",
            ));
        }
        if expected_generation == Some(0) {
            return Err(errors::invalid(
                py,
                "expected_generation must be at least 1",
            ));
        }
        let guessed = nokv::materialize::guess_content_type(key);
        let (body, default_type) = if let Ok(b) = data.cast::<PyBytes>() {
            (Body::Slice(b.as_bytes()), guessed)
        } else if let Ok(s) = data.cast::<PyString>() {
            let text_type = if guessed == nokv::client::OCTET_STREAM {
                nokv::workbench::payload::TEXT_CONTENT_TYPE
            } else {
                guessed
            };
            (
                Body::Owned(s.to_cow()?.into_owned().into_bytes()),
                text_type,
            )
        } else if data.hasattr("__fspath__")? {
            let os = py.import("os")?;
            let p: PathBuf = os.call_method1("fspath", (data,))?.extract()?;
            (Body::File(p), guessed)
        } else if data.hasattr("read")? {
            (Body::Stream(PyReader::new(data.clone().unbind())), guessed)
        } else if let Some(b) = buffer_bytes(py, data) {
            (Body::Owned(b.as_bytes().to_vec()), guessed)
        } else {
            return Err(errors::invalid(
                py,
                "data must be bytes, a bytes-like object, str, an os.PathLike or a binary file object",
            ));
        };
        let options = PutOptions {
            content_type: content_type.unwrap_or_else(|| default_type.to_string()),
            condition: if replace {
                WriteCondition::Replace {
                    expected_generation,
                }
            } else {
                WriteCondition::Create
            },
            producer: PRODUCER.into(),
            manifest_id: None,
            index_fields: fields
                .map(|f| index_fields(py, f))
                .transpose()?
                .unwrap_or_default(),
            index_json,
            expected_digest_uri: None,
            request_id,
        };
        let receipt = py
            .detach(|| put_body(inner.store(), workbench_id, key, body, &options))
            .map_err(|e| local_or(py, &inner, workbench_id, e))?;
        let key = receipt.path.as_str().to_string();
        let (section, relative_path) = split_key(&key);
        Ok(PutResult {
            workbench_id: workbench_id.to_string(),
            path: format!("{}/{key}", inner.workbench_path(workbench_id)),
            key,
            section,
            relative_path,
            size_bytes: receipt.size_bytes,
            generation: receipt.generation,
            digest_uri: receipt.digest_uri,
            content_type: receipt.content_type,
            replace,
            created: receipt.created,
            idempotent_replay: receipt.idempotent_replay,
        })
    }

    /// Appends bytes (or UTF-8 text) to the artifact at `key`, creating it when missing.
    #[pyo3(signature = (workbench_id, key, data, *, content_type=None))]
    fn append(
        &self,
        py: Python<'_>,
        workbench_id: &str,
        key: &str,
        data: &Bound<'_, PyAny>,
        content_type: Option<String>,
    ) -> PyResult<AppendResult> {
        let inner = self.inner(py)?;
        let owned: Vec<u8>;
        let (bytes, create_type): (&[u8], &str) = if let Ok(b) = data.cast::<PyBytes>() {
            (b.as_bytes(), nokv::client::OCTET_STREAM)
        } else if let Ok(s) = data.cast::<PyString>() {
            owned = s.to_cow()?.into_owned().into_bytes();
            (&owned, nokv::workbench::payload::TEXT_CONTENT_TYPE)
        } else if let Some(b) = buffer_bytes(py, data) {
            owned = b.as_bytes().to_vec();
            (&owned, nokv::client::OCTET_STREAM)
        } else {
            return Err(errors::invalid(
                py,
                "data must be bytes, a bytes-like object or str",
            ));
        };
        let r = match &*inner {
            Inner::Embedded(e) => py
                .detach(|| {
                    e.client.append_with_create_type(
                        workbench_id,
                        key,
                        bytes,
                        content_type.as_deref(),
                        create_type,
                        PRODUCER,
                    )
                })
                .map(Appended::from)
                .map_err(|err| errors::sdk(py, &e.client, workbench_id, err))?,
            Inner::Remote(r) => {
                // A durable idempotent append under a fresh operation id: a retry after a lost
                // answer replays it instead of appending twice.
                let envelope = py
                    .detach(|| {
                        // A new file gets the SDK's create type (text or bytes), an existing one
                        // keeps its own, as embedded: the server decides in the append's read.
                        let operation_id = nokv_remote::new_request_id()?;
                        r.client.append_envelope(
                            workbench_id,
                            key,
                            bytes,
                            &operation_id,
                            content_type.as_deref(),
                            Some(create_type),
                        )
                    })
                    .map_err(|e| errors::remote(py, e))?;
                Appended::from_envelope(py, &envelope_fields(py, envelope)?)?
            }
        };
        let (section, relative_path) = split_key(&r.key);
        Ok(AppendResult {
            workbench_id: workbench_id.to_string(),
            path: format!("{}/{}", inner.workbench_path(workbench_id), r.key),
            key: r.key,
            section,
            relative_path,
            appended_bytes: r.appended_bytes,
            size_bytes: r.size_bytes,
            generation: r.generation,
            created: r.created,
            digest: r.digest,
            digest_uri: r.digest_uri,
            content_type: r.content_type,
        })
    }

    /// The card of a file or directory (live, or at a snapshot id/name).
    #[pyo3(signature = (workbench_id, key, *, at_snapshot=None))]
    fn stat(
        &self,
        py: Python<'_>,
        workbench_id: &str,
        key: &str,
        at_snapshot: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Stat> {
        let inner = self.inner(py)?;
        let wb_path = inner.workbench_path(workbench_id);
        if let Inner::Embedded(emb) = &*inner {
            // A file's card straight from its path entry (the tool below answers directories).
            let sel = at_snapshot.map(|a| selector(py, a)).transpose()?;
            let found = if key.is_empty() {
                None
            } else {
                py.detach(|| Self::entry_at(emb, workbench_id, key, sel.as_ref()))
                    .map_err(|e| errors::sdk(py, &emb.client, workbench_id, e))?
            };
            if let Some((_, entry)) = found {
                let norm = Client::normalize(key)
                    .map_err(|e| errors::sdk(py, &emb.client, workbench_id, e))?;
                return Stat::file(py, &wb_path, norm.as_str(), &entry);
            }
        }
        if let (Inner::Remote(r), None, false) = (&*inner, at_snapshot, key.is_empty()) {
            // A live file's card from its path entry (with its index fields), as embedded.
            match py.detach(|| r.client.stat(workbench_id, key)) {
                Ok(entry) => {
                    let norm = Client::normalize(key).map_err(|e| errors::remote(py, e))?;
                    return Stat::file(py, &wb_path, norm.as_str(), &entry);
                }
                Err(nokv::Error::OperationFailed { code, .. }) if code == "NotFound" => {}
                Err(e) => return Err(errors::remote(py, e)),
            }
        }
        let mut input = json!({"id": workbench_id});
        if !key.is_empty() {
            input["path"] = Value::from(key);
        }
        if let Some(a) = at_snapshot {
            input["at_snapshot"] = from_py(a).map_err(|e| errors::invalid(py, e))?;
        }
        let out = Self::call_json(py, &inner, "workbench_stat", &input)?;
        let card = out.get("card").cloned().unwrap_or(Value::Null);
        Ok(Stat::from_json(&wb_path, &card))
    }

    /// One page of direct children of `key` (`""`: the workbench root): `(entries, next_cursor)`.
    #[pyo3(signature = (workbench_id, key, *, cursor=None, limit=100, at_snapshot=None))]
    fn list_page(
        &self,
        py: Python<'_>,
        workbench_id: &str,
        key: &str,
        cursor: Option<String>,
        limit: u32,
        at_snapshot: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Vec<Stat>, Option<String>)> {
        let inner = self.inner(py)?;
        let mut input = json!({"id": workbench_id, "limit": limit});
        if !key.is_empty() {
            input["path"] = Value::from(key);
        }
        if let Some(c) = cursor {
            input["cursor"] = Value::from(c);
        }
        if let Some(a) = at_snapshot {
            input["at_snapshot"] = from_py(a).map_err(|e| errors::invalid(py, e))?;
        }
        let out = Self::call_json(py, &inner, "workbench_list", &input)?;
        let wb_path = inner.workbench_path(workbench_id);
        let entries = out
            .get("entries")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|e| Stat::from_json(&wb_path, e)).collect())
            .unwrap_or_default();
        let next = out
            .get("next_cursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok((entries, next))
    }

    /// One page of every file below `key` (recursive, canonical path order, at one read
    /// version per page), strictly after the workbench-relative path `after`:
    /// `(files, last_key_or_None_when_done)`.
    #[pyo3(signature = (workbench_id, key, *, after=None, limit=256, at_snapshot=None))]
    fn walk_page(
        &self,
        py: Python<'_>,
        workbench_id: &str,
        key: &str,
        after: Option<String>,
        limit: usize,
        at_snapshot: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Vec<Stat>, Option<String>)> {
        let inner = self.inner(py)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                if at_snapshot.is_some() {
                    return Err(errors::unsupported(
                        py,
                        "walk(at_snapshot=…)",
                        NO_SNAPSHOT_WALK,
                    ));
                }
                return Self::remote_walk(py, r, workbench_id, key, after.as_deref());
            }
        };
        let sel = at_snapshot.map(|a| selector(py, a)).transpose()?;
        let limit = limit.clamp(1, 1024);
        let client = &inner.client;
        let page = py
            .detach(|| -> Result<_, nokv::Error> {
                let prefix = if key.is_empty() {
                    None
                } else {
                    Some(Client::normalize(key)?)
                };
                let after = after.as_deref().map(Client::normalize).transpose()?;
                let (read, inc) = match &sel {
                    None => {
                        let read = client.meta().read();
                        let ws = read.visible_workspace(workbench_id)?;
                        (read, ws.incarnation)
                    }
                    Some(sel) => {
                        let (info, read) = client.snapshot_reader(workbench_id, sel)?;
                        (read, info.incarnation)
                    }
                };
                Ok(read.scan_files(&inc, prefix.as_ref(), after.as_ref(), limit)?)
            })
            .map_err(|e| errors::sdk(py, client, workbench_id, e))?;
        let (files, more) = page;
        let wb_path = client.workbench_path(workbench_id);
        let last = if more {
            files.last().map(|(p, _)| p.as_str().to_string())
        } else {
            None
        };
        let stats = files
            .iter()
            .map(|(p, e)| Stat::file(py, &wb_path, p.as_str(), e))
            .collect::<PyResult<Vec<_>>>()?;
        Ok((stats, last))
    }

    /// Bytes `[offset, offset + length)` of the file at `key` (`length=None`: to the end).
    #[pyo3(signature = (workbench_id, key, offset=0, length=None, *, at_snapshot=None))]
    fn read_bytes<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        key: &str,
        offset: u64,
        length: Option<u64>,
        at_snapshot: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let reader = self.open_reader(py, workbench_id, key, at_snapshot)?;
        let size = reader.get().size_value();
        if offset > size {
            return Err(errors::invalid(
                py,
                format!("offset {offset} is past the end of the body ({size} bytes)"),
            ));
        }
        let len = length.unwrap_or(size - offset);
        if len > size - offset {
            return Err(errors::invalid(
                py,
                format!(
                    "range starting at byte {offset} ({len} bytes) is outside the body of {size} bytes"
                ),
            ));
        }
        reader.get().read_bytes(py, offset, len)
    }

    /// A range reader pinned to the revision currently at `key` (live or at a snapshot).
    #[pyo3(signature = (workbench_id, key, *, at_snapshot=None))]
    fn open_reader(
        &self,
        py: Python<'_>,
        workbench_id: &str,
        key: &str,
        at_snapshot: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<RangeReader>> {
        let inner = self.inner(py)?;
        match &*inner {
            Inner::Embedded(emb) => {
                let (read, entry) = self.file_at(py, emb, workbench_id, key, at_snapshot)?;
                let rows = py
                    .detach(|| read.manifest(&entry.artifact_revision_id))
                    .map_err(|e| errors::sdk(py, &emb.client, workbench_id, e.into()))?;
                Py::new(py, RangeReader::new(Arc::clone(&self.shared), &entry, rows))
            }
            Inner::Remote(r) => {
                if let Some(at) = at_snapshot {
                    return Self::remote_reader_at(py, &self.shared, r, workbench_id, key, at);
                }
                let entry = Self::remote_file(py, r, workbench_id, key)?;
                Py::new(
                    py,
                    RangeReader::remote(Arc::clone(&self.shared), workbench_id, key, &entry),
                )
            }
        }
    }

    /// Commits a workbench (`workbench_commit` plus lineage `parents`); returns the tool's result
    /// fields plus `committed_at_unix_seconds` and `parents`.
    #[pyo3(signature = (workbench_id, manifest, *, content_digest_uri=None, replace=false, parents=Vec::new()))]
    fn commit<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        manifest: &Bound<'py, PyAny>,
        content_digest_uri: Option<String>,
        replace: bool,
        parents: Vec<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let manifest = from_py(manifest).map_err(|e| errors::invalid(py, e))?;
        if !manifest.is_object() {
            return Err(errors::invalid(py, "manifest must be a dict"));
        }
        let canonical = nokv::workbench::canonical::canonical_json(&manifest)
            .map_err(|e| errors::to_pyerr(py, &e))?;
        let client = match &*inner {
            Inner::Embedded(e) => &e.client,
            Inner::Remote(r) => {
                // `nokv commit` on the server: the same lifecycle, the content digest of the
                // live tree computed there when not given.
                let args = json!({
                    "action": null,
                    "workbench": workbench_id,
                    "message": null,
                    "manifest": String::from_utf8_lossy(&canonical),
                    "content_digest": content_digest_uri,
                    "parents": parents,
                    "replace": replace,
                });
                let mut out = Self::remote_command(py, r, "commit", args)?;
                // The server's receipt has no commit time; the head record does not either.
                out.entry("committed_at_unix_seconds")
                    .or_insert(Value::Null);
                return to_py(py, &Value::Object(out), None);
            }
        };
        let receipt = py
            .detach(|| {
                let content_digest_uri = match content_digest_uri {
                    Some(d) => d,
                    None => client.tree_content_digest(workbench_id)?,
                };
                client.commit(&nokv::commit::CommitRequest {
                    workbench_id: workbench_id.to_string(),
                    manifest,
                    content_digest_uri,
                    replace,
                    parents,
                })
            })
            .map_err(|e| errors::commit(py, client, workbench_id, e))?;
        let out = json!({
            "workbench_id": receipt.workbench_id,
            "workbench_path": receipt.workbench_path,
            "path": receipt.path,
            "size_bytes": receipt.size_bytes,
            "generation": receipt.generation,
            "content_digest_uri": receipt.content_digest_uri,
            "manifest_digest_uri": receipt.manifest_digest_uri,
            "commit_identity": receipt.commit_identity,
            "envelope_digest_uri": receipt.envelope_digest_uri,
            "tree_digest_uri": receipt.tree_digest_uri,
            "replace": receipt.replace,
            "idempotent_replay": receipt.idempotent_replay,
            "committed_at_unix_seconds": receipt.committed_at_unix_seconds,
            "parents": receipt.parents,
        });
        to_py(py, &out, None)
    }

    /// The content digest `nokv commit` uses for a workbench's live tree.
    fn content_digest(&self, py: Python<'_>, workbench_id: &str) -> PyResult<String> {
        let inner = self.inner(py)?;
        let inner = inner.embedded(py, "content_digest()", EMBEDDED_ONLY)?;
        py.detach(|| inner.client.tree_content_digest(workbench_id))
            .map_err(|e| errors::sdk(py, &inner.client, workbench_id, e))
    }

    /// The commit head of a workbench (`None`: never committed).
    fn commit_head<'py>(&self, py: Python<'py>, workbench_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                let args = json!({"action": {"Show": {"commit": null, "workbench": workbench_id}},
                    "workbench": null, "message": null, "manifest": null, "content_digest": null,
                    "parents": [], "replace": false});
                return remote_commit_record(py, Self::remote_command(py, r, "commit", args));
            }
        };
        let info = py
            .detach(|| inner.client.commit_head(workbench_id))
            .map_err(|e| errors::commit(py, &inner.client, workbench_id, e))?;
        to_py(py, &info.map_or(Value::Null, commit_info_json), None)
    }

    /// A commit record by id (`None`: no such commit).
    fn commit_info<'py>(&self, py: Python<'py>, commit_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                let args = json!({"action": {"Show": {"commit": commit_id, "workbench": null}},
                    "workbench": null, "message": null, "manifest": null, "content_digest": null,
                    "parents": [], "replace": false});
                return remote_commit_record(py, Self::remote_command(py, r, "commit", args));
            }
        };
        let info = py
            .detach(|| inner.client.commit_info(commit_id))
            .map_err(|e| errors::commit(py, &inner.client, "", e))?;
        to_py(py, &info.map_or(Value::Null, commit_info_json), None)
    }

    /// Every tag of a workbench: `[{name, commit_id, generation}]`.
    fn tags<'py>(&self, py: Python<'py>, workbench_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                let args = json!({"List": {"workbench": workbench_id}});
                let out = Self::remote_command(py, r, "tag", args)?;
                let tags = out
                    .get("tags")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(remote_tag).collect())
                    .unwrap_or_default();
                return to_py(py, &Value::Array(tags), None);
            }
        };
        let tags = py
            .detach(|| inner.client.list_tags(workbench_id))
            .map_err(|e| errors::commit(py, &inner.client, workbench_id, e))?;
        to_py(py, &Value::Array(tags.iter().map(tag_json).collect()), None)
    }

    /// Reads one tag (`None`: absent).
    fn get_tag<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        name: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                let args = json!({"Get": {"workbench": workbench_id, "tag": name}});
                return match Self::remote_command(py, r, "tag", args) {
                    Ok(out) => to_py(py, &remote_tag(&Value::Object(out)), None),
                    Err(e) if e.matches(py, not_found_class(py)?)? => Ok(py.None().into_bound(py)),
                    Err(e) => Err(e),
                };
            }
        };
        let tag = py
            .detach(|| inner.client.get_tag(workbench_id, name))
            .map_err(|e| errors::commit(py, &inner.client, workbench_id, e))?;
        to_py(py, &tag.as_ref().map_or(Value::Null, tag_json), None)
    }

    /// Sets a tag to a sealed commit under a CAS condition (`expected_generation`, or
    /// `create_only`; neither: last writer wins).
    #[pyo3(signature = (workbench_id, name, commit_id, *, expected_generation=None, create_only=false))]
    fn set_tag<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        name: &str,
        commit_id: &str,
        expected_generation: Option<u64>,
        create_only: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let cond = tag_condition(py, expected_generation, create_only)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                let args = json!({"Set": {"workbench": workbench_id, "tag": name,
                    "commit": commit_id, "create": create_only, "expect": expected_generation}});
                let out = Self::remote_command(py, r, "tag", args)?;
                return to_py(py, &remote_tag(&Value::Object(out)), None);
            }
        };
        let tag = py
            .detach(|| inner.client.set_tag(workbench_id, name, commit_id, cond))
            .map_err(|e| errors::commit(py, &inner.client, workbench_id, e))?;
        to_py(py, &tag_json(&tag), None)
    }

    /// Deletes a tag (optionally only at `expected_generation`); returns the removed tag or
    /// `None` when it was absent. The commit is not retired.
    #[pyo3(signature = (workbench_id, name, *, expected_generation=None))]
    fn delete_tag<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        name: &str,
        expected_generation: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let cond = tag_condition(py, expected_generation, false)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                // `nokv tag delete` answers only whether it deleted; read the tag first and
                // delete it under a CAS on the generation read, so the tag returned is exactly
                // the one deleted.
                let not_found = not_found_class(py)?;
                let mut attempts = 0;
                return loop {
                    attempts += 1;
                    let get = json!({"Get": {"workbench": workbench_id, "tag": name}});
                    let tag = match Self::remote_command(py, r, "tag", get) {
                        Ok(out) => remote_tag(&Value::Object(out)),
                        Err(e) if e.matches(py, &not_found)? => {
                            break Ok(py.None().into_bound(py));
                        }
                        Err(e) => break Err(e),
                    };
                    let seen = tag.get("generation").and_then(Value::as_u64);
                    let expect = expected_generation.or(seen);
                    let del = json!({"Delete": {"workbench": workbench_id, "tag": name,
                        "expect": expect}});
                    match Self::remote_command(py, r, "tag", del) {
                        Ok(out) if out.get("deleted") == Some(&Value::Bool(true)) => {
                            break to_py(py, &tag, None);
                        }
                        Ok(_) => break Ok(py.None().into_bound(py)),
                        // The tag moved between the read and the delete: read it again.
                        Err(e)
                            if expected_generation.is_none()
                                && attempts < 8
                                && e.value(py).getattr("code")?.extract::<String>()?
                                    == "Conflict" => {}
                        Err(e) => break Err(e),
                    }
                };
            }
        };
        let tag = py
            .detach(|| inner.client.delete_tag(workbench_id, name, cond))
            .map_err(|e| errors::commit(py, &inner.client, workbench_id, e))?;
        to_py(py, &tag.as_ref().map_or(Value::Null, tag_json), None)
    }

    /// The change feed strictly after cursor `after` (root-wide, or one workbench's).
    #[pyo3(signature = (*, after=None, workbench_id=None))]
    fn changes(
        &self,
        py: Python<'_>,
        after: Option<String>,
        workbench_id: Option<String>,
    ) -> PyResult<ChangeIter> {
        let inner = self.inner(py)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                // The first page now: a bad cursor or scope fails at the call, as embedded.
                let page = py
                    .detach(|| remote_changes_page(r, workbench_id.as_deref(), after.as_deref()))
                    .map_err(|env| errors::from_envelope(py, &env))?;
                return Ok(ChangeIter {
                    shared: Arc::clone(&self.shared),
                    state: Mutex::new(ChangeState {
                        workbench_id,
                        cursor: after,
                        buffer: page,
                    }),
                });
            }
        };
        // Validate the cursor and scope now, so a bad cursor fails at the call.
        py.detach(|| {
            open_changes(&inner.client, workbench_id.as_deref(), after.as_deref()).map(drop)
        })
        .map_err(|e| errors::sdk(py, &inner.client, workbench_id.as_deref().unwrap_or(""), e))?;
        Ok(ChangeIter {
            shared: Arc::clone(&self.shared),
            state: Mutex::new(ChangeState {
                workbench_id,
                cursor: after,
                buffer: VecDeque::new(),
            }),
        })
    }

    /// Materializes a workbench (or the files under `prefix`) into `directory`, verifying every
    /// digest; returns `[{key, local, size_bytes, digest_uri}]`.
    #[pyo3(signature = (workbench_id, directory, *, prefix=None))]
    fn materialize<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        directory: PathBuf,
        prefix: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let files = py
            .detach(|| match &*inner {
                Inner::Embedded(e) => nokv::materialize::materialize(
                    &e.client,
                    workbench_id,
                    prefix.as_deref(),
                    &directory,
                ),
                Inner::Remote(r) => {
                    // The local half is the embedded one; bodies stream at the listing's read
                    // version, so the tree is one consistent state.
                    let (version, files) = r.client.list_files(workbench_id, prefix.as_deref())?;
                    nokv::materialize::write_files(
                        &files,
                        &directory,
                        &mut |_| {},
                        &mut |path, _, w, advance| {
                            r.client.read_to_writer_at(
                                workbench_id,
                                path.as_str(),
                                version,
                                w,
                                advance,
                            )
                        },
                    )
                }
            })
            .map_err(|e| local_or(py, &inner, workbench_id, e))?;
        let list = PyList::empty(py);
        for f in files {
            let d = PyDict::new(py);
            d.set_item("key", &f.path)?;
            d.set_item("local", f.local.display().to_string())?;
            d.set_item("size_bytes", f.size_bytes)?;
            d.set_item("digest_uri", &f.digest_uri)?;
            list.append(d)?;
        }
        Ok(list.into_any())
    }

    /// Publishes a local file (streamed, digest verified after upload); returns
    /// `{key, generation, size_bytes, digest_uri}`.
    #[pyo3(signature = (workbench_id, file, key, *, content_type=None, replace=false, fields=None, index_json=false))]
    #[allow(clippy::too_many_arguments)]
    fn collect<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        file: PathBuf,
        key: &str,
        content_type: Option<String>,
        replace: bool,
        fields: Option<&Bound<'py, PyAny>>,
        index_json: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let index = nokv::materialize::CollectIndex {
            fields: fields
                .map(|f| index_fields(py, f))
                .transpose()?
                .unwrap_or_default(),
            index_json,
        };
        let ct =
            content_type.unwrap_or_else(|| nokv::materialize::guess_content_type(key).to_string());
        let c = py
            .detach(|| match &*inner {
                Inner::Embedded(e) => nokv::materialize::collect_indexed(
                    &e.client,
                    workbench_id,
                    &file,
                    key,
                    &ct,
                    replace,
                    &index,
                    &mut |_| {},
                ),
                Inner::Remote(r) => nokv::materialize::collect_with(
                    &file,
                    key,
                    &ct,
                    replace,
                    &index,
                    &mut |_| {},
                    &mut |reader, options| r.client.put_reader(workbench_id, key, reader, options),
                ),
            })
            .map_err(|e| local_or(py, &inner, workbench_id, e))?;
        to_py(
            py,
            &json!({
                "key": c.path,
                "generation": c.generation,
                "size_bytes": c.size_bytes,
                "digest_uri": c.digest_uri,
            }),
            None,
        )
    }

    /// Removes the file at `key` (`recursive=false`) or every file under the prefix `key`
    /// (`recursive=true`, bounded batches); returns what `nokv rm [-r]` prints, without
    /// `status`.
    #[pyo3(signature = (workbench_id, key, *, recursive=false, expected_generation=None, request_id=None))]
    fn remove<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        key: &str,
        recursive: bool,
        expected_generation: Option<u64>,
        request_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        if recursive && (expected_generation.is_some() || request_id.is_some()) {
            return Err(errors::invalid(
                py,
                "expected_generation and request_id apply to one path, not to recursive=True",
            ));
        }
        let id = request_id_arg(py, request_id.as_deref())?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                // `nokv rm [-r]` on the server: its envelope keeps every error's details.
                let args = json!({
                    "recursive": recursive,
                    "workbench": workbench_id,
                    "path": key,
                    "expected_generation": expected_generation,
                    "request_id": request_id,
                });
                let out = Self::remote_command(py, r, "rm", args)?;
                return to_py(py, &Value::Object(out), None);
            }
        };
        let client = &inner.client;
        let result = if recursive {
            py.detach(|| client.remove_prefix(workbench_id, key))
                .map(|r| r.envelope(workbench_id, key))
        } else {
            let options = nokv::lifetime::RemoveOptions {
                expected_generation,
                request_id: id,
            };
            py.detach(|| client.remove(workbench_id, key, &options))
                .map(|r| r.envelope(workbench_id, &client.workbench_path(workbench_id)))
        };
        let out = result.map_err(|e| {
            errors::to_pyerr(py, &nokv::workbench::removal_error(client, workbench_id, e))
        })?;
        // The SDK returns the envelope's payload: the CLI's envelope without `status`.
        to_py(py, &Value::Object(envelope_fields(py, out)?), None)
    }

    /// Records, moves or removes a workbench's expiry deadline (`nokv expire`): exactly one of
    /// `after` (a duration text such as `"2h"`), `at` (an RFC 3339 time) or `never=true`.
    /// Returns what `nokv expire` prints, without `status`.
    #[pyo3(signature = (workbench_id, *, after=None, at=None, never=false))]
    fn expire<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        after: Option<String>,
        at: Option<String>,
        never: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let given = usize::from(after.is_some()) + usize::from(at.is_some()) + usize::from(never);
        if given != 1 {
            return Err(errors::invalid(
                py,
                "give exactly one of after=, at= or never=True",
            ));
        }
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                // `nokv expire` on the server: its envelope keeps every error's details.
                let args =
                    json!({"workbench": workbench_id, "after": after, "at": at, "never": never});
                let out = Self::remote_command(py, r, "expire", args)?;
                return to_py(py, &Value::Object(out), None);
            }
        };
        let invalid = |e: nokv::Error| errors::invalid(py, e.to_string());
        let expiry = match (after, at) {
            (Some(d), _) => {
                nokv::expiry::Expiry::After(nokv::expiry::parse_duration(&d).map_err(invalid)?)
            }
            (None, Some(t)) => {
                nokv::expiry::Expiry::At(nokv::expiry::parse_time(&t).map_err(invalid)?)
            }
            (None, None) => nokv::expiry::Expiry::Never,
        };
        let client = &inner.client;
        let receipt = py
            .detach(|| client.expire_workbench(workbench_id, expiry))
            .map_err(|e| errors::sdk(py, client, workbench_id, e))?;
        let out = nokv::expiry::receipt_envelope(&receipt);
        to_py(py, &Value::Object(envelope_fields(py, out)?), None)
    }

    /// Moves the file at `from_key` to `to_key` of the same workbench in one metadata command
    /// (no byte copied); returns what `nokv mv` prints, without `status`.
    #[pyo3(signature = (workbench_id, from_key, to_key, *, expected_generation=None, expected_destination_generation=None, request_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn move_path<'py>(
        &self,
        py: Python<'py>,
        workbench_id: &str,
        from_key: &str,
        to_key: &str,
        expected_generation: Option<u64>,
        expected_destination_generation: Option<u64>,
        request_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let id = request_id_arg(py, request_id.as_deref())?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                // `nokv mv` on the server: its envelope keeps every error's details.
                let args = json!({
                    "workbench": workbench_id,
                    "from": from_key,
                    "to": to_key,
                    "expected_generation": expected_generation,
                    "expected_destination_generation": expected_destination_generation,
                    "request_id": request_id,
                });
                let out = Self::remote_command(py, r, "mv", args)?;
                return to_py(py, &Value::Object(out), None);
            }
        };
        let client = &inner.client;
        let options = nokv::move_path::MoveOptions {
            expected_generation,
            expected_destination_generation,
            request_id: id,
        };
        let out = py
            .detach(|| client.move_path(workbench_id, from_key, to_key, &options))
            .map(|r| r.envelope(workbench_id, &client.workbench_path(workbench_id)))
            .map_err(|e| {
                errors::to_pyerr(py, &nokv::workbench::move_error(client, workbench_id, e))
            })?;
        to_py(py, &Value::Object(envelope_fields(py, out)?), None)
    }

    /// One page of the diff from side `a` to side `b` (each `WB`, `WB@SNAPSHOT` or a commit id);
    /// returns what `nokv diff` prints, without `status`.
    #[pyo3(signature = (a, b, *, cursor=None, limit=1000, patch=false, patch_max_bytes=262144))]
    #[allow(clippy::too_many_arguments)]
    fn diff<'py>(
        &self,
        py: Python<'py>,
        a: &str,
        b: &str,
        cursor: Option<String>,
        limit: usize,
        patch: bool,
        patch_max_bytes: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let options = nokv::diff::DiffOptions {
            cursor,
            limit,
            patch,
            patch_max_bytes,
        };
        let out = match &*inner {
            Inner::Remote(r) => {
                let v = py
                    .detach(|| r.client.diff(a, b, &options))
                    .map_err(|e| errors::remote(py, e))?;
                return to_py(py, &v, None);
            }
            Inner::Embedded(e) => {
                let client = &e.client;
                let sides = nokv::diff::SideSpec::parse(a)
                    .and_then(|sa| nokv::diff::SideSpec::parse(b).map(|sb| (sa, sb)));
                let (sa, sb) = sides.map_err(|err| errors::invalid(py, err.to_string()))?;
                py.detach(|| client.diff(&sa, &sb, &options))
                    .map(|r| r.envelope())
                    .map_err(|err| {
                        let wb = client.diff_error_workbench(&sa, &sb);
                        errors::to_pyerr(py, &nokv::workbench::diff_error(client, &wb, err))
                    })?
            }
        };
        let out = envelope_fields(py, out)?;
        to_py(py, &Value::Object(out), None)
    }

    /// Number of objects (blocks and markers) in the store's object provider (diagnostics; lists
    /// the provider, O(objects)).
    fn object_count(&self, py: Python<'_>) -> PyResult<usize> {
        let inner = self.inner(py)?;
        let inner = inner.embedded(py, "object_count()", EMBEDDED_ONLY)?;
        py.detach(|| inner.client.objects().list(""))
            .map(|l| l.len())
            .map_err(|e| errors::sdk(py, &inner.client, "", e.into()))
    }
}

/// Local file errors of put/materialize/collect are the caller's (`InvalidArguments` naming the
/// file and the OS error); the rest map like every SDK error of the store's kind.
fn local_or(py: Python<'_>, inner: &Inner, workbench_id: &str, e: nokv::Error) -> PyErr {
    match (e, inner) {
        (nokv::Error::LocalIo { op, path, source }, _) => {
            errors::invalid(py, format!("{op} {}: {source}", path.display()))
        }
        (other, Inner::Embedded(emb)) => errors::sdk(py, &emb.client, workbench_id, other),
        (other, Inner::Remote(_)) => errors::remote(py, other),
    }
}

/// A reader that remembers its first error (kind and text).
struct RecordingReader<'a> {
    inner: &'a mut dyn std::io::Read,
    failure: Option<(std::io::ErrorKind, String)>,
}

impl std::io::Read for RecordingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            if self.failure.is_none() && e.kind() != std::io::ErrorKind::Interrupted {
                self.failure = Some((e.kind(), e.to_string()));
            }
        })
    }
}

/// Publishes one Python body through either client. A failing local stream breaks the upload
/// (nothing is published); the caller's read error is reported rather than what it caused (a
/// broken connection, remote).
fn put_body(
    store: &dyn Store,
    workbench_id: &str,
    key: &str,
    body: Body<'_>,
    options: &PutOptions,
) -> nokv::Result<nokv::PutReceipt> {
    let stream = |reader: &mut dyn std::io::Read| {
        let mut recorded = RecordingReader {
            inner: reader,
            failure: None,
        };
        let result = store.put_reader(workbench_id, key, &mut recorded, options);
        match (result, recorded.failure) {
            (Err(_), Some((kind, message))) => Err(nokv::Error::LocalIo {
                op: "read",
                path: PathBuf::from("<file object>"),
                source: std::io::Error::new(kind, message),
            }),
            (result, _) => result,
        }
    };
    match body {
        Body::Slice(bytes) => store.put(workbench_id, key, bytes, options),
        Body::Owned(bytes) => store.put(workbench_id, key, &bytes, options),
        Body::File(path) => {
            let file = std::fs::File::open(&path).map_err(|source| nokv::Error::LocalIo {
                op: "open",
                path: path.clone(),
                source,
            })?;
            let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
            stream(&mut reader)
        }
        Body::Stream(mut reader) => stream(&mut reader),
    }
}

/// One append's outcome, from either client.
struct Appended {
    key: String,
    appended_bytes: u64,
    size_bytes: u64,
    generation: u64,
    created: bool,
    digest: String,
    digest_uri: String,
    content_type: String,
}

impl From<nokv::AppendReceipt> for Appended {
    fn from(r: nokv::AppendReceipt) -> Self {
        Appended {
            key: r.path.as_str().to_string(),
            appended_bytes: r.appended_bytes,
            size_bytes: r.size_bytes,
            generation: r.generation,
            created: r.created,
            digest: r.delta_digest_uri,
            digest_uri: r.body_digest_uri,
            content_type: r.content_type,
        }
    }
}

impl Appended {
    /// The fields of a server's append envelope (`nokv append`'s output).
    fn from_envelope(py: Python<'_>, v: &Map<String, Value>) -> PyResult<Appended> {
        let malformed = |what: &str| {
            errors::remote(
                py,
                nokv::Error::Connection {
                    url: String::new(),
                    reason: format!("the server's append answer lacks a valid {what}"),
                },
            )
        };
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| malformed(k))
        };
        let n = |k: &str| v.get(k).and_then(Value::as_u64).ok_or_else(|| malformed(k));
        Ok(Appended {
            key: s("relative_path")?,
            appended_bytes: n("appended_bytes")?,
            size_bytes: n("size_bytes")?,
            generation: n("generation")?,
            created: v.get("created").and_then(Value::as_bool).unwrap_or(false),
            digest: s("digest")?,
            digest_uri: s("body_digest_uri")?,
            content_type: s("content_type")?,
        })
    }
}

/// The `nokv.errors.NotFound` class.
fn not_found_class(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("nokv.errors")?.getattr("NotFound")
}

/// A tag as `nokv tag` prints it (`{tag, commit_id, tag_generation}`) → the SDK's
/// `{name, commit_id, generation}`.
fn remote_tag(v: &Value) -> Value {
    json!({
        "name": v.get("tag").cloned().unwrap_or(Value::Null),
        "commit_id": v.get("commit_id").cloned().unwrap_or(Value::Null),
        "generation": v.get("tag_generation").cloned().unwrap_or(Value::Null),
    })
}

/// A commit record as `nokv commit show` prints it → the SDK's record (the fields of
/// `commit_info_json`; `created_version` is not in the command's output and is `None`); a
/// missing commit or head is `None`.
fn remote_commit_record<'py>(
    py: Python<'py>,
    shown: PyResult<Map<String, Value>>,
) -> PyResult<Bound<'py, PyAny>> {
    match shown {
        Ok(out) => {
            let mut record = Map::new();
            for key in [
                "commit_id",
                "workbench_id",
                "state",
                "tree_digest_uri",
                "content_digest_uri",
                "manifest_digest_uri",
                "member_count",
                "unique_revision_count",
                "parents",
                "consumer_count",
                "created_version",
            ] {
                record.insert(key.into(), out.get(key).cloned().unwrap_or(Value::Null));
            }
            to_py(py, &Value::Object(record), None)
        }
        Err(e) if e.matches(py, not_found_class(py)?)? => Ok(py.None().into_bound(py)),
        Err(e) => Err(e),
    }
}

fn tag_condition(
    py: Python<'_>,
    expected: Option<u64>,
    create_only: bool,
) -> PyResult<TagCondition> {
    match (expected, create_only) {
        (Some(_), true) => Err(errors::invalid(
            py,
            "give expected_generation or create_only, not both",
        )),
        (Some(g), false) => Ok(TagCondition::Generation(g)),
        (None, true) => Ok(TagCondition::Absent),
        (None, false) => Ok(TagCondition::Any),
    }
}

fn tag_json(t: &TagInfo) -> Value {
    json!({"name": t.name, "commit_id": t.commit_id.to_hex(), "generation": t.tag_generation})
}

fn commit_info_json(c: nokv::commit::CommitInfo) -> Value {
    json!({
        "commit_id": c.commit_id,
        "workbench_id": c.workbench_id,
        "state": c.state,
        "tree_digest_uri": c.tree_digest_uri,
        "content_digest_uri": c.content_digest_uri,
        "manifest_digest_uri": c.manifest_digest_uri,
        "member_count": c.member_count,
        "unique_revision_count": c.unique_revision_count,
        "parents": c.parents,
        "consumer_count": c.consumer_count,
        "created_version": c.created_version,
    })
}

fn open_changes(
    client: &Client,
    workbench_id: Option<&str>,
    after: Option<&str>,
) -> Result<nokv::changes::Changes, nokv::Error> {
    match workbench_id {
        Some(wb) => client.workbench_changes(wb, after),
        None => client.changes(after),
    }
}

/// Changes fetched per refill of a [`ChangeIter`].
const CHANGE_PAGE: usize = 256;

/// One page (at most [`CHANGE_PAGE`] events) of a server's change feed strictly after `after`:
/// `GET /v1/changes`, whose NDJSON lines are what `nokv changes` prints. A failure is the error
/// envelope to raise (the feed's own final error line, or the transport failure's).
fn remote_changes_page(
    remote: &Remote,
    workbench_id: Option<&str>,
    after: Option<&str>,
) -> Result<VecDeque<nokv::changes::ChangeItem>, Value> {
    use nokv_remote::encode_component;
    use std::io::Read;
    let mut query = format!("limit={CHANGE_PAGE}");
    if let Some(wb) = workbench_id {
        query.push_str(&format!("&workbench={}", encode_component(wb)));
    }
    if let Some(c) = after {
        query.push_str(&format!("&after={}", encode_component(c)));
    }
    let broken = |reason: String| {
        errors::remote_envelope(nokv::Error::Connection {
            url: remote.client.url().to_string(),
            reason,
        })
    };
    let stream = remote
        .client
        .changes_stream(&query)
        .map_err(errors::remote_envelope)?;
    // At most CHANGE_PAGE short lines (plus one error line): bounded well below this limit.
    let mut text = String::new();
    stream
        .take(16 << 20)
        .read_to_string(&mut text)
        .map_err(|e| broken(format!("the change feed broke: {e}")))?;
    let mut page = VecDeque::new();
    let mut rest = text.as_str();
    while !rest.trim().is_empty() {
        let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
        if line.trim().is_empty() {
            rest = tail;
            continue;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            // The feed ends with a failure's error envelope, printed over several lines.
            Err(_) => match serde_json::from_str::<Value>(rest) {
                Ok(v) if v.get("status").is_some() => return Err(v),
                _ => return Err(broken("a change feed line is not JSON".into())),
            },
        };
        rest = tail;
        if v.get("status").is_some() {
            return Err(v);
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let n = |k: &str| v.get(k).and_then(Value::as_u64);
        let malformed = || broken("a change feed line lacks its cursor, version or kind".into());
        page.push_back(nokv::changes::ChangeItem {
            cursor: s("cursor").ok_or_else(malformed)?,
            commit_version: n("commit_version").ok_or_else(malformed)?,
            event_sequence: n("event_sequence")
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(malformed)?,
            workbench_id: s("workbench_id").ok_or_else(malformed)?,
            kind: s("kind").ok_or_else(malformed)?,
            path: s("path"),
            before_generation: n("before_generation"),
            after_generation: n("after_generation"),
            snapshot_id: n("snapshot_id"),
            moved_from: s("moved_from"),
            moved_from_generation: n("moved_from_generation"),
        });
    }
    Ok(page)
}

struct ChangeState {
    workbench_id: Option<String>,
    cursor: Option<String>,
    buffer: VecDeque<nokv::changes::ChangeItem>,
}

/// Iterator over the change feed (see `nokv.Store.changes`). It ends when it has caught up;
/// calling `next()` on it again later polls for newer changes. Holds no engine reference between
/// calls, so it does not keep a closed store open.
#[pyclass(module = "nokv._nokv")]
pub struct ChangeIter {
    shared: Arc<Shared>,
    state: Mutex<ChangeState>,
}

#[pymethods]
impl ChangeIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Change>> {
        let inner = self.shared.get(py)?;
        let inner = match &*inner {
            Inner::Embedded(e) => e,
            Inner::Remote(r) => {
                let fetched = py.detach(|| -> Result<Option<nokv::changes::ChangeItem>, Value> {
                    let mut st = self.state.lock();
                    if st.buffer.is_empty() {
                        st.buffer = remote_changes_page(
                            r,
                            st.workbench_id.as_deref(),
                            st.cursor.as_deref(),
                        )?;
                    }
                    let next = st.buffer.pop_front();
                    if let Some(item) = &next {
                        st.cursor = Some(item.cursor.clone());
                    }
                    Ok(next)
                });
                return fetched
                    .map(|o| o.map(Change::from))
                    .map_err(|env| errors::from_envelope(py, &env));
            }
        };
        let fetched = py.detach(
            || -> Result<Option<nokv::changes::ChangeItem>, nokv::Error> {
                let mut st = self.state.lock();
                if st.buffer.is_empty() {
                    let changes = open_changes(
                        &inner.client,
                        st.workbench_id.as_deref(),
                        st.cursor.as_deref(),
                    )?;
                    let mut page = VecDeque::new();
                    for item in changes.take(CHANGE_PAGE) {
                        page.push_back(item?);
                    }
                    st.buffer = page;
                }
                let next = st.buffer.pop_front();
                if let Some(item) = &next {
                    st.cursor = Some(item.cursor.clone());
                }
                Ok(next)
            },
        );
        let wb = self.state.lock().workbench_id.clone().unwrap_or_default();
        fetched
            .map(|o| o.map(Change::from))
            .map_err(|e| errors::sdk(py, &inner.client, &wb, e))
    }

    /// The cursor after the last change yielded (or the starting cursor); `None` from the
    /// beginning of the feed when nothing was yielded.
    #[getter]
    fn cursor(&self) -> Option<String> {
        self.state.lock().cursor.clone()
    }
}
