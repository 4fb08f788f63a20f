//! Recovery at open goes through the pending-operation registry (issue 5, scalability): terminal
//! Publish operations stay in the Operation family forever (docs/metadata-format.md, "Commit Closure"), but
//! only the non-terminal ones are registered, so recovery and `nokv operation list` (without
//! `--all`) see exactly those — and an orphan left by a crashed process is found and cleaned
//! after reopen.

use meta::codec::PublishPhase;
use meta::ops::publish::operation::{self as ledger, BeginOutcome, PublishIntent, StagedBlock};
use meta::{ArtifactRevisionId, OperationId, PathCondition};
use nokv::{Client, ClientOptions, PutOptions};

fn options(recover: bool) -> ClientOptions {
    ClientOptions {
        block_size: 1024,
        recover_at_open: recover,
        ..Default::default()
    }
}

/// Begins a Publish operation and sends its one block, then stops — what a process killed
/// between upload and finalize leaves behind. Returns the operation id and the block key.
fn orphan_upload(client: &Client, path: &str, bytes: &[u8]) -> (OperationId, String) {
    let meta = client.meta();
    let id = OperationId::random().unwrap();
    let revision_id = ArtifactRevisionId::random().unwrap();
    let key = objstore::block_key(
        meta.logical_shard_id().as_bytes(),
        meta.root_id().as_bytes(),
        revision_id.as_bytes(),
        0,
    );
    let intent = PublishIntent {
        operation_id: id,
        intent_digest: [3; 32],
        workbench_id: "wb".into(),
        path: Client::normalize(path).unwrap(),
        condition: PathCondition::Create,
        revision_id,
        base: None,
        dependency_depth: 0,
        content_type: "application/octet-stream".into(),
        producer: "t".into(),
        manifest_id: None,
        index_fields: Default::default(),
    };
    let block = StagedBlock {
        object_key: key.clone(),
        length: bytes.len() as u64,
        digest_uri: objstore::sha256_uri(bytes),
    };
    assert!(matches!(
        ledger::begin(meta, &intent, &[block]).unwrap(),
        BeginOutcome::Started(_)
    ));
    client.objects().put(&key, bytes).unwrap();
    (id, key)
}

#[test]
fn recovery_after_reopen_finds_the_orphan_through_the_registry_among_terminal_operations() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (orphan, orphan_key) = {
        let client = Client::open_with(&store, options(true)).unwrap();
        client.create_workbench("wb").unwrap();
        for i in 0..20 {
            client
                .put(
                    "wb",
                    &format!("outputs/f{i}.bin"),
                    &[i as u8; 100],
                    &PutOptions::create("application/octet-stream", "t"),
                )
                .unwrap();
        }
        let orphan = orphan_upload(&client, "outputs/orphan.bin", b"partial bytes");
        // 21 operations exist, one is registered as pending.
        assert_eq!(ledger::list(client.meta()).unwrap().len(), 21);
        let pending = ledger::list_pending(client.meta()).unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].operation_id, orphan.0);
        assert_eq!(client.list_operations(false).unwrap().len(), 1);
        assert_eq!(client.list_operations(true).unwrap().len(), 21);
        orphan
    };

    // Reopen: recovery at open aborts and cleans the orphan found through the registry.
    let client = Client::open_with(&store, options(true)).unwrap();
    let summary = client.open_recovery().unwrap().as_ref().unwrap().clone();
    assert_eq!(summary.cleaned, 1, "{summary:?}");
    assert_eq!(summary.resumed + summary.quarantined + summary.pending, 0);
    assert!(summary.errors.is_empty(), "{summary:?}");
    assert_eq!(
        ledger::get(client.meta(), &orphan).unwrap().unwrap().phase,
        PublishPhase::Cleaned
    );
    assert!(client.objects().head(&orphan_key).unwrap().is_none());
    assert!(matches!(
        client.stat("wb", "outputs/orphan.bin").unwrap_err(),
        nokv::Error::NotFound { .. }
    ));
    // Nothing is pending any more; the full list still holds all 21 (terminal) operations.
    assert!(ledger::list_pending(client.meta()).unwrap().is_empty());
    assert!(client.list_operations(false).unwrap().is_empty());
    let all = client.list_operations(true).unwrap();
    assert_eq!(all.len(), 21);
    assert!(all
        .iter()
        .all(|o| o.phase == "Published" || o.phase == "Cleaned"));
    // A second pass has nothing to do.
    assert_eq!(
        client.recover_operations().unwrap(),
        nokv::RecoverySummary::default()
    );
}
