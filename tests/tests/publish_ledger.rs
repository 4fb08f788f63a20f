//! The Publish operation and its StagedObject ledger across real failures (docs/metadata-format.md, "Upload
//! And Append"; issue 5 acceptance): a provider that fails after k of n blocks, a process
//! SIGKILLed between upload and finalize, and the finalize/abort race. Ownership is always
//! checked against the ledger and the manifests — the object listing is only the witness.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use meta::codec::{PublishPhase, StagedCleanupState, StagedProviderState};
use meta::ops::publish::operation as ledger;
use nokv::{Client, ClientOptions, PutOptions};
use objstore::{Error as ObjError, LocalDir, ObjectMeta, ObjectStore, PutOutcome};

/// A LocalDir whose puts fail after `puts_allowed` successful ones and whose deletes fail while
/// `deletes_down` (a provider outage); records every DELETE it accepted.
#[derive(Debug)]
struct Outage {
    inner: LocalDir,
    puts: AtomicU64,
    puts_allowed: AtomicU64,
    deletes_down: AtomicBool,
    deleted: Mutex<Vec<String>>,
}

impl Outage {
    fn new(inner: LocalDir) -> Self {
        Outage {
            inner,
            puts: AtomicU64::new(0),
            puts_allowed: AtomicU64::new(u64::MAX),
            deletes_down: AtomicBool::new(false),
            deleted: Mutex::new(Vec::new()),
        }
    }
    fn down_after(&self, k: u64) {
        self.puts.store(0, Ordering::SeqCst);
        self.puts_allowed.store(k, Ordering::SeqCst);
        self.deletes_down.store(true, Ordering::SeqCst);
    }
    fn heal(&self) {
        self.puts_allowed.store(u64::MAX, Ordering::SeqCst);
        self.deletes_down.store(false, Ordering::SeqCst);
    }
    fn put_fault(&self, key: &str) -> Result<(), ObjError> {
        let n = self.puts.fetch_add(1, Ordering::SeqCst);
        if n >= self.puts_allowed.load(Ordering::SeqCst) {
            return Err(ObjError::Unavailable {
                key: key.into(),
                reason: "injected outage".into(),
            });
        }
        Ok(())
    }
}

impl ObjectStore for Outage {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), ObjError> {
        self.put_fault(key)?;
        self.inner.put(key, bytes)
    }
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, ObjError> {
        self.put_fault(key)?;
        self.inner.put_if_absent(key, bytes)
    }
    fn get(&self, key: &str) -> Result<Vec<u8>, ObjError> {
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, ObjError> {
        self.inner.get_range(key, offset, len)
    }
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjError> {
        self.inner.head(key)
    }
    fn delete(&self, key: &str) -> Result<(), ObjError> {
        if self.deletes_down.load(Ordering::SeqCst) {
            return Err(ObjError::Unavailable {
                key: key.into(),
                reason: "injected outage".into(),
            });
        }
        self.deleted.lock().unwrap().push(key.to_string());
        self.inner.delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, ObjError> {
        self.inner.list(prefix)
    }
    fn provider_name(&self) -> &'static str {
        "local"
    }
}

/// Block objects under `objects/` (the namespace marker and probe objects excluded).
fn listed_blocks(objects: &dyn ObjectStore) -> BTreeSet<String> {
    objects
        .list("")
        .unwrap()
        .into_iter()
        .filter(|k| k != "nokv/namespace.json" && !k.starts_with("nokv/probe/"))
        .collect()
}

/// Every object key reachable from the ArtifactManifest rows of the visible paths of `wb`.
fn manifest_keys(client: &Client, wb: &str, paths: &[&str]) -> BTreeSet<String> {
    let read = client.meta().read();
    let ws = read.visible_workspace(wb).unwrap();
    let mut keys = BTreeSet::new();
    for p in paths {
        let path = Client::normalize(p).unwrap();
        if let Some(entry) = read.path_entry(&ws.incarnation, &path).unwrap() {
            for row in read.manifest(&entry.artifact_revision_id).unwrap() {
                keys.insert(row.object_key);
            }
        }
    }
    keys
}

