//! Tests of the etcd TxnStore against a real three-member etcd cluster on loopback
//! (`testkit::etcd::shared`; they fail, never skip, when etcd cannot start — except that on a
//! machine without an etcd binary they return early unless `NOKV_REQUIRE_ETCD` is set, see
//! `testkit::etcd::skip_without_etcd`).

use std::time::Duration;

use super::*;
use crate::error::Error;
use crate::family::Family;
use crate::ids::LogicalShardId;
use crate::store::predicate::{Mutation, Predicate};
use crate::store::{
    CheckedWrite, HoltStore, ScanSpec, Snapshot, TxnStore, WriteFailure, MAX_SCAN_ITEMS,
};

fn cluster() -> &'static testkit::etcd::EtcdCluster {
    testkit::etcd::shared().expect("a three-member etcd cluster on loopback")
}

fn options_on(endpoints: Vec<String>) -> EtcdOptions {
    let mut o = EtcdOptions::new(endpoints, LogicalShardId::random().expect("random id"));
    o.namespace = format!("/t-{}/", LogicalShardId::random().expect("random"));
    o
}

fn options() -> EtcdOptions {
    options_on(cluster().endpoints())
}

fn store() -> EtcdStore {
    EtcdStore::open(options()).expect("open")
}

/// A one-member cluster of its own: compaction is cluster-wide, and the floors of the other
/// tests' shards (which never raise them) would hold it back on the shared cluster.
fn own_cluster() -> testkit::etcd::EtcdCluster {
    testkit::etcd::EtcdCluster::start(1).expect("a one-member etcd cluster")
}

fn holt_store() -> HoltStore {
    let db = holt::Db::open_memory(holt::Options::default()).expect("memory db");
    HoltStore::create_missing_trees(&db).expect("trees");
    HoltStore::new(db).expect("store")
}

fn put(family: Family, key: &[u8], value: &[u8]) -> Mutation {
    Mutation::put(family, key.to_vec(), value.to_vec())
}

fn write(store: &impl TxnStore, read_version: u64, mutations: Vec<Mutation>) -> u64 {
    store
        .write(CheckedWrite {
            read_version: Some(read_version),
            predicates: Vec::new(),
            mutations,
        })
        .expect("write")
}

#[test]
fn commit_versions_are_dense_and_the_read_version_fence_holds() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let s = store();
    assert_eq!(s.version(), 0);
    assert_eq!(write(&s, 0, vec![put(Family::Tag, b"a", b"1")]), 1);
    assert_eq!(write(&s, 1, vec![put(Family::Tag, b"b", b"2")]), 2);
    let stale = s.write(CheckedWrite {
        read_version: Some(1),
        predicates: Vec::new(),
        mutations: vec![put(Family::Tag, b"c", b"3")],
    });
    assert!(matches!(
        stale,
        Err(WriteFailure::ReadVersion {
            expected: 1,
            actual: 2
        })
    ));
    let snap = s.snapshot();
    assert_eq!(snap.version(), 2);
    assert_eq!(
        snap.get(Family::Tag, b"c").expect("get"),
        None,
        "nothing applied"
    );
    // A write without a read-version fence commits at the next version.
    let v = s
        .write(CheckedWrite {
            read_version: None,
            predicates: Vec::new(),
            mutations: vec![put(Family::Tag, b"d", b"4")],
        })
        .expect("unfenced write");
    assert_eq!(v, 3);
}

