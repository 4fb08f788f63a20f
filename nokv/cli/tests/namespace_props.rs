//! Property: random sequences of put / append / edit / collect / restore over paths drawn from a
//! small tree alphabet never produce a store where a path is both a file and a directory
//! (checked by walking the listings of every workbench), and `materialize` of every resulting
//! workbench succeeds (docs/workbench.md, "Files and directories").

use meta::NormPath;
use nokv::workbench::Workbench;
use nokv::Client;
use proptest::prelude::*;
use serde_json::{json, Value};

/// One write of the sequence. Paths are `section/c1[/c2[/c3]]` with components from a three-name
/// alphabet, so prefixes and children of earlier paths are drawn often.
#[derive(Debug, Clone)]
enum Op {
    Put {
        path: String,
        replace: bool,
    },
    Append {
        path: String,
    },
    Edit {
        path: String,
    },
    Collect {
        path: String,
        replace: bool,
    },
    /// Commit the current workbench, restore the commit into a new workbench, continue there.
    Restore,
}

fn path_strategy() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["outputs", "logs"]),
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..=3),
    )
        .prop_map(|(section, comps)| format!("{section}/{}", comps.join("/")))
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (path_strategy(), any::<bool>()).prop_map(|(path, replace)| Op::Put { path, replace }),
        3 => path_strategy().prop_map(|path| Op::Append { path }),
        2 => path_strategy().prop_map(|path| Op::Edit { path }),
        2 => (path_strategy(), any::<bool>())
            .prop_map(|(path, replace)| Op::Collect { path, replace }),
        1 => Just(Op::Restore),
    ]
}

fn split(path: &str) -> (&str, &str) {
    path.split_once('/').expect("section/path")
}

/// Runs one op on workbench `id`; returns the id to continue on. Every outcome must be a success
/// or one of the refusals the contract allows for it.
fn apply(wb: &Workbench, id: &str, op: &Op, step: usize, scratch: &std::path::Path) -> String {
    let allowed = |result: &Value, codes: &[&str]| {
        if result["status"] != "success" {
            let code = result["code"].as_str().unwrap_or_default();
            assert!(codes.contains(&code), "{op:?} on {id}: {result}");
        }
    };
    match op {
        Op::Put { path, replace } => {
            let (section, rel) = split(path);
            let r = wb.call(
                "workbench_put_file",
                &json!({"id": id, "section": section, "path": rel, "text": "x1\n",
                        "replace": replace}),
            );
            allowed(
                &r,
                &["AlreadyExists", "NotFound", "NotArtifact", "NotDirectory"],
            );
        }
        Op::Append { path } => {
            let (section, rel) = split(path);
            let r = wb.call(
                "workbench_append",
                &json!({"id": id, "section": section, "path": rel, "text": "x2\n"}),
            );
            allowed(&r, &["NotArtifact", "NotDirectory"]);
        }
        Op::Edit { path } => {
            let (section, rel) = split(path);
            let r = wb.call(
                "workbench_edit",
                &json!({"id": id, "section": section, "path": rel, "old_string": "x",
                        "new_string": "y", "replace_all": true}),
            );
            allowed(&r, &["NotFound", "NotArtifact", "NotDirectory", "NoMatch"]);
        }
        Op::Collect { path, replace } => {
            let local = scratch.join(format!("collect-{step}"));
            std::fs::write(&local, format!("collected {step}\n")).unwrap();
            match nokv::materialize::collect(wb.client(), id, &local, path, "text/plain", *replace)
            {
                Ok(_)
                | Err(nokv::Error::AlreadyExists { .. })
                | Err(nokv::Error::NotFound { .. })
                | Err(nokv::Error::DirectoryExists { .. })
                | Err(nokv::Error::NotArtifact { .. })
                | Err(nokv::Error::NotDirectory { .. }) => {}
                Err(other) => panic!("collect {path} on {id}: {other:?}"),
            }
        }
        Op::Restore => {
            let digest = format!("sha256:{:064x}", step);
            let commit = wb.call(
                "workbench_commit",
                &json!({"id": id, "manifest": {"step": step}, "content_digest_uri": digest,
                        "replace": true}),
            );
            let commit = nokv_ok(commit);
            let dest = format!("r{step}");
            nokv_ok(wb.call(
                "workbench_restore",
                &json!({"id": id, "destination_id": dest,
                        "at_commit": commit["commit_identity"]}),
            ));
            return dest;
        }
    }
    id.to_string()
}

fn nokv_ok(v: Value) -> Value {
    assert_eq!(v["status"], "success", "{v}");
    v
}

/// Walks every listing of `id` (metadata reader: every directory and every exact file, with the
/// "both" flag the facade's list hides) and the facade's `workbench_list` of every directory.
fn check_workbench(wb: &Workbench, id: &str, scratch: &std::path::Path) {
    let client: &Client = wb.client();
    let read = client.meta().read();
    let ws = read.visible_workspace(id).unwrap();
    let mut dirs: Vec<Option<NormPath>> = vec![None];
    while let Some(dir) = dirs.pop() {
        let page = read
            .list_children(&ws.incarnation, dir.as_ref(), None, 1000)
            .unwrap();
        assert!(!page.more);
        for child in page.items {
            let path = match &dir {
                None => meta::normalize(&child.name).unwrap(),
                Some(d) => d.join(&child.name).unwrap(),
            };
            assert!(
                !(child.file.is_some() && child.is_dir),
                "{id}: {path} is both a file and a directory"
            );
            if child.is_dir {
                // The facade lists it as a directory too.
                let (section, rel) = match path.as_str().split_once('/') {
                    Some((s, r)) => (s, Some(r)),
                    None => (path.as_str(), None),
                };
                let listed = wb.call(
                    "workbench_list",
                    &json!({"id": id, "section": section, "path": rel}),
                );
                assert_eq!(listed["status"], "success", "{id}: list {path}: {listed}");
                dirs.push(Some(path));
            }
        }
    }
    let dest = scratch.join(format!("materialized-{id}"));
    nokv::materialize::materialize(client, id, None, &dest)
        .unwrap_or_else(|e| panic!("materialize {id}: {e}"));
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_writes_never_make_a_path_both_file_and_directory(
        ops in prop::collection::vec(op_strategy(), 1..14)
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let client = Client::open(tmp.path().join("store")).unwrap();
        let wb = Workbench::new(client);
        nokv_ok(wb.call("workbench_create", &json!({"id": "w"})));
        let mut ids = vec!["w".to_string()];
        let mut current = "w".to_string();
        for (step, op) in ops.iter().enumerate() {
            current = apply(&wb, &current, op, step, tmp.path());
            if !ids.contains(&current) {
                ids.push(current.clone());
            }
        }
        for id in &ids {
            check_workbench(&wb, id, tmp.path());
        }
    }
}
