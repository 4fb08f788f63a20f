//! A store the process may read but not write (issue 16, item 3) serves every reading call; every
//! writing call answers the typed, non-retryable read-only refusal (`InvalidState`,
//! `details.reason = "read_only_store"`) and writes nothing. Two real setups:
//!
//! - **another user's files**: the store belongs to root and the CLI runs as uid/gid 65534
//!   through `setpriv` (as root, where permission bits do not bind); run as a normal user, the
//!   test write-protects the store instead (permission bits bind then);
//! - **a read-only file system**: every call runs in its own mount namespace (`unshare -m`, or
//!   `unshare -r -m` without root) in which the store directory is bind-mounted read-only.
//!
//! A setup that cannot be created fails the test with the reason; nothing is skipped.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn run(cmd: &mut Command) -> (i32, Value, String) {
    let out = cmd.output().expect("spawn");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not one JSON envelope ({e}): {stdout} {stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn as_root(store: &Path, tool: &str, input: &Value) -> Value {
    let (code, v, _) = run(Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(["workbench", tool, &input.to_string()]));
    assert_eq!(code, 0, "{tool}: {v}");
    v
}

fn running_as_root() -> bool {
    tempfile::tempfile().unwrap().metadata().unwrap().uid() == 0
}

fn files(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, i64, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.clone(),
                    (std::fs::read(&p).unwrap(), md.mtime(), md.mode()),
                );
            }
        }
    }
    out
}

/// A store under a world-traversable temporary directory, with a copy of the CLI that any user
/// may run, files, a commit and a snapshot. Returns (tempdir, store, cli, snapshot id).
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, u64) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = tmp.path().join("nokv");
    std::fs::copy(env!("CARGO_BIN_EXE_nokv"), &cli).unwrap();
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = tmp.path().join("store");
    as_root(&store, "create", &json!({"id":"wb"}));
    as_root(
        &store,
        "put_file",
        &json!({"id":"wb","section":"input","path":"penguins.json",
                "text":"[{\"species\":\"Adelie\"},{\"species\":\"Gentoo\"}]"}),
    );
    as_root(
        &store,
        "put_file",
        &json!({"id":"wb","section":"input","path":"notes.txt","text":"penguin notes\n"}),
    );
    as_root(
        &store,
        "commit",
        &json!({"id":"wb","manifest":{"task":"ro"},
                "content_digest_uri": format!("sha256:{}", "cd".repeat(32))}),
    );
    let snap = as_root(&store, "snapshot", &json!({"id":"wb","name":"base"}))["snapshot_id"]
        .as_u64()
        .unwrap();
    (tmp, store, cli, snap)
}

fn read_calls() -> Vec<(&'static str, Value)> {
    vec![
        (
            "stat",
            json!({"id":"wb","section":"input","path":"penguins.json"}),
        ),
        ("list", json!({"id":"wb","section":"input"})),
        (
            "read",
            json!({"id":"wb","section":"input","path":"penguins.json"}),
        ),
        (
            "read",
            json!({"id":"wb","section":"input","path":"notes.txt","at_snapshot":"base"}),
        ),
        (
            "grep",
            json!({"id":"wb","pattern":"penguin","recursive":true}),
        ),
        ("search", json!({"id":"wb"})),
        ("aggregate", json!({"measures":[{"name":"n","op":"count"}]})),
        ("catalog", json!({"id":"wb"})),
        ("find", json!({})),
        ("snapshot_list", json!({"id":"wb"})),
    ]
}

fn write_calls(snapshot: u64) -> Vec<(&'static str, Value)> {
    vec![
        ("create", json!({"id":"other"})),
        (
            "put_file",
            json!({"id":"wb","section":"outputs","path":"new.txt","text":"x"}),
        ),
        (
            "append",
            json!({"id":"wb","section":"logs","path":"run.log","text":"x"}),
        ),
        (
            "edit",
            json!({"id":"wb","section":"input","path":"notes.txt",
                   "old_string":"penguin","new_string":"seabird"}),
        ),
        (
            "commit",
            json!({"id":"wb","manifest":{"task":"again"},"replace":true,
                   "content_digest_uri": format!("sha256:{}", "ef".repeat(32))}),
        ),
        ("snapshot", json!({"id":"wb"})),
        (
            "snapshot_renew",
            json!({"id":"wb","snapshot_id":snapshot,"ttl_days":30}),
        ),
        (
            "snapshot_retire",
            json!({"id":"wb","snapshot_id":snapshot,"reason":"done"}),
        ),
        (
            "restore",
            json!({"id":"wb","destination_id":"copy","at_snapshot":snapshot}),
        ),
    ]
}

