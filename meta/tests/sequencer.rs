//! The command sequencer (`MetaShard::sequenced`, `meta::shard::sequencer`): concurrent writers
//! of different paths never fail or retry for each other's sake, commit versions stay
//! `read_version + 1` and dense, real predicate failures still surface, and a section cannot be
//! nested on one thread.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use meta::{
    normalize, ArtifactRevisionId, Error, ManifestRow, MetaShard, OpenOptions, PathCondition,
    PublishRequest, RequestId,
};

/// Opens a writer whose periodic RecoveryOutbox maintenance step never comes due in these
/// tests, so every commit version they count belongs to a command they submitted.
fn open(dir: &Path) -> MetaShard {
    let mut opts = OpenOptions::default();
    opts.outbox_retention.maintenance_interval = u64::MAX;
    MetaShard::open(dir, opts).expect("open")
}

fn digest(tag: &str) -> String {
    use sha2::Digest;
    format!(
        "sha256:{}",
        sha2::Sha256::digest(tag.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

fn request(shard: &MetaShard, wb: &str, path: &str, condition: PathCondition) -> PublishRequest {
    let rev = ArtifactRevisionId::random().unwrap();
    PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: wb.to_owned(),
        path: normalize(path).unwrap(),
        condition,
        revision_id: rev,
        logical_size: 5,
        body_digest_uri: digest(&format!("body-{path}")),
        content_type: "text/plain; charset=utf-8".into(),
        producer: "test".into(),
        manifest_id: None,
        manifest: vec![ManifestRow {
            object_index: 0,
            physical_owner_revision: rev,
            physical_object_index: 0,
            object_key: format!(
                "nokv/artifacts/{}/{}/{}/blocks/{:016x}",
                shard.logical_shard_id(),
                shard.root_id(),
                rev,
                0
            ),
            logical_offset: 0,
            object_offset: 0,
            length: 5,
            digest_uri: digest(&format!("{rev}-0")),
            append_segment: None,
        }],
        dependency_depth: 0,
        index_fields: Default::default(),
    }
}

/// 16 threads publish 20 distinct paths each and create one workbench each, all at once: every
/// command succeeds on its first plan (no read-version conflict, no retry budget exhausted), and
/// the commit versions are dense.
#[test]
fn concurrent_writers_of_distinct_paths_never_conflict() {
    const THREADS: usize = 16;
    const EACH: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let start = shard.version().unwrap();
    let failures = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (shard, failures) = (shard.clone(), &failures);
            s.spawn(move || {
                if shard.create_workspace(&format!("wb-{t}")).is_err() {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                for i in 0..EACH {
                    let req = request(&shard, "wb", &format!("t{t}/f{i}"), PathCondition::Create);
                    match shard.publish(req) {
                        Ok(r) => assert!(!r.idempotent_replay),
                        Err(e) => panic!("publish of a distinct path failed: {e:?}"),
                    }
                }
            });
        }
    });
    assert_eq!(failures.load(Ordering::Relaxed), 0);
    // One command per workbench and per publication, nothing else, versions dense.
    assert_eq!(
        shard.version().unwrap(),
        start + (THREADS + THREADS * EACH) as u64
    );
    let read = shard.read();
    let ws = read.visible_workspace("wb").unwrap();
    for t in 0..THREADS {
        for i in 0..EACH {
            let path = normalize(&format!("t{t}/f{i}")).unwrap();
            assert!(read.path_entry(&ws.incarnation, &path).unwrap().is_some());
        }
        assert!(read.visible_workspace(&format!("wb-{t}")).is_ok());
    }
}

/// Racing create-only publications of the *same* path: exactly one wins, every other one gets
/// the real precondition failure (`PathAlreadyExists`), never a read-version conflict.
#[test]
fn racing_writers_of_one_path_get_the_real_precondition_failure() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let shard = shard.clone();
                s.spawn(move || shard.publish(request(&shard, "wb", "same", PathCondition::Create)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1);
    for r in results.iter().filter(|r| r.is_err()) {
        assert!(
            matches!(r, Err(Error::PathAlreadyExists)),
            "unexpected failure: {r:?}"
        );
    }
}

#[test]
fn a_section_cannot_be_nested_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    let inner = shard.sequenced(|_| Ok::<_, Error>(shard.create_workspace("wb")));
    assert!(matches!(inner, Ok(Err(Error::InvalidArgument(_)))));
    // The shard is still usable afterwards.
    assert!(shard.create_workspace("wb").unwrap().created);
}

/// A raw command planned at the newest accepted state goes through the sequencer with commit
/// version = read version + 1; one planned at an older version is refused with nothing applied.
#[test]
fn a_stale_raw_command_is_refused_and_a_fresh_one_applies_at_read_version_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let v = shard.version().unwrap();
    let fresh = shard.command_header(
        RequestId::random().unwrap(),
        [1; 32],
        v,
        meta::codec::CommandResult::OperationRecorded {
            kind: meta::codec::OperationKind::Publish,
            operation_id: meta::OperationId([7; 16]),
            phase: 1,
        },
    );
    let stale = meta::command::MetadataCommand {
        request_id: RequestId::random().unwrap(),
        read_version: v - 1,
        ..fresh.clone()
    };
    assert!(matches!(
        shard.execute(stale),
        Err(Error::ReadVersionConflict { attempts: 1 })
    ));
    assert_eq!(shard.version().unwrap(), v);
    let out = shard.execute(fresh).unwrap();
    assert_eq!(out.commit_version, v + 1);
    assert_eq!(shard.version().unwrap(), v + 1);
}
