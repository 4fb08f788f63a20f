//! The human commands that browse a workbench: `nokv ls WB [PATH]`, `nokv tree WB [PATH]` and
//! `nokv log WB`. Each prints readable text, or with `--json` one JSON object (the success
//! fields with `"status":"success"`, or the Workbench error envelope). A failure in text mode is
//! `nokv: …` on stderr; exit 0 on success, 1 on an error.
//!
//! They are built on the calls every front door uses: `ls` pages the `workbench_list` tool of the
//! Workbench facade, `tree` lists every file at one read version
//! ([`nokv::materialize::list_files`], the listing `nokv materialize` writes from), `log` reads
//! the workbench's commit head, follows commit parents and names the tags
//! ([`Client::commit_head`], [`Client::commit_info`], [`Client::list_tags`]). The CLI runs them
//! on the store opened read-only; `nokv serve` runs the same functions for
//! `POST /v1/commands/{ls|tree|log}`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;
use std::path::Path;

use clap::Args;
use serde_json::{json, Map, Value};

use crate::{print_json, snapshot_selector, EXIT_OK, EXIT_TOOL_ERROR};
use nokv::client::Client;
use nokv::printable::printable;
use nokv::workbench::commit_tools::commit_error;
use nokv::workbench::errors::ToolError;
use nokv::workbench::{store_error, tool_error, Workbench};

/// Most commits `nokv log` prints by default.
pub const DEFAULT_LOG_LIMIT: usize = 50;

/// `nokv ls` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct LsArgs {
    /// Workbench id.
    pub workbench: String,
    /// Directory (or file) relative to the workbench root, e.g. `outputs` or `outputs/plots`
    /// (default: the workbench root, whose entries are the five sections and any file written
    /// outside them).
    pub path: Option<String>,
    /// Long format: kind and size in bytes before each name.
    #[arg(long, short = 'l')]
    pub long: bool,
    /// List a snapshot (id or name) instead of the live state.
    #[arg(long, value_name = "SNAPSHOT")]
    pub at_snapshot: Option<String>,
    /// Print one JSON object (`entries` with the `workbench_list` fields of every entry).
    #[arg(long)]
    pub json: bool,
}

/// `nokv tree` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct TreeArgs {
    /// Workbench id.
    pub workbench: String,
    /// Only this directory (or file) relative to the workbench root, e.g. `outputs`.
    pub path: Option<String>,
    /// Print one JSON object (`files`: path, size, generation, digest, content type).
    #[arg(long)]
    pub json: bool,
}

/// `nokv log` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct LogArgs {
    /// Workbench id.
    pub workbench: String,
    /// Most commits to print (at least 1; default 50).
    #[arg(long, short = 'n', default_value_t = DEFAULT_LOG_LIMIT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub limit: usize,
    /// Print one JSON object (`commits`, newest first).
    #[arg(long)]
    pub json: bool,
}

/// How a browse command reports: text (failures on stderr) or one JSON object on stdout.
struct Report<'a> {
    json: bool,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
}

impl Report<'_> {
    fn fail(&mut self, e: ToolError) -> u8 {
        if self.json {
            print_json(self.out, &e.envelope());
        } else {
            let _ = writeln!(self.err, "nokv: {}", printable(&e.message));
        }
        EXIT_TOOL_ERROR
    }

    fn success(&mut self, fields: Value, text: impl FnOnce(&mut dyn Write)) -> u8 {
        if self.json {
            let mut m = Map::new();
            m.insert("status".into(), Value::from("success"));
            if let Value::Object(mut f) = fields {
                m.append(&mut f);
            }
            print_json(self.out, &Value::Object(m));
        } else {
            text(self.out);
        }
        EXIT_OK
    }
}

