//! docs/metadata-format.md, "Metadata Command": ordinary put/replace/remove has a fixed upper bound on
//! predicates and mutations apart from bounded manifest (and index) rows, and performs no
//! namespace prefix scan. These tests count the storage calls and the shape of the single write.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::codec::ManifestRow;
use crate::command::execute;
use crate::command::executor::plan_for_test;
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, RequestId};
use crate::ops::publish::{command_digest, plan, PathCondition, Planned, PublishRequest};
use crate::path::normalize;
use crate::shard::MetaShard;
use crate::store::{
    CheckedWrite, ScanItem, ScanSpec, ShardStore, Snapshot, TxnStore, WriteFailure,
};

#[derive(Default)]
struct Counters {
    gets: AtomicUsize,
    scans: AtomicUsize,
    writes: Mutex<Vec<CheckedWrite>>,
}

struct Counting {
    inner: ShardStore,
    counters: Arc<Counters>,
}

struct CountingSnap<S> {
    inner: S,
    counters: Arc<Counters>,
}

impl<S: Snapshot> Snapshot for CountingSnap<S> {
    fn version(&self) -> u64 {
        self.inner.version()
    }
    fn get(&self, family: Family, key: &[u8]) -> crate::error::Result<Option<Vec<u8>>> {
        self.counters.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(family, key)
    }
    fn scan(&self, family: Family, spec: &ScanSpec) -> crate::error::Result<Vec<ScanItem>> {
        self.counters.scans.fetch_add(1, Ordering::SeqCst);
        self.inner.scan(family, spec)
    }
}

impl TxnStore for Counting {
    type Snap = CountingSnap<<ShardStore as TxnStore>::Snap>;
    fn version(&self) -> u64 {
        self.inner.version()
    }
    fn snapshot(&self) -> Self::Snap {
        CountingSnap {
            inner: self.inner.snapshot(),
            counters: Arc::clone(&self.counters),
        }
    }
    fn snapshot_at(&self, version: u64) -> crate::error::Result<Self::Snap> {
        Ok(CountingSnap {
            inner: self.inner.snapshot_at(version)?,
            counters: Arc::clone(&self.counters),
        })
    }
    fn write(&self, write: CheckedWrite) -> Result<u64, WriteFailure> {
        self.counters.writes.lock().unwrap().push(write.clone());
        self.inner.write(write)
    }
}

fn digest(tag: &str) -> String {
    use sha2::Digest;
    format!(
        "sha256:{}",
        crate::ids::to_hex(&sha2::Sha256::digest(tag.as_bytes()))
    )
}

fn request(shard: &MetaShard, rows: u64, condition: PathCondition) -> PublishRequest {
    let rev = ArtifactRevisionId::random().unwrap();
    let manifest = (0..rows)
        .map(|i| ManifestRow {
            object_index: i,
            physical_owner_revision: rev,
            physical_object_index: i,
            object_key: format!(
                "nokv/artifacts/{}/{}/{}/blocks/{i:016x}",
                shard.logical_shard_id(),
                shard.root_id(),
                rev
            ),
            logical_offset: i * 10,
            object_offset: 0,
            length: 10,
            digest_uri: digest(&format!("{rev}-{i}")),
            append_segment: None,
        })
        .collect();
    PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: "w".into(),
        path: normalize("outputs/data.bin").unwrap(),
        condition,
        revision_id: rev,
        logical_size: rows * 10,
        body_digest_uri: digest(&format!("body-{rows}")),
        content_type: "application/octet-stream".into(),
        producer: "bounded-test".into(),
        manifest_id: None,
        manifest,
        dependency_depth: 0,
        index_fields: Default::default(),
    }
}

/// The shape of one publication: (point reads, scans, predicates, mutations per family).
struct Shape {
    gets: usize,
    scans: usize,
    predicates: usize,
    by_family: BTreeMap<&'static str, usize>,
    writes: usize,
}

fn publish_counted(shard: &MetaShard, req: PublishRequest) -> Shape {
    let counting = Counting {
        inner: shard.inner.store.clone(),
        counters: Arc::default(),
    };
    let snap = counting.snapshot();
    let d = command_digest(&req);
    let Planned::Command(cmd) = plan(shard, &snap, &req, d).unwrap() else {
        panic!("a fresh request must plan a command");
    };
    drop(snap);
    let planned = plan_for_test(&counting, &shard.inner.fence(), &cmd).unwrap();
    let mut by_family = BTreeMap::new();
    for m in &planned.write.mutations {
        *by_family.entry(m.family().name()).or_insert(0) += 1;
    }
    let predicates = planned.write.predicates.len();
    let before = counting.counters.gets.load(Ordering::SeqCst);
    // `plan_for_test` repeated the executor's fence reads; count them once. The first plan's
    // scans are not counted either: the shape is that of the second plan plus the execution.
    counting.counters.gets.fetch_sub(before, Ordering::SeqCst);
    counting.counters.scans.store(0, Ordering::SeqCst);
    let snap = counting.snapshot();
    let Planned::Command(cmd) = plan(shard, &snap, &req, d).unwrap() else {
        panic!("still fresh");
    };
    drop(snap);
    let out = execute(&counting, &shard.inner.fence(), *cmd).unwrap();
    assert!(!out.idempotent_replay);
    let writes = counting.counters.writes.lock().unwrap().len();
    Shape {
        gets: counting.counters.gets.load(Ordering::SeqCst),
        scans: counting.counters.scans.load(Ordering::SeqCst),
        predicates,
        by_family,
        writes,
    }
}

