//! Section/path resolution and presentation paths shared by every tool.
//!
//! A tool addresses `{section?}/{path?}` inside one workbench. The facade joins them into one
//! workbench-relative [`NormPath`] (through the one shared normalizer of `meta`) and projects
//! results back to `{root}/{id}[/{section}][/{relative}]` (docs/workbench.md, "Presentation root").

use meta::NormPath;
use serde_json::{Map, Value};

use crate::client::{Client, SECTIONS};
use nokv_protocol::errors::{ToolError, ToolResult};

/// A resolved tool scope.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// Workbench id.
    pub workbench_id: String,
    /// Section named by the caller (`None`: workbench root).
    pub section: Option<&'static str>,
    /// Path relative to the section (or to the workbench root when `section` is `None`).
    pub relative: Option<String>,
    /// The workbench-relative path (`section/relative`), `None` for the workbench root.
    pub full: Option<NormPath>,
}

impl Scope {
    /// Resolves `section` + `path`. Errors (`InvalidArguments`): unknown section, hostile path,
    /// a path repeating its section as first component, too long once joined.
    pub fn resolve(
        workbench_id: &str,
        section: Option<&str>,
        path: Option<&str>,
    ) -> ToolResult<Scope> {
        let section = match section {
            None => None,
            Some(s) => Some(
                SECTIONS
                    .iter()
                    .copied()
                    .find(|known| *known == s)
                    .ok_or_else(|| {
                        ToolError::invalid_arguments(format!(
                            "unknown section `{s}`; use one of input, scripts, outputs, logs, metadata"
                        ))
                    })?,
            ),
        };
        let relative = match path {
            None | Some("") => None,
            Some(p) => {
                let norm = normalize(p)?;
                if let Some(sec) = section {
                    if norm.components().next() == Some(sec) {
                        return Err(ToolError::invalid_arguments(format!(
                            "path `{p}` repeats its section `{sec}`; give the path relative to the section"
                        )));
                    }
                }
                Some(norm.as_str().to_string())
            }
        };
        // The normalizer's limits apply to the path the agent sent (relative to its section);
        // the stored path gets room for the section prefix.
        let full = match (section, &relative) {
            (None, None) => None,
            (Some(s), None) => Some(normalize(s)?),
            (None, Some(r)) => Some(normalize(r)?),
            (Some(s), Some(r)) => {
                Some(meta::path::section_path(s, &normalize(r)?).map_err(|e| {
                    ToolError::invalid_arguments(format!("invalid path `{}`: {e}", printable(r)))
                })?)
            }
        };
        Ok(Scope {
            workbench_id: workbench_id.to_string(),
            section,
            relative,
            full,
        })
    }

    /// Like [`Scope::resolve`] but requires a file path (write tools, read).
    pub fn resolve_file(
        workbench_id: &str,
        section: Option<&str>,
        path: &str,
    ) -> ToolResult<Scope> {
        let scope = Self::resolve(workbench_id, section, Some(path))?;
        if scope.relative.is_none() {
            return Err(ToolError::invalid_arguments("path must not be empty"));
        }
        Ok(scope)
    }

    /// The scope fields every result carries: `workbench_id`, `workbench_path`, `section`,
    /// `relative_path`, `path`.
    pub fn fields(&self, client: &Client) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(
            "workbench_id".into(),
            Value::from(self.workbench_id.clone()),
        );
        m.insert(
            "workbench_path".into(),
            Value::from(client.workbench_path(&self.workbench_id)),
        );
        m.insert(
            "section".into(),
            self.section.map_or(Value::Null, Value::from),
        );
        m.insert(
            "relative_path".into(),
            self.relative.clone().map_or(Value::Null, Value::from),
        );
        m.insert(
            "path".into(),
            Value::from(present(client, &self.workbench_id, self.full.as_ref())),
        );
        m
    }
}

/// `{root}/{id}[/{full}]`.
pub(crate) fn present(client: &Client, workbench_id: &str, full: Option<&NormPath>) -> String {
    match full {
        None => client.workbench_path(workbench_id),
        Some(p) => format!("{}/{}", client.workbench_path(workbench_id), p.as_str()),
    }
}

/// Splits a workbench-relative path into (section, path relative to it) for result entries:
/// an entry outside the five sections reports `section: null` and its full path.
pub(crate) fn split_section(full: &NormPath) -> (Option<&'static str>, Option<String>) {
    let mut comps = full.components();
    let first = comps.next().unwrap_or_default();
    match SECTIONS.iter().copied().find(|s| *s == first) {
        Some(sec) => {
            let rest: Vec<&str> = comps.collect();
            if rest.is_empty() {
                (Some(sec), None)
            } else {
                (Some(sec), Some(rest.join("/")))
            }
        }
        None => (None, Some(full.as_str().to_string())),
    }
}

fn normalize(p: &str) -> ToolResult<NormPath> {
    meta::normalize(p)
        .map_err(|e| ToolError::invalid_arguments(format!("invalid path `{}`: {e}", printable(p))))
}

/// A path for messages: control characters escaped so NUL and friends stay visible.
fn printable(p: &str) -> String {
    let shown: String = p.chars().take(200).flat_map(char::escape_debug).collect();
    if p.chars().count() > 200 {
        format!("{shown}…")
    } else {
        shown
    }
}

/// Reads an optional string argument.
pub(crate) fn opt_str<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Reads a required string argument (the schema already guaranteed presence and type).
pub(crate) fn req_str<'a>(args: &'a Map<String, Value>, key: &str) -> ToolResult<&'a str> {
    opt_str(args, key).ok_or_else(|| ToolError::invalid_arguments(format!("`{key}` is required")))
}

/// Reads an optional boolean argument with a default.
pub(crate) fn opt_bool(args: &Map<String, Value>, key: &str, default: bool) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(default)
}

/// Reads an optional non-negative integer argument. JSON Schema's `integer` admits `1.0` and
/// integers beyond u64; such a value is never silently dropped: an integral float within range is
/// taken, anything else is `InvalidArguments` naming the field.
pub(crate) fn opt_u64(args: &Map<String, Value>, key: &str) -> ToolResult<Option<u64>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            if let Some(n) = v.as_u64() {
                return Ok(Some(n));
            }
            match v.as_f64() {
                Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 18_446_744_073_709_551_616.0 => {
                    Ok(Some(f as u64))
                }
                _ => Err(ToolError::invalid_arguments(format!(
                    "`{key}` must be a non-negative integer that fits in 64 bits"
                ))
                .with_detail("field", Value::from(key))),
            }
        }
    }
}
