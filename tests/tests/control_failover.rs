//! Multi-process acceptance tests of `nokv serve --control` (issue 15; docs/design.md,
//! "Distribution"): real `nokv serve --control` processes, a three-member etcd cluster and an
//! s3s-fs object server on loopback, routed clients writing continuously and logging every
//! acknowledged write durably.
//!
//! A logical shard serves one root in this version, so the deployment has two roots on two
//! logical shards (one root per shard). Each test bounds its own duration (load phases of a few
//! seconds, waits of at most 60 s). Run by the etcd stage of `.ci/run` with `--features
//! s3-tests` (the test starts its own s3s-fs, which that stage has installed).

#![cfg(feature = "s3-tests")]

mod control_support;

use std::time::{Duration, Instant};

use control_support::{http, verify, Deployment, Writers, TTL_SECS};
use serde_json::Value;

/// An HTTP status and body.
type Answer = (u16, Vec<u8>);

fn lock() -> std::sync::MutexGuard<'static, ()> {
    control_support::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

#[test]
fn killing_a_shard_owner_hands_its_root_to_the_other_server_and_loses_no_acknowledged_write() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let _one = lock();
    let mut d = Deployment::start(&["alpha", "beta"]);
    let writers = Writers::start(&d, 2);
    std::thread::sleep(Duration::from_secs(2));
    let victim_root = "alpha";
    let victim = d.owner_of(victim_root);
    let survivor = 1 - victim;
    let epoch_before = d.epoch_of(victim_root);
    d.servers[victim].kill9();
    let killed_at = Instant::now();
    let takeover = d.wait_served(
        &[victim_root.to_string()],
        Some(survivor),
        Duration::from_secs(60),
    );
    // Load goes on through the survivor.
    std::thread::sleep(Duration::from_secs(3));
    let attempts = writers.stop();
    let first_ack_after_kill = attempts
        .iter()
        .filter(|a| a.root == victim_root && a.acked && a.at > killed_at)
        .map(|a| a.at.duration_since(killed_at))
        .min()
        .expect("writes of the victim's root were acknowledged after the kill");
    eprintln!(
        "takeover of {victim_root}: served by the other server {} ms after kill -9, first acknowledged write after {} ms (lease TTL {TTL_SECS} s)",
        takeover.as_millis(),
        first_ack_after_kill.as_millis()
    );
    assert!(
        d.epoch_of(victim_root) > epoch_before,
        "takeover runs under a higher epoch"
    );
    let acked = verify(&d, &attempts, &d.dir.path().join("acks.log"));
    assert!(acked > 0);
    let acked_after = attempts
        .iter()
        .filter(|a| a.acked && a.at > killed_at + takeover)
        .count();
    assert!(acked_after > 0, "writes go on after the takeover");
}

