//! Result classes returned to Python: [`Stat`] (a path's card), [`PutResult`], [`AppendResult`],
//! [`Change`]. All are immutable; every attribute is documented in `nokv/_nokv.pyi`.

use meta::PathEntry;
use nokv::client::SECTIONS;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The card of one path (docs/workbench.md `workbench_stat` card): a file (artifact) or an implicit
/// directory. Artifact fields are `None` for directories.
#[pyclass(frozen, get_all, module = "nokv._nokv")]
pub struct Stat {
    /// Last path component (the section name for a section, the workbench id for its root).
    pub name: String,
    /// Presentation path `{root}/{workbench}/{section}/{relative}`.
    pub path: String,
    /// Workbench-relative path (`section/relative`), `""` for the workbench root.
    pub key: String,
    /// Section (`input`, `scripts`, `outputs`, `logs`, `metadata`) or `None` outside them.
    pub section: Option<String>,
    /// Path below the section (or below the workbench root outside sections), `None` for a
    /// section or the root.
    pub relative_path: Option<String>,
    /// `"file"` or `"directory"`.
    pub kind: String,
    /// Body size in bytes (files).
    pub size_bytes: Option<u64>,
    /// Direct children (directories, when the listing reported it).
    pub entry_count: Option<u64>,
    /// Path generation: the conditional-write token (files).
    pub generation: Option<u64>,
    /// Content type (files).
    pub content_type: Option<String>,
    /// `sha256:` URI of the whole body (files).
    pub digest_uri: Option<String>,
    /// Who published it (files).
    pub producer: Option<String>,
    /// Caller manifest id (files, when set).
    pub manifest_id: Option<String>,
    /// Custom typed index fields of the body (files; `None` when unknown).
    pub fields: Option<Py<PyDict>>,
}

#[pymethods]
impl Stat {
    /// True for files (artifacts).
    #[getter]
    fn is_file(&self) -> bool {
        self.kind == "file"
    }

    /// True for implicit directories (sections, prefixes of files, the workbench root).
    #[getter]
    fn is_dir(&self) -> bool {
        self.kind == "directory"
    }

    fn __repr__(&self) -> String {
        match self.kind.as_str() {
            "file" => format!(
                "Stat(key={:?}, kind='file', size_bytes={}, generation={}, content_type={:?})",
                self.key,
                self.size_bytes.unwrap_or(0),
                self.generation.unwrap_or(0),
                self.content_type.as_deref().unwrap_or("")
            ),
            _ => format!("Stat(key={:?}, kind='directory')", self.key),
        }
    }
}

/// Splits a workbench-relative path into `(section, relative)`.
pub fn split_key(key: &str) -> (Option<String>, Option<String>) {
    if key.is_empty() {
        return (None, None);
    }
    let (first, rest) = match key.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (key, None),
    };
    if SECTIONS.contains(&first) {
        (Some(first.to_string()), rest.map(str::to_string))
    } else {
        (None, Some(key.to_string()))
    }
}

impl Stat {
    /// The card of a published file.
    pub fn file(
        py: Python<'_>,
        workbench_path: &str,
        key: &str,
        entry: &PathEntry,
    ) -> PyResult<Stat> {
        let (section, relative_path) = split_key(key);
        let fields = match meta::index::projection::decode_projection(&entry.index_projection) {
            Ok(fields) => {
                let dict = PyDict::new(py);
                for (field, value) in &fields {
                    let json = nokv::index_fields::index_value_to_json(value);
                    dict.set_item(field.as_str(), crate::convert::to_py(py, &json, None)?)?;
                }
                Some(dict.unbind())
            }
            Err(_) => None,
        };
        Ok(Stat {
            name: key.rsplit('/').next().unwrap_or(key).to_string(),
            path: format!("{workbench_path}/{key}"),
            key: key.to_string(),
            section,
            relative_path,
            kind: "file".into(),
            size_bytes: Some(entry.logical_size),
            entry_count: None,
            generation: Some(entry.generation),
            content_type: Some(entry.content_type.clone()),
            digest_uri: Some(entry.body_digest_uri.clone()),
            producer: Some(entry.producer.clone()),
            manifest_id: entry.manifest_id.clone(),
            fields,
        })
    }

    /// A card from the facade's JSON (`workbench_stat` card or a `workbench_list` entry).
    pub fn from_json(workbench_path: &str, card: &serde_json::Value) -> Stat {
        let s = |k: &str| card.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let n = |k: &str| card.get(k).and_then(serde_json::Value::as_u64);
        let section = s("section");
        let relative_path = s("relative_path");
        let key = match (&section, &relative_path) {
            (Some(sec), Some(rel)) => format!("{sec}/{rel}"),
            (Some(sec), None) => sec.clone(),
            (None, Some(rel)) => rel.clone(),
            (None, None) => String::new(),
        };
        let path = s("path").unwrap_or_else(|| {
            if key.is_empty() {
                workbench_path.to_string()
            } else {
                format!("{workbench_path}/{key}")
            }
        });
        Stat {
            name: s("name").unwrap_or_else(|| key.rsplit('/').next().unwrap_or("").to_string()),
            path,
            key,
            section,
            relative_path,
            kind: s("kind").unwrap_or_else(|| "directory".into()),
            size_bytes: n("size_bytes"),
            entry_count: n("entry_count"),
            generation: n("generation"),
            content_type: s("content_type"),
            digest_uri: s("digest_uri"),
            producer: s("producer"),
            manifest_id: s("manifest_id"),
            fields: None,
        }
    }
}

