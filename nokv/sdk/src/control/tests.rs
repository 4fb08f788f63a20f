//! Control-plane tests against a real three-member etcd cluster on loopback (they fail, never
//! skip, when etcd cannot start — except that on a machine without an etcd binary they return
//! early unless `NOKV_REQUIRE_ETCD` is set, see `testkit::etcd::skip_without_etcd`).

use std::time::{Duration, Instant};

use meta::codec::RootPlacementLifecycle;
use meta::{LogicalShardId, RootId};

use super::owner::{safety_margin, serving_deadline};
use super::*;
use crate::error::Error;

fn control() -> ControlPlane {
    let cluster = testkit::etcd::shared().expect("a three-member etcd cluster on loopback");
    let ns = format!("/ctl-{}/", RootId::random().expect("random"));
    ControlPlane::connect(cluster.endpoints(), &ns).expect("connect")
}

fn kind(e: Error) -> PlacementErrorKind {
    match e {
        Error::Placement { kind, .. } => kind,
        other => panic!("expected a placement refusal, got {other:?}"),
    }
}

#[test]
fn roots_are_placed_before_their_first_write_and_names_are_unique() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let cp = control();
    let a = cp.create_root("team-a", None).expect("create");
    assert_eq!(a.placement.placement_generation, 1);
    assert_eq!(a.placement.lifecycle, RootPlacementLifecycle::Provisioning);
    let shard = cp
        .get_shard(&a.placement.logical_shard_id)
        .expect("read")
        .expect("a shard record was created with the root");
    assert_eq!(shard.engine, ShardEngine::Etcd);
    assert_eq!(cp.root_by_name("team-a").expect("read"), Some(a.clone()));
    assert_eq!(
        kind(cp.create_root("team-a", None).unwrap_err()),
        PlacementErrorKind::NameTaken
    );
    assert_eq!(
        kind(
            cp.create_root("team-b", Some(a.placement.logical_shard_id))
                .unwrap_err()
        ),
        PlacementErrorKind::ShardHasRoot,
        "one root per logical shard in this version"
    );
    assert!(matches!(
        cp.create_root("bad name", None),
        Err(Error::InvalidArgument(_))
    ));
    cp.create_root("team-b", None).expect("second root");
    let names: Vec<String> = cp
        .list_roots()
        .expect("list")
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, vec!["team-a", "team-b"]);
    assert_eq!(cp.list_shards().expect("shards").len(), 2);
}

#[test]
fn a_populated_root_never_changes_logical_shard() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let cp = control();
    let r = cp.create_root("moving", None).expect("create");
    let spare = cp.create_shard(ShardEngine::Etcd).expect("shard");
    // While Provisioning (no write yet), the root may be placed elsewhere; the generation moves.
    let moved = cp
        .reassign_root("moving", spare.id().expect("id"))
        .expect("reassign a provisioning root");
    assert_eq!(moved.placement.placement_generation, 2);
    assert_eq!(moved.placement.logical_shard_id, spare.id().expect("id"));
    // The old shard is free again.
    cp.create_root("other", Some(r.placement.logical_shard_id))
        .expect("the vacated shard takes another root");
    // Once its shard installed the RootFence, the root is Active and stays put.
    let active = cp.activate_root(&moved.placement).expect("activate");
    assert_eq!(active.placement.lifecycle, RootPlacementLifecycle::Active);
    let third = cp.create_shard(ShardEngine::Etcd).expect("shard");
    assert_eq!(
        kind(
            cp.reassign_root("moving", third.id().expect("id"))
                .unwrap_err()
        ),
        PlacementErrorKind::PopulatedRoot
    );
    assert_eq!(
        cp.root_by_name("moving").expect("read"),
        Some(active.clone()),
        "nothing changed"
    );
    // Activation against a stale placement is refused.
    assert_eq!(
        kind(cp.activate_root(&r.placement).unwrap_err()),
        PlacementErrorKind::Conflict
    );
}

#[test]
fn shard_ownership_is_exclusive_and_epochs_strictly_increase() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let cp = control();
    let shard = cp
        .create_shard(ShardEngine::Etcd)
        .expect("shard")
        .id()
        .expect("id");
    let ttl = Duration::from_secs(5);
    let a = cp
        .acquire_shard(&shard, "owner-a", "127.0.0.1:1", ttl)
        .expect("acquire");
    assert_eq!(a.epoch(), 1);
    assert!(a.is_serving());
    assert_eq!(
        kind(
            cp.acquire_shard(&shard, "owner-b", "127.0.0.1:2", ttl)
                .unwrap_err()
        ),
        PlacementErrorKind::OwnerHeld
    );
    let status = cp.list_shards().expect("list");
    let owner = status[0].owner.clone().expect("owner listed");
    assert_eq!(owner.owner_id, "owner-a");
    assert_eq!(owner.epoch, 1);
    a.release().expect("release");
    let b = cp
        .acquire_shard(&shard, "owner-b", "127.0.0.1:2", ttl)
        .expect("acquire after release");
    assert_eq!(b.epoch(), 2);
    drop(b);
    let c = cp
        .acquire_shard(&shard, "owner-c", "127.0.0.1:3", ttl)
        .expect("acquire after drop");
    assert_eq!(c.epoch(), 3);
    assert_eq!(cp.list_shards().expect("list")[0].last_epoch, 3);
    assert!(matches!(
        cp.acquire_shard(&LogicalShardId::random().expect("id"), "x", "", ttl),
        Err(Error::Placement {
            kind: PlacementErrorKind::UnknownShard,
            ..
        })
    ));
}