#[test]
fn a_stopped_owner_past_its_lease_is_fenced_and_none_of_its_late_writes_is_visible() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let _one = lock();
    let d = Deployment::start(&["gamma", "delta"]);
    let root = "gamma";
    let old = d.owner_of(root);
    let new = 1 - old;
    let old_epoch = d.epoch_of(root);
    let client = d.client(root);
    client.create_workbench("load").expect("workbench");
    client
        .put(
            "load",
            "outputs/before.json",
            b"{\"before\":true}",
            &nokv::PutOptions::create("application/json", "fencing-test"),
        )
        .expect("write before the freeze");

    d.servers[old].signal(libc::SIGSTOP);
    // Requests sent straight to the frozen owner while it is stopped: answered only after
    // SIGCONT, when its lease is long gone.
    let frozen_addr = d.servers[old].addr.clone();
    let late: Vec<std::thread::JoinHandle<Option<Answer>>> = (0..3)
        .map(|i| {
            let addr = frozen_addr.clone();
            let root = root.to_string();
            std::thread::spawn(move || {
                http(
                    &addr,
                    "POST",
                    &format!("/roots/{root}/v1/tools/workbench_put_file"),
                    format!(
                        "{{\"id\":\"load\",\"section\":\"outputs\",\"path\":\"late-{i}.json\",\"text\":\"{{}}\"}}"
                    )
                    .as_bytes(),
                )
            })
        })
        .collect();
    d.wait_served(&[root.to_string()], Some(new), Duration::from_secs(60));
    let new_epoch = d.epoch_of(root);
    assert!(new_epoch > old_epoch);
    client
        .put(
            "load",
            "outputs/after-takeover.json",
            b"{\"after\":true}",
            &nokv::PutOptions::create("application/json", "fencing-test"),
        )
        .expect("the new owner writes");

    d.servers[old].signal(libc::SIGCONT);
    let mut typed = 0;
    for (i, h) in late.into_iter().enumerate() {
        if let Some((status, body)) = h.join().expect("late request") {
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let code = v.get("code").and_then(Value::as_str).unwrap_or_default();
            assert_ne!(
                v.get("status").and_then(Value::as_str),
                Some("success"),
                "late write {i} to the fenced owner succeeded: {status} {v}"
            );
            if matches!(code, "LeaseLost" | "NotOwner")
                || v.pointer("/details/reason").and_then(Value::as_str) == Some("fenced")
            {
                typed += 1;
            }
        }
    }
    // The old owner's next command after waking up: a typed refusal naming the new owner.
    let (status, body) = http(
        &frozen_addr,
        "PUT",
        &format!("/roots/{root}/v1/workbenches/load/files/outputs/next.json"),
        b"{\"next\":true}",
    )
    .expect("the old owner answers");
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(status, 421, "{v}");
    let code = v.get("code").and_then(Value::as_str).unwrap_or_default();
    assert!(matches!(code, "LeaseLost" | "NotOwner"), "{v}");
    assert_eq!(
        v.pointer("/details/owner_address").and_then(Value::as_str),
        Some(d.servers[new].addr.as_str()),
        "{v}"
    );
    assert_eq!(
        v.pointer("/details/owner_epoch").and_then(Value::as_u64),
        Some(new_epoch)
    );
    eprintln!("late requests answered with a typed fenced/lease-lost error: {typed} of 3");

    for path in [
        "outputs/late-0.json",
        "outputs/late-1.json",
        "outputs/late-2.json",
        "outputs/next.json",
    ] {
        match client.stat("load", path) {
            Err(nokv::Error::OperationFailed { code, .. }) if code == "NotFound" => {}
            other => panic!("a write sent to the fenced owner is visible: {path}: {other:?}"),
        }
    }
    for path in ["outputs/before.json", "outputs/after-takeover.json"] {
        client
            .stat("load", path)
            .expect("acknowledged write present");
    }
    let report = client.fsck().expect("fsck");
    assert_eq!(
        report.get("clean").and_then(Value::as_bool),
        Some(true),
        "{report}"
    );
}

#[test]
fn killing_one_of_three_etcd_members_under_load_loses_no_acknowledged_write() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let _one = lock();
    let d = Deployment::start(&["eps", "zeta"]);
    let writers = Writers::start(&d, 2);
    std::thread::sleep(Duration::from_secs(2));
    let member = leader_index(&d);
    d.etcd.kill_member(member).expect("kill etcd member");
    let killed_at = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let attempts = writers.stop();
    let after = attempts
        .iter()
        .filter(|a| a.acked && a.at > killed_at + Duration::from_secs(1))
        .count();
    eprintln!("etcd leader (member {member}) killed; {after} writes acknowledged after the kill");
    assert!(after > 0, "writes go on after an etcd member is lost");
    verify(&d, &attempts, &d.dir.path().join("acks.log"));
}

/// The member index of the etcd leader (each member's status).
fn leader_index(d: &Deployment) -> usize {
    for i in 0..3 {
        let endpoint = d.etcd.endpoint(i).expect("endpoint");
        let client =
            meta::store::etcd::connect(&[endpoint], Duration::from_secs(5)).expect("client");
        let status = meta::store::etcd::bridge::run({
            let mut c = client;
            async move { c.status().await }
        })
        .expect("run")
        .expect("status");
        if status.header().map(|h| h.member_id()) == Some(status.leader()) {
            return i;
        }
    }
    panic!("no member reports itself leader");
}