/// One browse command's body on an open client, reporting through `report`.
type Browse<A> = fn(&Client, &A, &mut Report<'_>) -> u8;

/// Runs `body` on the existing store in `dir`, opened read-only (a failure to open is reported
/// like any other); returns the exit code.
fn run_in_dir<A>(
    dir: &Path,
    args: &A,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
    body: Browse<A>,
) -> u8 {
    let mut report = Report { json, out, err };
    match crate::read_only::open_existing(dir, true) {
        Ok(client) => body(&client, args, &mut report),
        Err(e) => report.fail(store_error(e)),
    }
}

/// Runs `body` on an open client (the server runs the browse commands for `nokv --server`);
/// returns the exit code.
fn run_on_client<A>(
    client: &Client,
    args: &A,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
    body: Browse<A>,
) -> u8 {
    body(client, args, &mut Report { json, out, err })
}

/// Runs `nokv ls` on the store in `dir` (opened read-only); returns the exit code.
pub fn run_ls(dir: &Path, args: LsArgs, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    run_in_dir(dir, &args, args.json, out, err, ls)
}

/// [`run_ls`] on an open client (the server runs it for `nokv --server`).
pub fn run_ls_with(client: &Client, args: LsArgs, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    run_on_client(client, &args, args.json, out, err, ls)
}

fn ls(client: &Client, args: &LsArgs, report: &mut Report<'_>) -> u8 {
    let facade = Workbench::new(client.clone());
    let mut entries: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut first: Option<Map<String, Value>> = None;
    loop {
        let mut input = json!({
            "id": args.workbench,
            "section": null,
            "path": args.path.clone().unwrap_or_default(),
            "limit": 100,
            "cursor": cursor,
        });
        if let Some(s) = &args.at_snapshot {
            input["at_snapshot"] = snapshot_selector(s);
        }
        let mut page = match facade.call_tool("workbench_list", &input) {
            Ok(p) => p,
            Err(e) => return report.fail(e),
        };
        if let Some(Value::Array(batch)) = page.remove("entries") {
            entries.extend(batch);
        }
        cursor = page
            .get("next_cursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if first.is_none() {
            first = Some(page);
        }
        if cursor.is_none() {
            break;
        }
    }
    let scope = first.unwrap_or_default();
    let mut fields = json!({
        "workbench_id": args.workbench,
        "path": scope.get("path").cloned().unwrap_or(Value::Null),
        "entry_count": entries.len(),
        "entries": entries,
    });
    if let Some(s) = &args.at_snapshot {
        fields["at_snapshot"] = snapshot_selector(s);
    }
    let listed = fields["entries"].as_array().cloned().unwrap_or_default();
    let long = args.long;
    report.success(fields, |out| {
        for e in &listed {
            let name = e.get("name").and_then(Value::as_str).unwrap_or_default();
            let dir = e.get("kind").and_then(Value::as_str) == Some("directory");
            let name = printable(name);
            let shown = if dir {
                format!("{name}/")
            } else {
                name.into_owned()
            };
            if long {
                let size = match e.get("size_bytes").and_then(Value::as_u64) {
                    Some(n) => n.to_string(),
                    None => "-".into(),
                };
                let kind = if dir { "dir " } else { "file" };
                let _ = writeln!(out, "{kind}  {size:>12}  {shown}");
            } else {
                let _ = writeln!(out, "{shown}");
            }
        }
    })
}

/// Runs `nokv tree` on the store in `dir` (opened read-only); returns the exit code.
pub fn run_tree(dir: &Path, args: TreeArgs, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    run_in_dir(dir, &args, args.json, out, err, tree)
}

/// [`run_tree`] on an open client (the server runs it for `nokv --server`).
pub fn run_tree_with(
    client: &Client,
    args: TreeArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    run_on_client(client, &args, args.json, out, err, tree)
}

/// `n` bytes in words: "1 byte", "0 bytes", "15241 bytes".
fn byte_count(n: u64) -> String {
    if n == 1 {
        "1 byte".into()
    } else {
        format!("{n} bytes")
    }
}

/// One directory of the rendered tree: subdirectories and files (name → size in bytes).
#[derive(Default)]
struct Dir {
    dirs: BTreeMap<String, Dir>,
    files: BTreeMap<String, u64>,
}

impl Dir {
    fn insert(&mut self, path: &str, size: u64) {
        let mut node = self;
        let mut parts = path.split('/').peekable();
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                node.files.insert(part.to_string(), size);
            } else {
                node = node.dirs.entry(part.to_string()).or_default();
            }
        }
    }

    /// Writes the children of this directory, names in byte order (directories end in `/`).
    fn render(&self, prefix: &str, out: &mut dyn Write) {
        let mut names: Vec<(&str, Option<&Dir>, Option<u64>)> = Vec::new();
        for (n, d) in &self.dirs {
            names.push((n, Some(d), None));
        }
        for (n, s) in &self.files {
            names.push((n, None, Some(*s)));
        }
        names.sort_by(|a, b| a.0.cmp(b.0));
        let count = names.len();
        for (i, (name, dir, size)) in names.into_iter().enumerate() {
            let name = printable(name);
            let last = i + 1 == count;
            let branch = if last { "└── " } else { "├── " };
            match (dir, size) {
                (Some(d), _) => {
                    let _ = writeln!(out, "{prefix}{branch}{name}/");
                    let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
                    d.render(&deeper, out);
                }
                (None, Some(s)) => {
                    let _ = writeln!(out, "{prefix}{branch}{name}  ({})", byte_count(s));
                }
                (None, None) => {}
            }
        }
    }
}

