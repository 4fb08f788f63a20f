//! `nokv._nokv.Core`: one open embedded store (the Rust SDK [`nokv::Client`] and the Workbench
//! facade [`nokv::workbench::Workbench`]) behind the Python classes `nokv.Store` and
//! `nokv.Workbench`.
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
use nokv::{Client, ClientOptions, IndexFields, IndexValue, PutOptions, WriteCondition};
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use serde_json::{json, Map, Value};

use crate::convert::{from_py, to_py};
use crate::errors;
use crate::io::{PyReader, RangeReader};
use crate::types::{split_key, AppendResult, Change, PutResult, Stat};

/// The open store shared by a `Core` and every object derived from it (file readers, change
/// iterators); `None` once closed.
pub struct Shared {
    inner: RwLock<Option<Arc<Inner>>>,
}

/// The SDK client and the facade over it.
pub struct Inner {
    /// The Rust SDK.
    pub client: Client,
    /// The Workbench facade (the 18 tools).
    pub facade: nokv::workbench::Workbench,
}

impl Shared {
    /// The open store, or `InvalidState` once closed.
    pub fn get(&self, py: Python<'_>) -> PyResult<Arc<Inner>> {
        self.inner.read().clone().ok_or_else(|| errors::closed(py))
    }
}

/// One open store (see the module docs).
#[pyclass(frozen, module = "nokv._nokv")]
pub struct Core {
    shared: Arc<Shared>,
    dir: PathBuf,
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
    fn inner(&self, py: Python<'_>) -> PyResult<Arc<Inner>> {
        self.shared.get(py)
    }