#[test]
fn failed_predicates_are_named_in_order_and_apply_nothing() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let s = store();
    write(&s, 0, vec![put(Family::Commit, b"k", b"v1")]);
    let attempt = |predicates: Vec<Predicate>| {
        s.write(CheckedWrite {
            read_version: Some(1),
            predicates,
            mutations: vec![put(Family::Commit, b"new", b"x")],
        })
    };
    let absent_ok = Predicate::absent(Family::Commit, b"missing".to_vec());
    let equals_bad = Predicate::equals(Family::Commit, b"k".to_vec(), b"v0".to_vec());
    let absent_bad = Predicate::absent(Family::Commit, b"k".to_vec());
    match attempt(vec![absent_ok.clone(), equals_bad, absent_bad]) {
        Err(WriteFailure::Predicate { family, key }) => {
            assert_eq!(family, Some(Family::Commit));
            assert_eq!(key, b"k".to_vec());
        }
        other => panic!(
            "expected a predicate failure, got {:?}",
            other.map_err(|_| ())
        ),
    }
    let present_missing = Predicate {
        family: Family::Commit,
        key: b"nope".to_vec(),
        expect: crate::store::Expectation::Present,
    };
    assert!(matches!(
        attempt(vec![present_missing]),
        Err(WriteFailure::Predicate { .. })
    ));
    // Equals on a missing key fails (etcd fails value compares on absent keys).
    assert!(matches!(
        attempt(vec![Predicate::equals(
            Family::Commit,
            b"nope".to_vec(),
            Vec::new()
        )]),
        Err(WriteFailure::Predicate { .. })
    ));
    assert_eq!(s.snapshot().get(Family::Commit, b"new").expect("get"), None);
    assert_eq!(s.version(), 1, "no failed write moved the clock");
    let ok = attempt(vec![
        absent_ok,
        Predicate::equals(Family::Commit, b"k".to_vec(), b"v1".to_vec()),
    ]);
    assert_eq!(ok.ok(), Some(2));
}

#[test]
fn the_last_mutation_of_a_key_wins() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let s = store();
    write(
        &s,
        0,
        vec![
            put(Family::Tag, b"a", b"1"),
            Mutation::Delete {
                family: Family::Tag,
                key: b"a".to_vec(),
            },
            put(Family::Tag, b"b", b"1"),
            put(Family::Tag, b"b", b"2"),
        ],
    );
    let snap = s.snapshot();
    assert_eq!(snap.get(Family::Tag, b"a").expect("get"), None);
    assert_eq!(
        snap.get(Family::Tag, b"b").expect("get"),
        Some(b"2".to_vec())
    );
}

/// Deterministic xorshift for the scan comparison.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn scans_return_exactly_what_holt_returns() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let e = store();
    let h = holt_store();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Keys over a small alphabet with '/' as the delimiter, so roll-ups, exact rows equal to
    // roll-up prefixes and deep subtrees all occur; 600 rows cross page boundaries.
    let alphabet = [b'a', b'b', b'/', b'c', 0x00, 0xfe];
    let mut keys = std::collections::BTreeSet::new();
    while keys.len() < 600 {
        let len = 1 + rng.below(6) as usize;
        let k: Vec<u8> = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
            .collect();
        keys.insert(k);
    }
    let keys: Vec<Vec<u8>> = keys.into_iter().collect();
    for (i, chunk) in keys.chunks(200).enumerate() {
        let m: Vec<Mutation> = chunk
            .iter()
            .map(|k| put(Family::PathCurrent, k, &[k.len() as u8]))
            .collect();
        write(&e, i as u64, m.clone());
        write(&h, i as u64, m);
    }
    let (es, hs) = (e.snapshot(), h.snapshot());
    let mut specs = Vec::new();
    for _ in 0..120 {
        let base = &keys[rng.below(keys.len() as u64) as usize];
        let prefix = base[..(rng.below(3) as usize).min(base.len())].to_vec();
        let start_after = match rng.below(3) {
            0 => None,
            1 => Some(keys[rng.below(keys.len() as u64) as usize].clone()),
            _ => {
                let mut p = prefix.clone();
                p.push(alphabet[rng.below(3) as usize]);
                p.push(b'/');
                Some(p)
            }
        };
        let delimiter = if rng.below(2) == 0 { Some(b'/') } else { None };
        let limit = [1usize, 2, 7, 50, MAX_SCAN_ITEMS][rng.below(5) as usize];
        specs.push(ScanSpec {
            prefix,
            start_after,
            delimiter,
            limit,
        });
    }
    for spec in specs {
        let from_etcd = es.scan(Family::PathCurrent, &spec).expect("etcd scan");
        let from_holt = hs.scan(Family::PathCurrent, &spec).expect("holt scan");
        assert_eq!(from_etcd, from_holt, "scan {spec:?}");
    }
    // A full paged walk sees every row once.
    let rows = es.rows(Family::PathCurrent, &[], "test").expect("rows");
    assert_eq!(rows.len(), keys.len());
}