#[test]
fn publish_is_one_bounded_write_with_at_most_one_namespace_probe_for_any_manifest_size() {
    let dir = tempfile::tempdir().unwrap();
    let shard = crate::test_engine::open(dir.path());
    shard.create_workspace("w").unwrap();
    let mut fixed: Option<(usize, usize, BTreeMap<&'static str, usize>)> = None;
    let mut generation = None;
    for rows in [1u64, 64, 700, 7_000] {
        let condition = match generation {
            None => PathCondition::Create,
            Some(g) => PathCondition::Replace {
                expected_generation: g,
            },
        };
        let shape = publish_counted(&shard, request(&shard, rows, condition));
        generation = Some(shard.version().unwrap());
        assert_eq!(shape.writes, 1, "one holt batch per command");
        // Creating a path runs the namespace rule's one limit-1 descendant probe (a path is a
        // file or a directory, never both); replacing an existing file scans nothing.
        let created = matches!(condition, PathCondition::Create);
        assert_eq!(
            shape.scans,
            usize::from(created),
            "publication performs at most the namespace probe"
        );
        assert_eq!(
            shape.by_family.get("artifact_manifest"),
            Some(&(rows as usize))
        );
        let outbox = shape.by_family["recovery_outbox"];
        assert!(outbox >= 2, "header + at least one chunk");
        let mut bounded = shape.by_family.clone();
        bounded.remove("artifact_manifest");
        bounded.remove("recovery_outbox");
        // Index projection rows (puts of the new built-in rows, deletes of the replaced ones
        // whose value changed) are bounded separately by the field count.
        let index_rows = bounded.remove("secondary_index").unwrap_or(0);
        assert!(
            (7..=crate::command::MAX_INDEX_MUTATIONS).contains(&index_rows),
            "{index_rows} index rows"
        );
        // Point reads: 5 fence/replay reads in the executor; 4 fence reads, dedupe, workspace,
        // path, new revision and (on replace) the replaced revision in the plan.
        assert!(shape.gets <= 15, "{} point reads", shape.gets);
        assert!(shape.predicates <= 9, "{} predicates", shape.predicates);
        if rows > 1 {
            // Replace: identical bounded shape whatever the manifest size.
            match &fixed {
                None => fixed = Some((shape.gets, shape.predicates, bounded)),
                Some((g, p, b)) => {
                    assert_eq!((shape.gets, shape.predicates), (*g, *p));
                    assert_eq!(&bounded, b);
                }
            }
        }
    }
    let (_, _, bounded) = fixed.unwrap();
    let total: usize = bounded.values().sum();
    // path_current, workspace_current, artifact_revision ×2, revision_ref put + delete,
    // gc_candidate, change_event, command_dedupe, system (recovery tail).
    assert_eq!(total, 10, "{bounded:?}");
}

#[test]
fn remove_is_one_bounded_write_with_no_prefix_scan_for_any_manifest_size() {
    use crate::ops::remove::{self, RemoveRequest};
    let dir = tempfile::tempdir().unwrap();
    let shard = MetaShard::open(dir.path(), crate::shard::OpenOptions::default()).unwrap();
    shard.create_workspace("w").unwrap();
    let mut shapes = Vec::new();
    for rows in [1u64, 700, 7_000] {
        shard
            .publish(request(&shard, rows, PathCondition::Create))
            .unwrap();
        let counting = Counting {
            inner: shard.inner.store.clone(),
            counters: Arc::default(),
        };
        let req = RemoveRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: "w".into(),
            path: normalize("outputs/data.bin").unwrap(),
            expected_generation: Some(shard.version().unwrap()),
        };
        let d = remove::command_digest(&req);
        let snap = counting.snapshot();
        let remove::Planned::Command(cmd) = remove::plan(&shard, &snap, &req, d).unwrap() else {
            panic!("a fresh removal plans a command");
        };
        drop(snap);
        assert_eq!(
            counting.counters.scans.load(Ordering::SeqCst),
            0,
            "removal performs no prefix scan"
        );
        let gets = counting.counters.gets.load(Ordering::SeqCst);
        // 4 fence reads, dedupe, workspace, path, revision.
        assert!(gets <= 8, "{gets} point reads");
        let mut by_family = BTreeMap::new();
        for m in &cmd.mutations {
            *by_family.entry(m.family().name()).or_insert(0) += 1;
        }
        let predicates = cmd.predicates.len();
        execute(&counting, &shard.inner.fence(), *cmd).unwrap();
        assert_eq!(counting.counters.writes.lock().unwrap().len(), 1);
        shapes.push((predicates, by_family));
    }
    // The same fixed shape whatever the manifest size: PathCurrent delete, RevisionRef delete,
    // ArtifactRevision put, GcCandidate put, WorkspaceCurrent put and the index deletes.
    let (predicates, by_family) = &shapes[0];
    assert!(shapes
        .iter()
        .all(|(p, b)| p == predicates && b == by_family));
    assert_eq!(*predicates, 3, "workspace, path, revision");
    assert_eq!(by_family.get("path_current"), Some(&1));
    assert_eq!(by_family.get("revision_ref"), Some(&1));
    assert_eq!(by_family.get("artifact_revision"), Some(&1));
    assert_eq!(by_family.get("gc_candidate"), Some(&1));
    assert_eq!(by_family.get("workspace_current"), Some(&1));
    assert!(by_family.get("artifact_manifest").is_none());
    let index = by_family.get("secondary_index").copied().unwrap_or(0);
    assert!((7..=crate::command::MAX_INDEX_MUTATIONS).contains(&index));
}