/// Runs every reading and writing call through `wrap` (which turns the CLI arguments into the
/// command to spawn) and checks the outcomes and that no file changed.
fn check_store(store: &Path, snapshot: u64, cause: &str, wrap: &dyn Fn(&[String]) -> Command) {
    let before = files(store);
    let cli_args = |tool: &str, input: &Value| -> Vec<String> {
        vec![
            "--store".into(),
            store.display().to_string(),
            "workbench".into(),
            tool.into(),
            input.to_string(),
        ]
    };
    for (tool, input) in read_calls() {
        let (code, v, err) = run(&mut wrap(&cli_args(tool, &input)));
        assert_eq!(code, 0, "{tool} {input}: {v} {err}");
        assert_eq!(v["status"], "success");
    }
    let (_, read, _) = run(&mut wrap(&cli_args(
        "read",
        &json!({"id":"wb","section":"input","path":"penguins.json"}),
    )));
    assert_eq!(read["items"][1]["value"]["species"], "Gentoo");
    for (tool, input) in write_calls(snapshot) {
        let (code, v, err) = run(&mut wrap(&cli_args(tool, &input)));
        assert_eq!(code, 1, "{tool}: {v} {err}");
        assert_eq!(v["code"], "InvalidState", "{tool}: {v}");
        assert_eq!(v["retryable"], false, "{tool}: {v}");
        assert_eq!(v["details"]["reason"], "read_only_store", "{tool}: {v}");
        assert_eq!(v["details"]["cause"], cause, "{tool}: {v}");
    }
    // Human reading commands work too.
    for args in [vec!["find"], vec!["snapshot", "list", "wb"], vec!["verify"]] {
        let mut full = vec!["--store".to_string(), store.display().to_string()];
        full.extend(args.iter().map(|a| a.to_string()));
        let (code, v, err) = run(&mut wrap(&full));
        assert_eq!(code, 0, "{args:?}: {v} {err}");
    }
    assert_eq!(
        files(store),
        before,
        "a call changed a file of the read-only store"
    );
}

#[test]
fn a_store_of_another_user_serves_reads_and_refuses_writes() {
    let (_tmp, store, cli, snapshot) = setup();
    if running_as_root() {
        // The files stay root's (0644 / 0755): uid 65534 may read, not write.
        check_store(&store, snapshot, "no write permission", &|args| {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&cli)
                .args(args);
            c
        });
    } else {
        // Without root there is no other user to become: take the write permission away.
        set_tree_mode(&store, 0o555, 0o444);
        check_store(&store, snapshot, "no write permission", &|args| {
            let mut c = Command::new(&cli);
            c.args(args);
            c
        });
        set_tree_mode(&store, 0o755, 0o644);
    }
}

fn set_tree_mode(dir: &Path, dirs: u32, files: u32) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            set_tree_mode(&p, dirs, files);
        } else {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(files)).unwrap();
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dirs)).unwrap();
}

#[test]
fn a_store_on_a_read_only_file_system_serves_reads_and_refuses_writes() {
    let (_tmp, store, cli, snapshot) = setup();
    // Each call runs in a private mount namespace in which the store directory is bind-mounted
    // onto itself and remounted read-only; the host's view stays writable.
    let ns: &[&str] = if running_as_root() {
        &["-m"]
    } else {
        &["-r", "-m"]
    };
    let script = r#"set -e; d="$1"; shift; mount --bind "$d" "$d"; mount -o remount,bind,ro "$d"; if touch "$d/.probe" 2>/dev/null; then echo "store still writable" >&2; exit 99; fi; exec "$@""#;
    // The setup must work here; if it does not, the test fails with the reason.
    let probe = Command::new("unshare")
        .args(ns)
        .args(["sh", "-c", script, "sh"])
        .arg(&store)
        .arg("true")
        .output()
        .expect("spawn unshare");
    assert!(
        probe.status.success(),
        "cannot create a read-only bind mount (unshare {ns:?}): {}",
        String::from_utf8_lossy(&probe.stderr)
    );
    check_store(&store, snapshot, "read-only file system", &|args| {
        let mut c = Command::new("unshare");
        c.args(ns)
            .args(["sh", "-c", script, "sh"])
            .arg(&store)
            .arg(&cli)
            .args(args);
        c
    });
}