#[test]
fn older_versions_are_readable_until_the_floor() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let s = store();
    for v in 0..5u64 {
        write(&s, v, vec![put(Family::Tag, b"k", &v.to_be_bytes())]);
    }
    for v in 1..=5u64 {
        let at = s.snapshot_at(v).expect("snapshot_at");
        assert_eq!(at.version(), v);
        assert_eq!(
            at.get(Family::Tag, b"k").expect("get"),
            Some((v - 1).to_be_bytes().to_vec())
        );
    }
    assert!(matches!(s.snapshot_at(6), Err(Error::InvalidArgument(_))));
    s.set_history_floor(3).expect("floor");
    assert_eq!(s.history_floor().expect("floor"), 3);
    assert!(matches!(
        s.snapshot_at(2),
        Err(Error::Storage(holt::Error::HistoryPruned {
            requested: 2,
            floor: 3
        }))
    ));
    assert!(s.snapshot_at(3).is_ok());
    // The floor never moves down, nor above the current version.
    s.set_history_floor(1).expect("lower floor is a no-op");
    assert_eq!(s.history_floor().expect("floor"), 3);
    assert!(s.set_history_floor(9).is_err());
}

#[test]
fn compaction_never_passes_any_shards_floor() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    // Two shards of two namespaces on one cluster: compaction is cluster-wide.
    let c = own_cluster();
    let a = EtcdStore::open(options_on(c.endpoints())).expect("open");
    let b = EtcdStore::open(options_on(c.endpoints())).expect("open");
    write(&a, 0, vec![put(Family::Tag, b"k", b"a1")]);
    write(&b, 0, vec![put(Family::Tag, b"k", b"b1")]);
    write(&a, 1, vec![put(Family::Tag, b"k", b"a2")]);
    write(&b, 1, vec![put(Family::Tag, b"k", b"b2")]);
    write(&a, 2, vec![put(Family::Tag, b"k", b"a3")]);
    // Shard b keeps version 1 (as a HistoryHold would); shard a may drop below 3.
    b.set_history_floor(1).expect("b floor");
    a.set_history_floor(3).expect("a floor");
    a.compact_history().expect("compaction pass");
    let b1 = b.snapshot_at(1).expect("b still reads version 1");
    assert_eq!(
        b1.get(Family::Tag, b"k").expect("get"),
        Some(b"b1".to_vec())
    );
    let a3 = a.snapshot_at(3).expect("a reads its floor");
    assert_eq!(
        a3.get(Family::Tag, b"k").expect("get"),
        Some(b"a3".to_vec())
    );
    // Once b lets go, compaction moves past its old versions and they are reported pruned.
    b.set_history_floor(2).expect("b floor");
    let compacted = a.compact_history().expect("compaction pass");
    assert!(compacted.is_some(), "the pass compacted further");
    assert!(a.compacted_revision().expect("record") >= compacted.unwrap_or(0));
    assert!(matches!(
        b.snapshot_at(1),
        Err(Error::Storage(holt::Error::HistoryPruned { .. }))
    ));
    let b2 = b.snapshot_at(2).expect("b reads its floor");
    assert_eq!(
        b2.get(Family::Tag, b"k").expect("get"),
        Some(b"b2".to_vec())
    );
}

#[test]
fn a_snapshot_survives_compaction_past_its_revision() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let c = own_cluster();
    let a = EtcdStore::open(options_on(c.endpoints())).expect("open");
    let other = EtcdStore::open(options_on(c.endpoints())).expect("open");
    write(&a, 0, vec![put(Family::Tag, b"k", b"a1")]);
    let snap = a.snapshot();
    // Other shards write; this shard's floor reaches the snapshot's version.
    for v in 0..3 {
        write(&other, v, vec![put(Family::Tag, b"x", &[v as u8])]);
    }
    other.set_history_floor(3).expect("other floor");
    a.set_history_floor(1).expect("a floor");
    a.compact_history().expect("compaction pass");
    // The snapshot's revision may now be compacted: it moves to a newer revision showing the
    // same version.
    assert_eq!(
        snap.get(Family::Tag, b"k").expect("get"),
        Some(b"a1".to_vec())
    );
}