fn tree(client: &Client, args: &TreeArgs, report: &mut Report<'_>) -> u8 {
    let listed = nokv::materialize::list_files(client, &args.workbench, args.path.as_deref());
    let (version, files) = match listed {
        Ok(x) => x,
        Err(e) => return report.fail(tool_error(client, &args.workbench, e)),
    };
    let total: u64 = files.iter().map(|(_, e)| e.logical_size).sum();
    let fields = json!({
        "workbench_id": args.workbench,
        "workbench_path": client.workbench_path(&args.workbench),
        "read_version": version,
        "file_count": files.len(),
        "total_bytes": total,
        "files": files.iter().map(|(p, e)| json!({
            "path": p.as_str(),
            "size_bytes": e.logical_size,
            "generation": e.generation,
            "digest_uri": e.body_digest_uri,
            "content_type": e.content_type,
        })).collect::<Vec<_>>(),
    });
    // Below a PATH the tree starts at it: names relative to it (a PATH naming one file shows
    // that file's name).
    let base = args
        .path
        .as_deref()
        .map(|p| p.trim_matches('/'))
        .filter(|p| !p.is_empty());
    let mut root = Dir::default();
    for (p, e) in &files {
        let full = p.as_str();
        let shown = match base {
            Some(b) if full == b => full.rsplit('/').next().unwrap_or(full),
            Some(b) => full
                .strip_prefix(b)
                .and_then(|r| r.strip_prefix('/'))
                .unwrap_or(full),
            None => full,
        };
        root.insert(shown, e.logical_size);
    }
    let title = match &args.path {
        Some(p) if !p.trim_matches('/').is_empty() => {
            format!("{}/{}", args.workbench, p.trim_matches('/'))
        }
        _ => args.workbench.clone(),
    };
    let count = files.len();
    report.success(fields, |out| {
        let _ = writeln!(out, "{}", printable(&title));
        root.render("", out);
        let noun = if count == 1 { "file" } else { "files" };
        let _ = writeln!(out, "\n{count} {noun}, {}", byte_count(total));
    })
}

/// Runs `nokv log` on the store in `dir` (opened read-only); returns the exit code.
pub fn run_log(dir: &Path, args: LogArgs, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    run_in_dir(dir, &args, args.json, out, err, log)
}

/// [`run_log`] on an open client (the server runs it for `nokv --server`).
pub fn run_log_with(
    client: &Client,
    args: LogArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    run_on_client(client, &args, args.json, out, err, log)
}

