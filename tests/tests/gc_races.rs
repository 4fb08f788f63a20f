//! Races between a GC claim and a concurrent reference addition to the same revision (issue 12
//! acceptance): publication (a new revision reusing the candidate's blocks adds a
//! RevisionDependency reference), commit, restore and snapshot. In every round exactly one side
//! wins — the reference is created and the revision stays Available with its bytes, or the
//! revision is collected and the reference addition fails (or never saw the revision) — and no
//! reference to a Deleting/Deleted revision ever exists (fsck, which checks exactly that, is
//! clean after every round).

mod gc_support;

use std::sync::{Arc, Barrier};
use std::thread;

use gc_support::{assert_fsck_clean, body, create, open_gc, own_keys, provider_keys};
use meta::codec::{ManifestRow, RevisionState};
use meta::ops::snapshot::SnapshotSelector;
use meta::{ArtifactRevisionId, PathCondition, PublishRequest, RequestId};
use nokv::commit::CommitRequest;
use nokv::lifetime::{GcOptions, RemoveOptions};
use nokv::restore::{RestoreFrom, RestoreRequest};
use nokv::snapshot::SnapshotOptions;

const ROUNDS: usize = 8;

fn state(client: &nokv::Client, rev: &ArtifactRevisionId) -> RevisionState {
    client.meta().read().revision(rev).unwrap().unwrap().state
}

/// GC passes on a clone of `client` until `done` is set (at least one pass).
fn gc_loop(
    client: nokv::Client,
    done: Arc<std::sync::atomic::AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || loop {
        // Busy (read-version contention) is retried by the next pass.
        let _ = client.gc(&GcOptions::default());
        if done.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = client.gc(&GcOptions::default());
            return;
        }
    })
}

#[test]
fn gc_claim_versus_a_publication_reusing_the_revision_has_one_winner() {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    client.create_workbench("wb").unwrap();
    let mut wins = (0, 0);
    for round in 0..ROUNDS {
        let path = format!("outputs/base{round}.bin");
        let bytes = body(round as u64, 3000);
        client.put("wb", &path, &bytes, &create()).unwrap();
        let entry = client.stat("wb", &path).unwrap();
        let rev = entry.artifact_revision_id;
        let rows = client.meta().read().manifest(&rev).unwrap();
        client
            .remove("wb", &path, &RemoveOptions::default())
            .unwrap();
        // A child revision whose manifest reuses the (now unreferenced) revision's block.
        let child = ArtifactRevisionId::random().unwrap();
        let reused: Vec<ManifestRow> = rows.clone();
        let req = PublishRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: "wb".into(),
            path: nokv::Client::normalize(&format!("outputs/child{round}.bin")).unwrap(),
            condition: PathCondition::Create,
            revision_id: child,
            logical_size: entry.logical_size,
            body_digest_uri: entry.body_digest_uri.clone(),
            content_type: "application/octet-stream".into(),
            producer: "race".into(),
            manifest_id: None,
            manifest: reused,
            dependency_depth: 1,
            index_fields: Default::default(),
        };
        let barrier = Arc::new(Barrier::new(2));
        let (b1, c1) = (barrier.clone(), client.clone());
        let gc = thread::spawn(move || {
            b1.wait();
            c1.gc(&GcOptions::default())
        });
        let (b2, c2) = (barrier, client.clone());
        let publish = thread::spawn(move || {
            b2.wait();
            c2.meta().publish(req)
        });
        let published = publish.join().unwrap();
        gc.join().unwrap().unwrap();
        // Whatever the interleaving, a later pass settles everything still collectable.
        client.gc(&GcOptions::default()).unwrap();
        match published {
            Ok(_) => {
                wins.0 += 1;
                assert_eq!(
                    state(&client, &rev),
                    RevisionState::Available,
                    "round {round}"
                );
                assert_eq!(
                    client
                        .read_all("wb", &format!("outputs/child{round}.bin"))
                        .unwrap(),
                    bytes
                );
            }
            Err(meta::Error::RevisionUnavailable { .. }) => {
                wins.1 += 1;
                assert_eq!(
                    state(&client, &rev),
                    RevisionState::Deleted,
                    "round {round}"
                );
                assert!(client
                    .stat("wb", &format!("outputs/child{round}.bin"))
                    .is_err());
            }
            Err(e) => panic!("round {round}: unexpected publication error {e:?}"),
        }
        assert_fsck_clean(&client);
    }
    assert_eq!(wins.0 + wins.1, ROUNDS);
}