#[test]
fn a_lost_owner_lease_fences_every_write() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let mut opts = options();
    let client = connect(&opts.endpoints, Duration::from_secs(5)).expect("client");
    let owner_key = format!("{}control/owners/test", opts.namespace).into_bytes();
    let lease = bridge::run({
        let mut c = client.clone();
        async move { c.lease_grant(30, None).await }
    })
    .expect("run")
    .expect("grant")
    .id();
    let key = owner_key.clone();
    bridge::run({
        let mut c = client.clone();
        async move {
            c.put(
                key,
                b"owner".to_vec(),
                Some(etcd_client::PutOptions::new().with_lease(lease)),
            )
            .await
        }
    })
    .expect("run")
    .expect("put owner");
    opts.owner_fence = Some(OwnerFence {
        key: owner_key,
        lease_id: lease,
        serving: None,
    });
    let s = EtcdStore::open(opts).expect("open");
    assert_eq!(write(&s, 0, vec![put(Family::Tag, b"a", b"1")]), 1);
    bridge::run({
        let mut c = client.clone();
        async move { c.lease_revoke(lease).await }
    })
    .expect("run")
    .expect("revoke");
    let fenced = s.write(CheckedWrite {
        read_version: Some(1),
        predicates: Vec::new(),
        mutations: vec![put(Family::Tag, b"b", b"2")],
    });
    assert!(matches!(
        fenced,
        Err(WriteFailure::Other(Error::Fenced { .. }))
    ));
    assert_eq!(s.snapshot().get(Family::Tag, b"b").expect("get"), None);
    assert_eq!(s.version(), 1);
}

#[test]
fn writes_over_the_etcd_limits_fail_before_sending() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let mut opts = options();
    opts.limits.max_txn_ops = 64;
    let s = EtcdStore::open(opts).expect("open");
    let many: Vec<Mutation> = (0..100u32)
        .map(|i| put(Family::ArtifactManifest, &i.to_be_bytes(), b"row"))
        .collect();
    let r = s.write(CheckedWrite {
        read_version: Some(0),
        predicates: Vec::new(),
        mutations: many,
    });
    assert!(matches!(
        r,
        Err(WriteFailure::Other(Error::ResourceExhausted {
            maximum: 64,
            ..
        }))
    ));
    let mut opts = options();
    opts.limits.max_request_bytes = 128 * 1024;
    let s = EtcdStore::open(opts).expect("open");
    let r = s.write(CheckedWrite {
        read_version: Some(0),
        predicates: Vec::new(),
        mutations: vec![put(Family::Operation, b"big", &vec![7u8; 200 * 1024])],
    });
    assert!(matches!(
        r,
        Err(WriteFailure::Other(Error::ResourceExhausted { .. }))
    ));
    assert_eq!(s.version(), 0, "nothing applied");
}

#[test]
fn an_unreachable_cluster_is_a_typed_error_not_a_hang() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let mut opts = options();
    // A port nothing listens on (bound and released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    opts.endpoints = vec![format!("http://127.0.0.1:{port}")];
    opts.retry_window = Duration::from_millis(300);
    opts.request_timeout = Duration::from_millis(300);
    let s = EtcdStore::open(opts).expect("open is lazy");
    let snap = s.snapshot();
    assert_eq!(snap.version(), 0);
    assert!(matches!(
        snap.get(Family::Tag, b"k"),
        Err(Error::StoreUnavailable { .. })
    ));
    assert!(matches!(
        s.write(CheckedWrite {
            read_version: Some(0),
            predicates: Vec::new(),
            mutations: vec![put(Family::Tag, b"k", b"v")],
        }),
        Err(WriteFailure::Other(Error::StoreUnavailable { .. }))
    ));
}