fn body(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn provider_failure_after_k_of_n_blocks_is_invisible_and_recovery_deletes_exactly_the_ledger_objects(
) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let outage = Arc::new(Outage::new(LocalDir::open(store.join("objects")).unwrap()));
    let client = Client::open_with(
        &store,
        ClientOptions {
            block_size: 1024,
            objects: Some(outage.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    client.create_workbench("wb").unwrap();
    // An unrelated published artifact whose block must survive every cleanup.
    let keep = body(1500, 9);
    client
        .put(
            "wb",
            "outputs/keep.bin",
            &keep,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .unwrap();
    let kept = manifest_keys(&client, "wb", &["outputs/keep.bin"]);
    assert_eq!(kept.len(), 2);

    // 6 blocks of 1 KiB; the provider fails after k = 3 and cannot delete either.
    let data = body(6 * 1024 - 100, 1);
    outage.down_after(3);
    let err = client
        .put(
            "wb",
            "outputs/big.bin",
            &data,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .unwrap_err();
    assert!(matches!(err, nokv::Error::ObjectUnavailable(_)), "{err:?}");

    // Nothing visible at the path.
    assert!(matches!(
        client.stat("wb", "outputs/big.bin").unwrap_err(),
        nokv::Error::NotFound { .. }
    ));
    // The ledger owns the orphaned blocks: one operation, aborted, cleanup pending.
    let ops = ledger::list(client.meta()).unwrap();
    let failed: Vec<_> = ops
        .iter()
        .filter(|o| o.operation.phase != PublishPhase::Published)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].operation.phase, PublishPhase::Cleaning);
    let id = failed[0].operation_id;
    let rows = ledger::ledger(client.meta(), &id).unwrap();
    assert_eq!(
        rows.len(),
        6,
        "every block was staged before its bytes were sent"
    );
    let uploaded: BTreeSet<String> = rows
        .iter()
        .filter(|(_, r)| r.provider_state == StagedProviderState::Uploaded)
        .map(|(_, r)| r.object_key.clone())
        .collect();
    assert_eq!(uploaded.len(), 3, "exactly k blocks landed");
    let orphans: BTreeSet<String> = listed_blocks(outage.as_ref())
        .difference(&kept)
        .cloned()
        .collect();
    assert_eq!(
        orphans, uploaded,
        "the listing shows exactly the ledger's uploaded blocks"
    );
    assert_eq!(
        rows.iter()
            .filter(|(_, r)| r.provider_state == StagedProviderState::Planned)
            .count(),
        2,
        "blocks never sent are recorded Planned"
    );
    assert_eq!(client.ledger_owned_keys().unwrap().len(), 6);

    // The provider comes back; recovery (driven by the ledger) deletes exactly them.
    outage.heal();
    outage.deleted.lock().unwrap().clear();
    let summary = client.recover_operations().unwrap();
    assert_eq!(summary.cleaned, 1, "{summary:?}");
    assert_eq!(summary.resumed + summary.quarantined, 0);
    let deleted: BTreeSet<String> = outage.deleted.lock().unwrap().iter().cloned().collect();
    let attempted: BTreeSet<String> = rows
        .iter()
        .filter(|(_, r)| r.provider_state != StagedProviderState::Planned)
        .map(|(_, r)| r.object_key.clone())
        .collect();
    assert_eq!(
        deleted, attempted,
        "DELETEs went to exactly the ledger keys that were sent"
    );
    assert!(deleted.is_superset(&uploaded));
    assert_eq!(
        listed_blocks(outage.as_ref()),
        kept,
        "only the published blocks remain"
    );
    let op = ledger::get(client.meta(), &id).unwrap().unwrap();
    assert_eq!(op.phase, PublishPhase::Cleaned);
    assert!(ledger::ledger(client.meta(), &id)
        .unwrap()
        .iter()
        .all(|(_, r)| r.cleanup_state == StagedCleanupState::Deleted));
    assert!(client.ledger_owned_keys().unwrap().is_empty());
    // Idempotent: a second pass finds nothing to do, and the kept artifact still reads back.
    assert_eq!(client.recover_operations().unwrap().cleaned, 0);
    assert_eq!(client.read_all("wb", "outputs/keep.bin").unwrap(), keep);
}

/// Runs `nokv_cli collect` stopped at `point`, SIGKILLs it there, and returns the store dir.
fn kill_collect_at(point: &str, dir: &std::path::Path, file: &std::path::Path) {
    let store = dir.join("store");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(&store)
        .arg("--quiet")
        .arg("collect")
        .arg("wb")
        .arg(file)
        .arg("outputs/model.bin")
        .env("NOKV_FAULT_POINT", point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut reached = false;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if line.contains("NOKV_FAULT_POINT reached") && line.contains(point) {
            reached = true;
            break;
        }
    }
    assert!(reached, "the child never reached fault point {point}");
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());
}

#[test]
fn sigkill_between_upload_and_finalize_leaves_the_path_absent_or_complete_and_no_object_unowned() {
    // 9 MiB: three 4 MiB blocks (the CLI's default block size), streamed one block at a time.
    let data = body(9 * 1024 * 1024, 7);
    let digest = objstore::sha256_uri(&data);
    for (point, expect_published) in [
        ("after-begin", false),
        ("after-upload", false),
        ("after-finalizing-cas", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model.bin");
        std::fs::write(&file, &data).unwrap();
        kill_collect_at(point, dir.path(), &file);
        let store = dir.path().join("store");

        // Before recovery the ledger owns whatever the dead process left behind.
        let raw = Client::open_with(
            &store,
            ClientOptions {
                recover_at_open: false,
                ..Default::default()
            },
        )
        .unwrap();
        let owned: BTreeSet<String> = raw.ledger_owned_keys().unwrap().into_iter().collect();
        let listed = listed_blocks(raw.objects().as_ref());
        assert!(
            listed.is_subset(&owned),
            "{point}: every object is owned by the ledger before recovery"
        );
        let pending = raw.list_operations(false).unwrap();
        assert_eq!(pending.len(), 1, "{point}: one orphaned operation");
        drop(raw);

        // Reopen: recovery runs at open.
        let client = Client::open(&store).unwrap();
        let summary = client.open_recovery().unwrap().as_ref().unwrap().clone();
        if expect_published {
            assert_eq!(summary.resumed, 1, "{point}: {summary:?}");
            let entry = client.stat("wb", "outputs/model.bin").unwrap();
            assert_eq!(entry.body_digest_uri, digest);
            assert_eq!(client.read_all("wb", "outputs/model.bin").unwrap(), data);
        } else {
            assert_eq!(summary.cleaned, 1, "{point}: {summary:?}");
            assert!(matches!(
                client.stat("wb", "outputs/model.bin").unwrap_err(),
                nokv::Error::NotFound { .. }
            ));
        }
        assert!(client.list_operations(false).unwrap().is_empty());
        // No object is left unowned: listing == manifest-reachable ∪ live ledger rows.
        let mut reachable = manifest_keys(&client, "wb", &["outputs/model.bin"]);
        reachable.extend(client.ledger_owned_keys().unwrap());
        assert_eq!(
            listed_blocks(client.objects().as_ref()),
            reachable,
            "{point}: listing vs manifests + ledger"
        );
    }
}

#[test]
fn finalize_and_abort_race_has_exactly_one_winning_cas() {
    let (_dir, client) = nokv_tests::fresh_store();
    client.create_workbench("wb").unwrap();
    let meta = client.meta().clone();
    for round in 0..16 {
        let id = meta::OperationId::random().unwrap();
        let rev = meta::ArtifactRevisionId::random().unwrap();
        let intent = ledger::PublishIntent {
            operation_id: id,
            intent_digest: [1; 32],
            workbench_id: "wb".into(),
            path: Client::normalize(&format!("outputs/r{round}")).unwrap(),
            condition: meta::PathCondition::Create,
            revision_id: rev,
            base: None,
            dependency_depth: 0,
            content_type: "text/plain".into(),
            producer: "race".into(),
            manifest_id: None,
            index_fields: Default::default(),
        };
        ledger::begin(&meta, &intent, &[]).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let (m1, b1) = (meta.clone(), barrier.clone());
        let digest = objstore::sha256_uri(b"");
        let fin = std::thread::spawn(move || {
            b1.wait();
            ledger::finalize(&m1, &id, 0, &digest, &[]).is_ok()
        });
        let (m2, b2) = (meta.clone(), barrier);
        let abort = std::thread::spawn(move || {
            b2.wait();
            ledger::abort(&m2, &id, "race").is_ok()
        });
        let (f, a) = (fin.join().unwrap(), abort.join().unwrap());
        assert!(f ^ a, "round {round}: finalize {f}, abort {a}");
        let phase = ledger::get(&meta, &id).unwrap().unwrap().phase;
        if f {
            assert_eq!(phase, PublishPhase::Finalizing);
            // The winner publishes; the loser can no longer claim it.
            ledger::publish_operation(&meta, &id).unwrap();
            assert!(ledger::take_over(&meta, &id, "late").is_err());
        } else {
            assert_eq!(phase, PublishPhase::Aborting);
            assert!(ledger::publish_operation(&meta, &id).is_err());
        }
    }
}

#[test]
fn a_finalizing_orphan_with_a_missing_block_is_taken_over_and_cleaned_instead_of_published() {
    let data = body(9 * 1024 * 1024, 5);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model.bin");
    std::fs::write(&file, &data).unwrap();
    kill_collect_at("after-finalizing-cas", dir.path(), &file);
    let store = dir.path().join("store");
    let raw = Client::open_with(
        &store,
        ClientOptions {
            recover_at_open: false,
            ..Default::default()
        },
    )
    .unwrap();
    let ops = ledger::list(raw.meta()).unwrap();
    let orphan = ops
        .iter()
        .find(|o| o.operation.phase == PublishPhase::Finalizing)
        .expect("a Finalizing orphan");
    let own = ledger::own_objects(raw.meta(), &orphan.operation_id).unwrap();
    assert_eq!(own.len(), 3);
    // The provider lost one block: the publication must not be resumed.
    raw.objects().delete(&own[1].0).unwrap();
    let id = orphan.operation_id;
    drop(raw);
    let client = Client::open(&store).unwrap();
    let summary = client.open_recovery().unwrap().as_ref().unwrap().clone();
    assert_eq!((summary.resumed, summary.cleaned), (0, 1), "{summary:?}");
    assert!(matches!(
        client.stat("wb", "outputs/model.bin").unwrap_err(),
        nokv::Error::NotFound { .. }
    ));
    let op = ledger::get(client.meta(), &id).unwrap().unwrap();
    assert_eq!(op.phase, PublishPhase::Cleaned);
    assert!(listed_blocks(client.objects().as_ref()).is_empty());
}