    /// The path entry (and a reader at its version) of a file, live or at a snapshot; `None`
    /// when no file is at `key`.
    fn entry_at(
        inner: &Inner,
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

    /// The facade call behind every JSON-shaped method: the result fields, or the mapped
    /// exception.
    fn call_json(
        py: Python<'_>,
        inner: &Inner,
        tool: &str,
        input: &Value,
    ) -> PyResult<Map<String, Value>> {
        py.detach(|| inner.facade.call_tool(tool, input))
            .map_err(|e| errors::to_pyerr(py, &e))
    }

    /// The file at `key` (live or at a snapshot) with its reader; a directory is `NotArtifact`,
    /// a missing path `NotFound` (both as the facade reports them).
    fn file_at(
        &self,
        py: Python<'_>,
        inner: &Inner,
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
        Self::call_json(py, inner, "workbench_stat", &input)?;
        Err(errors::to_pyerr(
            py,
            &ToolError::not_artifact(&format!(
                "{}/{key}",
                inner.client.workbench_path(workbench_id)
            )),
        ))
    }
}

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
        if !(lock_timeout.is_finite() && lock_timeout >= 0.0) {
            return Err(errors::invalid(
                py,
                "lock_timeout must be a finite number of seconds >= 0",
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
        Ok(Core {
            shared: Arc::new(Shared {
                inner: RwLock::new(Some(Arc::new(Inner { client, facade }))),
            }),
            dir: path,
        })
    }

    /// Closes the store: new calls fail with `InvalidState`; calls already running finish; the
    /// engine is dropped (its directory lock released) before this returns. Idempotent.
    fn close(&self, py: Python<'_>) {
        let taken = self.shared.inner.write().take();
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
        self.shared.inner.read().is_none()
    }

    /// The store directory.
    #[getter]
    fn directory(&self) -> PathBuf {
        self.dir.clone()
    }

    /// The store's presentation root (e.g. `/agents/local/wb`).
    #[getter]
    fn presentation_root(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.inner(py)?.client.presentation_root().to_string())
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
            Ok(input) => py.detach(|| inner.facade.call(name, &input)),
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

    /// Publishes a body at `key` (create-only, or replace under a generation CAS).
    #[pyo3(signature = (workbench_id, key, data, *, replace=false, expected_generation=None,
        content_type=None, fields=None, index_json=false))]
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
    ) -> PyResult<PutResult> {
        let inner = self.inner(py)?;
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
                "text/plain; charset=utf-8"
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
        };
        let client = &inner.client;
        let receipt = py
            .detach(|| match body {
                Body::Slice(bytes) => client.put(workbench_id, key, bytes, &options),
                Body::Owned(bytes) => client.put(workbench_id, key, &bytes, &options),
                Body::File(path) => {
                    let file =
                        std::fs::File::open(&path).map_err(|source| nokv::Error::LocalIo {
                            op: "open",
                            path: path.clone(),
                            source,
                        })?;
                    client.put_reader(
                        workbench_id,
                        key,
                        std::io::BufReader::with_capacity(1 << 20, file),
                        &options,
                    )
                }
                Body::Stream(reader) => client.put_reader(workbench_id, key, reader, &options),
            })
            .map_err(|e| match e {
                nokv::Error::LocalIo { op, path, source } => {
                    errors::invalid(py, format!("{op} {}: {source}", path.display()))
                }
                other => errors::sdk(py, client, workbench_id, other),
            })?;
        let key = receipt.path.as_str().to_string();
        let (section, relative_path) = split_key(&key);
        Ok(PutResult {
            workbench_id: workbench_id.to_string(),
            path: format!("{}/{key}", client.workbench_path(workbench_id)),
            key,
            section,
            relative_path,
            size_bytes: receipt.size_bytes,
            generation: receipt.generation,
            digest_uri: receipt.digest_uri,
            content_type: receipt.content_type,
            replace,
            created: receipt.created,
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
            (&owned, "text/plain; charset=utf-8")
        } else if let Some(b) = buffer_bytes(py, data) {
            owned = b.as_bytes().to_vec();
            (&owned, nokv::client::OCTET_STREAM)
        } else {
            return Err(errors::invalid(
                py,
                "data must be bytes, a bytes-like object or str",
            ));
        };
        let client = &inner.client;
        let r = py
            .detach(|| {
                client.append_with_create_type(
                    workbench_id,
                    key,
                    bytes,
                    content_type.as_deref(),
                    create_type,
                    PRODUCER,
                )
            })
            .map_err(|e| errors::sdk(py, client, workbench_id, e))?;
        let key = r.path.as_str().to_string();
        let (section, relative_path) = split_key(&key);
        Ok(AppendResult {
            workbench_id: workbench_id.to_string(),
            path: format!("{}/{key}", client.workbench_path(workbench_id)),
            key,
            section,
            relative_path,
            appended_bytes: r.appended_bytes,
            size_bytes: r.size_bytes,
            generation: r.generation,
            created: r.created,
            digest: r.delta_digest_uri,
            digest_uri: r.body_digest_uri,
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
        let sel = at_snapshot.map(|a| selector(py, a)).transpose()?;
        let found = if key.is_empty() {
            None
        } else {
            py.detach(|| Self::entry_at(&inner, workbench_id, key, sel.as_ref()))
                .map_err(|e| errors::sdk(py, &inner.client, workbench_id, e))?
        };
        let wb_path = inner.client.workbench_path(workbench_id);
        if let Some((_, entry)) = found {
            let norm = Client::normalize(key)
                .map_err(|e| errors::sdk(py, &inner.client, workbench_id, e))?;
            return Stat::file(py, &wb_path, norm.as_str(), &entry);
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
        let wb_path = inner.client.workbench_path(workbench_id);
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
        let (read, entry) = self.file_at(py, &inner, workbench_id, key, at_snapshot)?;
        let rows = py
            .detach(|| read.manifest(&entry.artifact_revision_id))
            .map_err(|e| errors::sdk(py, &inner.client, workbench_id, e.into()))?;
        Py::new(py, RangeReader::new(Arc::clone(&self.shared), &entry, rows))
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
        nokv::workbench::canonical::canonical_json(&manifest)
            .map_err(|e| errors::to_pyerr(py, &e))?;
        let client = &inner.client;
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
        py.detach(|| inner.client.tree_content_digest(workbench_id))
            .map_err(|e| errors::sdk(py, &inner.client, workbench_id, e))
    }

    /// The commit head of a workbench (`None`: never committed).
    fn commit_head<'py>(&self, py: Python<'py>, workbench_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let info = py
            .detach(|| inner.client.commit_head(workbench_id))
            .map_err(|e| errors::commit(py, &inner.client, workbench_id, e))?;
        to_py(py, &info.map_or(Value::Null, commit_info_json), None)
    }

    /// A commit record by id (`None`: no such commit).
    fn commit_info<'py>(&self, py: Python<'py>, commit_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
        let info = py
            .detach(|| inner.client.commit_info(commit_id))
            .map_err(|e| errors::commit(py, &inner.client, "", e))?;
        to_py(py, &info.map_or(Value::Null, commit_info_json), None)
    }

    /// Every tag of a workbench: `[{name, commit_id, generation}]`.
    fn tags<'py>(&self, py: Python<'py>, workbench_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner(py)?;
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
            .detach(|| {
                nokv::materialize::materialize(
                    &inner.client,
                    workbench_id,
                    prefix.as_deref(),
                    &directory,
                )
            })
            .map_err(|e| local_or_sdk(py, &inner.client, workbench_id, e))?;
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
            .detach(|| {
                nokv::materialize::collect_indexed(
                    &inner.client,
                    workbench_id,
                    &file,
                    key,
                    &ct,
                    replace,
                    &index,
                    &mut |_| {},
                )
            })
            .map_err(|e| local_or_sdk(py, &inner.client, workbench_id, e))?;
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

    /// Number of objects (blocks and markers) in the store's object provider (diagnostics; lists
    /// the provider, O(objects)).
    fn object_count(&self, py: Python<'_>) -> PyResult<usize> {
        let inner = self.inner(py)?;
        py.detach(|| inner.client.objects().list(""))
            .map(|l| l.len())
            .map_err(|e| errors::sdk(py, &inner.client, "", e.into()))
    }
}

/// Local file errors of materialize/collect are the caller's (`InvalidArguments` naming the file
/// and the OS error); the rest map like every SDK error.
fn local_or_sdk(py: Python<'_>, client: &Client, workbench_id: &str, e: nokv::Error) -> PyErr {
    match e {
        nokv::Error::LocalIo { op, path, source } => {
            errors::invalid(py, format!("{op} {}: {source}", path.display()))
        }
        other => errors::sdk(py, client, workbench_id, other),
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