/// The commits of a workbench's log, newest first (by the version that created them): the
/// commit head and every commit reachable from it through parents, plus every commit a tag of
/// the workbench names; at most `limit`.
fn log(client: &Client, args: &LogArgs, report: &mut Report<'_>) -> u8 {
    let wb = &args.workbench;
    if args.limit == 0 {
        return report.fail(ToolError::invalid_arguments(
            "the commit limit (--limit, -n) must be at least 1",
        ));
    }
    let head = match client.commit_head(wb) {
        Ok(h) => h,
        Err(e) => return report.fail(commit_error(client, wb, e)),
    };
    let tags = match client.list_tags(wb) {
        Ok(t) => t,
        Err(e) => return report.fail(commit_error(client, wb, e)),
    };
    let mut tags_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &tags {
        tags_of
            .entry(t.commit_id.to_hex())
            .or_default()
            .push(t.name.clone());
    }
    let head_id = head.as_ref().map(|h| h.commit_id.clone());
    // Breadth-first from the head through parents, then the tagged commits; each read once.
    let mut queue: VecDeque<String> = VecDeque::new();
    queue.extend(head_id.iter().cloned());
    queue.extend(tags_of.keys().cloned());
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut commits = Vec::new();
    // Bounded: the walk reads at most a few times `limit` commits (ancestors beyond the limit
    // could only sort after the ones kept, as a child is always created after its parents).
    let budget = args.limit.saturating_mul(4).max(args.limit + tags_of.len());
    while let Some(id) = queue.pop_front() {
        if !seen.insert(id.clone()) || commits.len() >= budget {
            continue;
        }
        match client.commit_info(&id) {
            Ok(Some(c)) => {
                queue.extend(c.parents.iter().cloned());
                commits.push(c);
            }
            // A parent retired and reaped, or a tag naming a commit gone: shown by id only.
            Ok(None) => {}
            Err(e) => return report.fail(commit_error(client, wb, e)),
        }
    }
    commits.sort_by(|a, b| {
        b.created_version
            .cmp(&a.created_version)
            .then_with(|| a.commit_id.cmp(&b.commit_id))
    });
    commits.truncate(args.limit);
    let items: Vec<Value> = commits
        .iter()
        .map(|c| {
            json!({
                "commit_id": c.commit_id,
                "workbench_id": c.workbench_id,
                "head": head_id.as_deref() == Some(c.commit_id.as_str()),
                "tags": tags_of.get(&c.commit_id).cloned().unwrap_or_default(),
                "parents": c.parents,
                "state": c.state,
                "member_count": c.member_count,
                "created_version": c.created_version,
                "content_digest_uri": c.content_digest_uri,
                "tree_digest_uri": c.tree_digest_uri,
            })
        })
        .collect();
    let fields = json!({
        "workbench_id": wb,
        "head": head_id,
        "commit_count": items.len(),
        "commits": items,
    });
    report.success(fields, |out| {
        if commits.is_empty() {
            let _ = writeln!(out, "workbench `{}` has no commits", printable(wb));
            return;
        }
        for (i, c) in commits.iter().enumerate() {
            if i > 0 {
                let _ = writeln!(out);
            }
            let mut marks = Vec::new();
            if head_id.as_deref() == Some(c.commit_id.as_str()) {
                marks.push("HEAD".to_string());
            }
            for t in tags_of.get(&c.commit_id).into_iter().flatten() {
                marks.push(format!("tag: {}", printable(t)));
            }
            let marks = if marks.is_empty() {
                String::new()
            } else {
                format!(" ({})", marks.join(", "))
            };
            let _ = writeln!(out, "commit {}{marks}", c.commit_id);
            if c.parents.is_empty() {
                let _ = writeln!(out, "Parents:   (none)");
            }
            for p in &c.parents {
                let _ = writeln!(out, "Parent:    {p}");
            }
            if c.workbench_id != *wb {
                let _ = writeln!(out, "Workbench: {}", printable(&c.workbench_id));
            }
            let _ = writeln!(
                out,
                "State:     {}, {} files, created at version {}",
                c.state, c.member_count, c.created_version
            );
            let _ = writeln!(out, "Content:   {}", c.content_digest_uri);
        }
    })
}