#[test]
fn gc_claim_versus_a_commit_of_a_path_removed_meanwhile_has_one_winner() {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    for round in 0..ROUNDS {
        let wb = format!("wb{round}");
        client.create_workbench(&wb).unwrap();
        let bytes = body(50 + round as u64, 2500);
        client.put(&wb, "outputs/m.bin", &bytes, &create()).unwrap();
        let rev = client
            .stat(&wb, "outputs/m.bin")
            .unwrap()
            .artifact_revision_id;
        let keys = own_keys(&client, &rev.to_hex());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let barrier = Arc::new(Barrier::new(2));
        let (b1, c1, w1) = (barrier.clone(), client.clone(), wb.clone());
        let remover = thread::spawn(move || {
            b1.wait();
            c1.remove(&w1, "outputs/m.bin", &RemoveOptions::default())
                .unwrap();
        });
        let gc = gc_loop(client.clone(), done.clone());
        let (b2, c2, w2) = (barrier, client.clone(), wb.clone());
        let committer = thread::spawn(move || {
            b2.wait();
            c2.commit(&CommitRequest {
                workbench_id: w2,
                manifest: serde_json::json!({"round": round}),
                content_digest_uri: format!("sha256:{}", "cd".repeat(32)),
                replace: false,
                parents: Vec::new(),
            })
        });
        remover.join().unwrap();
        let commit = committer.join().unwrap().expect("commit");
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        gc.join().unwrap();
        client.gc(&GcOptions::default()).unwrap();
        let info = client
            .commit_info(&commit.commit_identity)
            .unwrap()
            .unwrap();
        let includes = info.member_count == 2; // the file + run_manifest.json
        if includes {
            // The commit won: it references the revision, which kept its bytes.
            assert_eq!(state(&client, &rev), RevisionState::Available);
            assert!(keys.is_subset(&provider_keys(&client)));
            client
                .restore(&RestoreRequest {
                    source_workbench_id: wb.clone(),
                    destination_workbench_id: format!("{wb}-r"),
                    from: RestoreFrom::Commit(
                        nokv::commit::parse_commit_id(&commit.commit_identity).unwrap(),
                    ),
                })
                .unwrap();
            assert_eq!(
                client
                    .read_all(&format!("{wb}-r"), "outputs/m.bin")
                    .unwrap(),
                bytes
            );
        } else {
            // The removal came first: the commit never saw the path; GC collected it.
            assert_eq!(info.member_count, 1);
            assert_eq!(state(&client, &rev), RevisionState::Deleted);
            assert!(keys.is_disjoint(&provider_keys(&client)));
        }
        assert_fsck_clean(&client);
    }
}

#[test]
fn gc_versus_a_restore_from_a_retiring_snapshot_has_one_winner() {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    let mut wins = (0, 0);
    for round in 0..ROUNDS {
        let wb = format!("src{round}");
        client.create_workbench(&wb).unwrap();
        let bytes = body(90 + round as u64, 2000);
        client.put(&wb, "outputs/s.bin", &bytes, &create()).unwrap();
        let rev = client
            .stat(&wb, "outputs/s.bin")
            .unwrap()
            .artifact_revision_id;
        let snap = client
            .create_snapshot(&wb, &SnapshotOptions::default())
            .unwrap();
        client
            .remove(&wb, "outputs/s.bin", &RemoveOptions::default())
            .unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gc = gc_loop(client.clone(), done.clone());
        let barrier = Arc::new(Barrier::new(2));
        let sel = SnapshotSelector::Id(snap.snapshot_id);
        let (b1, c1, w1, s1) = (barrier.clone(), client.clone(), wb.clone(), sel.clone());
        let retirer = thread::spawn(move || {
            b1.wait();
            // A live restore consumer refuses retirement; retry until it is released.
            for _ in 0..200 {
                match c1.retire_snapshot(&w1, &s1) {
                    Ok(_) => return,
                    Err(_) => thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
            panic!("the snapshot could never be retired");
        });
        let (b2, c2, w2) = (barrier, client.clone(), wb.clone());
        let restorer = thread::spawn(move || {
            b2.wait();
            c2.restore(&RestoreRequest {
                source_workbench_id: w2.clone(),
                destination_workbench_id: format!("{w2}-copy"),
                from: RestoreFrom::Snapshot(sel),
            })
        });
        let restored = restorer.join().unwrap();
        retirer.join().unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        gc.join().unwrap();
        client.gc(&GcOptions::default()).unwrap();
        match restored {
            Ok(_) => {
                wins.0 += 1;
                assert_eq!(state(&client, &rev), RevisionState::Available);
                assert_eq!(
                    client
                        .read_all(&format!("{wb}-copy"), "outputs/s.bin")
                        .unwrap(),
                    bytes
                );
            }
            Err(_) => {
                wins.1 += 1;
                assert_eq!(state(&client, &rev), RevisionState::Deleted);
            }
        }
        assert_fsck_clean(&client);
    }
    assert_eq!(wins.0 + wins.1, ROUNDS);
}

#[test]
fn gc_versus_a_snapshot_minted_while_the_path_is_removed_never_loses_what_the_snapshot_sees() {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    for round in 0..ROUNDS {
        let wb = format!("snap{round}");
        client.create_workbench(&wb).unwrap();
        let bytes = body(130 + round as u64, 2200);
        client.put(&wb, "outputs/v.bin", &bytes, &create()).unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gc = gc_loop(client.clone(), done.clone());
        let barrier = Arc::new(Barrier::new(2));
        let (b1, c1, w1) = (barrier.clone(), client.clone(), wb.clone());
        let remover = thread::spawn(move || {
            b1.wait();
            c1.remove(&w1, "outputs/v.bin", &RemoveOptions::default())
                .unwrap();
        });
        let (b2, c2, w2) = (barrier, client.clone(), wb.clone());
        let minter = thread::spawn(move || {
            b2.wait();
            c2.create_snapshot(&w2, &SnapshotOptions::default())
        });
        remover.join().unwrap();
        let snap = minter.join().unwrap().unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        gc.join().unwrap();
        client.gc(&GcOptions::default()).unwrap();
        let (_info, reader) = client
            .snapshot_reader(&wb, &SnapshotSelector::Id(snap.snapshot_id))
            .unwrap();
        let inc = reader.visible_workspace(&wb).unwrap().incarnation;
        let norm = nokv::Client::normalize("outputs/v.bin").unwrap();
        if let Some(entry) = reader.path_entry(&inc, &norm).unwrap() {
            // The snapshot was minted before the removal: its bytes were never collected.
            assert_eq!(
                client.read_entry(&reader, &entry).unwrap(),
                bytes,
                "round {round}"
            );
        }
        assert_fsck_clean(&client);
    }
}