/// The endpoint index of the current leader of `cluster` (asks each member for its status).
fn leader_index(cluster: &testkit::etcd::EtcdCluster) -> usize {
    for i in 0..3 {
        let endpoint = cluster.endpoint(i).expect("endpoint");
        let client = connect(&[endpoint], Duration::from_secs(5)).expect("client");
        let status = bridge::run({
            let mut c = client;
            async move { c.status().await }
        })
        .expect("run")
        .expect("status");
        let me = status.header().expect("header").member_id();
        if status.leader() == me {
            return i;
        }
    }
    panic!("no member reports itself leader");
}

#[test]
fn killing_the_leader_of_three_members_loses_no_acknowledged_write_and_writes_go_on() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    // A cluster of its own: the test kills one of its members.
    let cluster = testkit::etcd::EtcdCluster::start(3).expect("a three-member etcd cluster");
    let s = std::sync::Arc::new(EtcdStore::open(options_on(cluster.endpoints())).expect("open"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Writes acknowledged since the kill (the writer counts once `killed` is set).
    let acked_after = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The writer logs every acknowledged write (key, value, commit version); failures are
    // allowed only as typed unavailability while the cluster elects a new leader.
    let writer = {
        let s = std::sync::Arc::clone(&s);
        let stop = std::sync::Arc::clone(&stop);
        let (acked_after, killed) = (
            std::sync::Arc::clone(&acked_after),
            std::sync::Arc::clone(&killed),
        );
        std::thread::spawn(move || {
            let mut acked: Vec<(u32, u64, std::time::Instant)> = Vec::new();
            let mut unavailable = 0u32;
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Acquire) && i < 100_000 {
                let key = i.to_be_bytes();
                match s.write(CheckedWrite {
                    read_version: None,
                    predicates: Vec::new(),
                    mutations: vec![put(Family::Tag, &key, format!("v{i}").as_bytes())],
                }) {
                    Ok(v) => {
                        acked.push((i, v, std::time::Instant::now()));
                        if killed.load(std::sync::atomic::Ordering::Acquire) {
                            acked_after.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                        }
                    }
                    Err(WriteFailure::Other(Error::StoreUnavailable { .. })) => unavailable += 1,
                    Err(e) => panic!("write {i} failed with {e:?}"),
                }
                i += 1;
            }
            (acked, unavailable)
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let acked_count = std::sync::Arc::clone(&acked_after);
    let victim = leader_index(&cluster);
    cluster.kill_member(victim).expect("kill the leader");
    killed.store(true, std::sync::atomic::Ordering::Release);
    let killed_at = std::time::Instant::now();
    // Keep writing until 50 writes were acknowledged after the kill (bounded at 30 s).
    while acked_count.load(std::sync::atomic::Ordering::Acquire) < 50
        && killed_at.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    let (acked, unavailable) = writer.join().expect("writer");
    let before = acked.iter().filter(|a| a.2 < killed_at).count();
    let after = acked.len() - before;
    let first_after = acked
        .iter()
        .find(|a| a.2 >= killed_at)
        .map(|a| a.2 - killed_at);
    eprintln!(
        "acknowledged {before} writes before the kill, {after} after (first after {first_after:?}); {unavailable} typed unavailable answers"
    );
    assert!(before > 0, "writes were acknowledged before the kill");
    assert!(
        after >= 50,
        "writes go on with two of three members ({after} acknowledged in 30 s)"
    );
    // Every acknowledged write is present at its commit version, read through a surviving member.
    let snap = s.snapshot();
    for (i, v, _) in &acked {
        assert_eq!(
            snap.get(Family::Tag, &i.to_be_bytes()).expect("get"),
            Some(format!("v{i}").into_bytes()),
            "acknowledged write {i} (version {v}) is present"
        );
    }
    // Commit versions stay dense and increasing across the failover.
    for w in acked.windows(2) {
        assert!(w[1].1 > w[0].1, "commit versions increase");
    }
    assert!(snap.version() >= acked.last().expect("acked").1);
}