#[test]
fn the_serving_deadline_keeps_a_safety_margin_before_the_lease_ends() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let t = Instant::now();
    let ttl = Duration::from_secs(10);
    assert_eq!(safety_margin(ttl), Duration::from_secs(1));
    assert_eq!(serving_deadline(t, ttl), t + Duration::from_secs(9));
    // Short leases keep at least 500 ms.
    assert_eq!(
        safety_margin(Duration::from_secs(2)),
        Duration::from_millis(500)
    );
    assert!(serving_deadline(t, Duration::from_secs(2)) < t + Duration::from_secs(2));
}

#[test]
fn a_lapsed_owner_stops_serving_before_another_takes_over_and_cannot_commit() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let cp = control();
    let root = cp.create_root("fenced", None).expect("root");
    let shard = root.placement.logical_shard_id;
    let ttl = Duration::from_secs(2);
    let mut a = cp
        .acquire_shard(&shard, "owner-a", "127.0.0.1:1", ttl)
        .expect("acquire");
    let open = |ownership: &ShardOwnership| {
        let mut o = meta::store::etcd::EtcdOptions::new(cp.endpoints().to_vec(), shard);
        o.namespace = cp.namespace().to_owned();
        o.owner_fence = Some(ownership.fence());
        meta::MetaShard::open_etcd(
            o,
            meta::OpenOptions {
                placement: Some(root.placement),
                ..Default::default()
            },
        )
        .expect("open the shard as its owner")
    };
    let shard_a = open(&a);
    cp.activate_root(&root.placement).expect("activate");
    shard_a.create_workspace("before").expect("owner A writes");
    // A freezes: no more renewals. B keeps trying until etcd expires A's lease.
    a.stop_renewing();
    let deadline = Instant::now() + Duration::from_secs(30);
    let b = loop {
        match cp.acquire_shard(&shard, "owner-b", "127.0.0.1:2", ttl) {
            Ok(b) => break b,
            Err(Error::Placement {
                kind: PlacementErrorKind::OwnerHeld,
                ..
            }) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("B could not take over: {e}"),
        }
    };
    assert!(
        !a.is_serving(),
        "A must have stopped serving before B could acquire the shard"
    );
    assert_eq!(
        a.check_serving().map_err(kind).unwrap_err(),
        PlacementErrorKind::LeaseLost
    );
    assert!(b.epoch() > a.epoch());
    // A's late write is fenced inside the etcd transaction and applies nothing.
    assert!(matches!(
        shard_a.create_workspace("after-fence"),
        Err(meta::Error::Fenced { .. })
    ));
    let shard_b = open(&b);
    shard_b.create_workspace("by-b").expect("B writes");
    let read = shard_b.read();
    assert!(read.visible_workspace("before").is_ok());
    assert!(read.visible_workspace("by-b").is_ok());
    assert!(
        read.visible_workspace("after-fence").is_err(),
        "no write of the fenced owner is visible"
    );
}

#[test]
fn an_owner_past_its_serving_deadline_refuses_writes_before_sending_them() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let cp = control();
    let root = cp.create_root("fail-stop", None).expect("root");
    let shard = root.placement.logical_shard_id;
    let ttl = Duration::from_secs(2);
    let mut a = cp
        .acquire_shard(&shard, "owner-a", "127.0.0.1:1", ttl)
        .expect("acquire");
    let mut o = meta::store::etcd::EtcdOptions::new(cp.endpoints().to_vec(), shard);
    o.namespace = cp.namespace().to_owned();
    o.owner_fence = Some(a.fence());
    let shard_a = meta::MetaShard::open_etcd(
        o,
        meta::OpenOptions {
            placement: Some(root.placement),
            ..Default::default()
        },
    )
    .expect("open the shard as its owner");
    cp.activate_root(&root.placement).expect("activate");
    shard_a.create_workspace("before").expect("owner A writes");
    let version = shard_a.version().expect("version");
    // A freezes: no more renewals; its own clock ends its serving window first.
    a.stop_renewing();
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.is_serving() {
        assert!(Instant::now() < deadline, "the serving window never closed");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The local fail-stop check refuses the write before it is sent, whatever etcd's lease.
    match shard_a.create_workspace("late") {
        Err(meta::Error::Fenced { reason }) => {
            assert!(reason.contains("stopped serving"), "{reason}")
        }
        other => panic!("expected the fail-stop refusal, got {other:?}"),
    }
    assert_eq!(
        shard_a.version().expect("version"),
        version,
        "nothing applied"
    );
    assert!(shard_a.read().visible_workspace("late").is_err());
}
