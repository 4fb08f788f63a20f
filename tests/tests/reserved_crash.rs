//! Revision reservations under SIGKILL (docs/metadata-format.md, "Revision reservations"): a
//! long-lived writer publishes most small bodies under reserved revisions (object first, then
//! one command). It is killed at many points of its run; after each kill:
//!
//! - before recovery, every object on the provider is owned: by a manifest of a visible path,
//!   by the StagedObject ledger, or by a live reservation;
//! - the reopen sweeps the dead writer's reservations (objects of unpublished revisions deleted,
//!   rows retired), and afterwards the listing is exactly the manifests' objects plus what the
//!   ledger still owns: nothing is orphaned;
//! - every put acknowledged before the kill reads back with its bytes; fsck is clean.

use nokv::{Client, ClientOptions};
use objstore::ObjectStore;
use std::collections::BTreeSet;

fn listed(objects: &dyn ObjectStore) -> BTreeSet<String> {
    objects
        .list("")
        .unwrap()
        .into_iter()
        .filter(|k| k != "nokv/namespace.json" && !k.starts_with("nokv/probe/"))
        .collect()
}

/// Every object key the manifests of the visible paths `outputs/file-<i>.bin`, `i < upto`, of
/// workbench `crash` name.
fn manifest_keys(client: &Client, upto: u64) -> BTreeSet<String> {
    let read = client.meta().read();
    let ws = read.visible_workspace("crash").unwrap();
    let mut keys = BTreeSet::new();
    for i in 0..upto {
        let path = Client::normalize(&format!("outputs/file-{i}.bin")).unwrap();
        if let Some(e) = read.path_entry(&ws.incarnation, &path).unwrap() {
            for row in read.manifest(&e.artifact_revision_id).unwrap() {
                keys.insert(row.object_key);
            }
        }
    }
    keys
}

#[test]
fn reserved_puts_survive_sigkill_and_leave_no_orphan() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut all_acked = Vec::new();
    let mut next = 0u64;
    let mut swept = 0u64;
    for cycle in 0..10u64 {
        let acks = 3 + (cycle * 13) % 40;
        let acked = nokv_tests::crash_writer_killed_after(
            env!("CARGO_BIN_EXE_crash_writer"),
            &store,
            next,
            acks,
        );
        next = acked.last().unwrap().0 + 2; // skip the in-flight index; checked below
        all_acked.extend(acked);

        // Before recovery: every object is owned by a manifest, the ledger or a reservation.
        let raw = Client::open_with(
            &store,
            ClientOptions {
                recover_at_open: false,
                ..Default::default()
            },
        )
        .unwrap();
        let mut owned = manifest_keys(&raw, next);
        owned.extend(raw.ledger_owned_keys().unwrap());
        let before = listed(raw.objects().as_ref());
        assert!(
            before.is_subset(&owned),
            "cycle {cycle}: unowned objects before recovery: {:?}",
            before.difference(&owned).collect::<Vec<_>>()
        );
        drop(raw);

        // Reopen: recovery sweeps the dead writer's reservations.
        let client = Client::open(&store).expect("reopen after SIGKILL");
        let summary = client.open_recovery().unwrap().as_ref().unwrap().clone();
        assert!(summary.errors.is_empty(), "cycle {cycle}: {summary:?}");
        swept += summary.swept_reservations;
        assert!(
            meta::ops::publish::operation::list_reservations(client.meta())
                .unwrap()
                .is_empty()
        );
        let mut reachable = manifest_keys(&client, next);
        reachable.extend(client.ledger_owned_keys().unwrap());
        assert_eq!(
            listed(client.objects().as_ref()),
            reachable,
            "cycle {cycle}: listing vs manifests + ledger after recovery"
        );
        for (i, g) in &all_acked {
            let path = format!("outputs/file-{i}.bin");
            let entry = client
                .stat("crash", &path)
                .unwrap_or_else(|e| panic!("{path} lost: {e}"));
            assert_eq!(entry.generation, *g);
            assert_eq!(
                client.read_all("crash", &path).unwrap(),
                nokv_tests::crash_body(*i)
            );
        }
        let inflight = format!("outputs/file-{}.bin", next - 1);
        if client.stat("crash", &inflight).is_ok() {
            assert_eq!(
                client.read_all("crash", &inflight).unwrap(),
                nokv_tests::crash_body(next - 1)
            );
        }
        let fsck = client.fsck().unwrap();
        assert!(fsck.is_clean(), "cycle {cycle}: {:?}", fsck.report);
        assert!(
            fsck.unowned_objects.is_empty(),
            "cycle {cycle}: {:?}",
            fsck.unowned_objects
        );
    }
    assert!(swept > 0, "the writer never left a reservation to sweep");
}

#[test]
fn a_closed_handle_retires_its_reservations() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    {
        let client = Client::open(&store).unwrap();
        client.create_workbench("crash").unwrap();
        let options = nokv::PutOptions::create("text/plain", "test");
        for i in 0..40 {
            client
                .put("crash", &format!("outputs/f{i}"), b"small body", &options)
                .unwrap();
        }
        assert!(
            !meta::ops::publish::operation::list_reservations(client.meta())
                .unwrap()
                .is_empty(),
            "a long-lived handle reserves revisions"
        );
    }
    let client = Client::open(&store).unwrap();
    let summary = client.open_recovery().unwrap().as_ref().unwrap().clone();
    assert_eq!(summary.swept_reservations, 0, "{summary:?}");
    assert!(
        meta::ops::publish::operation::list_reservations(client.meta())
            .unwrap()
            .is_empty()
    );
    for i in 0..40 {
        assert_eq!(
            client.read_all("crash", &format!("outputs/f{i}")).unwrap(),
            b"small body"
        );
    }
    assert!(client.fsck().unwrap().is_clean());
}