/// What [`crate::core::Core::put`] published.
#[pyclass(frozen, get_all, module = "nokv._nokv")]
pub struct PutResult {
    /// Workbench id.
    pub workbench_id: String,
    /// Workbench-relative path (`section/relative`).
    pub key: String,
    /// Section, or `None` outside the five sections.
    pub section: Option<String>,
    /// Path below the section.
    pub relative_path: Option<String>,
    /// Presentation path.
    pub path: String,
    /// Body size in bytes.
    pub size_bytes: u64,
    /// New generation of the path.
    pub generation: u64,
    /// `sha256:` URI of the whole body.
    pub digest_uri: String,
    /// Content type recorded.
    pub content_type: String,
    /// True when this was a replacement (`replace=True`).
    pub replace: bool,
    /// True when the path was absent before.
    pub created: bool,
    /// True when this is the stored receipt of an earlier put with the same `request_id`
    /// (nothing was written by this call).
    pub idempotent_replay: bool,
}

#[pymethods]
impl PutResult {
    fn __repr__(&self) -> String {
        format!(
            "PutResult(key={:?}, size_bytes={}, generation={}, digest_uri={:?})",
            self.key, self.size_bytes, self.generation, self.digest_uri
        )
    }
}

/// What [`crate::core::Core::append`] did.
#[pyclass(frozen, get_all, module = "nokv._nokv")]
pub struct AppendResult {
    /// Workbench id.
    pub workbench_id: String,
    /// Workbench-relative path.
    pub key: String,
    /// Section, or `None` outside the five sections.
    pub section: Option<String>,
    /// Path below the section.
    pub relative_path: Option<String>,
    /// Presentation path.
    pub path: String,
    /// Bytes appended by this call.
    pub appended_bytes: u64,
    /// New total size in bytes.
    pub size_bytes: u64,
    /// New generation.
    pub generation: u64,
    /// True when the append created the artifact.
    pub created: bool,
    /// `sha256:` URI of the appended bytes only (the Workbench `digest`).
    pub digest: String,
    /// `sha256:` URI of the whole resulting body.
    pub digest_uri: String,
    /// Content type after the append.
    pub content_type: String,
}

#[pymethods]
impl AppendResult {
    fn __repr__(&self) -> String {
        format!(
            "AppendResult(key={:?}, appended_bytes={}, size_bytes={}, generation={})",
            self.key, self.appended_bytes, self.size_bytes, self.generation
        )
    }
}

/// One visible change of the change feed (docs/metadata-format.md, ReadChanges).
#[pyclass(frozen, get_all, module = "nokv._nokv")]
pub struct Change {
    /// Opaque cursor resuming right after this change (`store.changes(after=cursor)`).
    pub cursor: String,
    /// Commit version of the emitting command.
    pub commit_version: u64,
    /// Sequence within that command.
    pub event_sequence: u32,
    /// Workbench id.
    pub workbench_id: String,
    /// Event kind in snake case (`workspace_created`, `artifact_published`, …).
    pub kind: String,
    /// Workbench-relative path of artifact events.
    pub path: Option<String>,
    /// Generation before the change (artifact events).
    pub before_generation: Option<u64>,
    /// Generation after the change (artifact events).
    pub after_generation: Option<u64>,
    /// Snapshot id of snapshot events.
    pub snapshot_id: Option<u64>,
    /// Source path of an `artifact_moved` change (`path` is the destination).
    pub moved_from: Option<String>,
    /// Generation the source path had when it was moved.
    pub moved_from_generation: Option<u64>,
}

#[pymethods]
impl Change {
    fn __repr__(&self) -> String {
        format!(
            "Change(commit_version={}, workbench_id={:?}, kind={:?}, path={:?})",
            self.commit_version, self.workbench_id, self.kind, self.path
        )
    }
}

impl From<nokv::changes::ChangeItem> for Change {
    fn from(c: nokv::changes::ChangeItem) -> Self {
        Change {
            cursor: c.cursor,
            commit_version: c.commit_version,
            event_sequence: c.event_sequence,
            workbench_id: c.workbench_id,
            kind: c.kind,
            path: c.path,
            before_generation: c.before_generation,
            after_generation: c.after_generation,
            snapshot_id: c.snapshot_id,
            moved_from: c.moved_from,
            moved_from_generation: c.moved_from_generation,
        }
    }
}
