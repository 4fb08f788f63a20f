//! `nokv serve --control` in process (docs/design.md, "Distribution"): two servers share the shards
//! of a control plane on a real three-member etcd cluster (testkit), routed clients reach each
//! root through its owner, a non-owner answers `NotOwner` with the owner's address and epoch,
//! an unknown root `UnknownRoot`, and a server that shuts down hands its shards over to the
//! other at once (its leases are revoked), under a higher owner epoch, with the routed client
//! following by itself. The crash, freeze and etcd-member-loss cases run as real processes in
//! `tests/tests/control_failover.rs`.

use std::time::{Duration, Instant};

use nokv::control::ControlPlane;
use nokv::PutOptions;
use nokv_remote::RemoteClient;
use nokv_server::control::{start_control, ControlServerOptions, RunningControlServer};
use nokv_server::ServerOptions;
use serde_json::Value;

fn namespace() -> String {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).expect("random");
    format!("/nokv-serve-control-{}/", objstore::hex_lower(&b))
}

fn server(endpoints: &[String], ns: &str, state: &std::path::Path) -> RunningControlServer {
    start_control(ControlServerOptions {
        server: ServerOptions {
            store: state.to_path_buf(),
            listen: "127.0.0.1:0".into(),
            owner_lease_ttl: Duration::from_secs(3),
            maintenance_interval: Duration::ZERO,
            drain_timeout: Duration::from_secs(5),
            ..ServerOptions::default()
        },
        control: endpoints.to_vec(),
        namespace: ns.to_owned(),
        poll_interval: Duration::from_millis(100),
        ..ControlServerOptions::default()
    })
    .expect("start --control server")
}

/// `(status, JSON body)` of a GET, or `None` when the connection fails.
fn get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, Value)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent.get(&format!("http://{addr}{path}")).call().ok()?;
    let status = resp.status().as_u16();
    let bytes = resp.body_mut().read_to_vec().ok()?;
    let body = serde_json::from_slice(&bytes).ok()?;
    Some((status, body))
}

fn served(addr: std::net::SocketAddr) -> Vec<String> {
    get(addr, "/healthz")
        .and_then(|(_, v)| v.get("roots").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r.get("root").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_servers_share_the_shards_route_by_root_and_hand_over_on_shutdown() {
    if testkit::etcd::skip_without_etcd() {
        return;
    }
    let cluster = testkit::etcd::shared().expect("etcd cluster");
    let endpoints = cluster.endpoints();
    let ns = namespace();
    let control = ControlPlane::connect(endpoints.clone(), &ns).expect("control plane");
    control.create_root("north", None).expect("root north");
    control.create_root("south", None).expect("root south");
    let dir = tempfile::tempdir().expect("tempdir");
    let a = server(&endpoints, &ns, &dir.path().join("a"));
    let b = server(&endpoints, &ns, &dir.path().join("b"));
    wait_until("both roots served", || {
        let mut all = served(a.addr());
        all.extend(served(b.addr()));
        all.contains(&"north".to_string()) && all.contains(&"south".to_string())
    });

    let url = endpoints.join(",");
    let north = RemoteClient::connect_routed(&url, &ns, "north", None)
        .expect("routed client")
        .with_routing_deadline(Duration::from_secs(30));
    let south = RemoteClient::connect_routed(&url, &ns, "south", None).expect("routed client");
    let opts = PutOptions::create("application/json", "serve-control-test");
    for (client, root) in [(&north, "north"), (&south, "south")] {
        assert!(client.create_workbench("wb").expect("create workbench"));
        client
            .put("wb", "outputs/a.json", root.as_bytes(), &opts)
            .expect("routed put");
        assert_eq!(
            client.read_all("wb", "outputs/a.json").expect("read"),
            root.as_bytes()
        );
    }

    // The server that does not own `north` redirects to the one that does.
    let rec = control.root_by_name("north").expect("read").expect("root");
    let (owner, _) = control
        .shard_owner(&rec.placement.logical_shard_id)
        .expect("owner");
    let owner = owner.expect("north has an owner");
    let (owner_srv, other_srv) = if owner.address == a.addr().to_string() {
        (a, b)
    } else {
        (b, a)
    };
    let (status, v) = get(
        other_srv.addr(),
        "/roots/north/v1/workbenches/wb/stat/outputs/a.json",
    )
    .expect("answer");
    // `other_srv` does not own north (it may own south, or nothing).
    assert_eq!(status, 421, "{v}");
    assert_eq!(v["code"], "NotOwner");
    assert_eq!(v["details"]["owner_address"], owner.address.as_str());
    assert_eq!(v["details"]["owner_epoch"], owner.epoch);
    assert_eq!(
        v["details"]["logical_shard_id"],
        rec.placement.logical_shard_id.to_string()
    );
    let (status, v) = get(other_srv.addr(), "/roots/no-such-root/healthz").expect("answer");
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["code"], "UnknownRoot");
    let (status, _) = get(other_srv.addr(), "/v1/schema").expect("answer");
    assert_eq!(status, 404, "requests outside /roots/<name>/ have no store");
    let missing = RemoteClient::connect_routed(&url, &ns, "no-such-root", None)
        .expect("client")
        .stat("wb", "outputs/a.json")
        .expect_err("unknown root");
    assert!(
        matches!(missing, nokv::Error::Placement { .. }),
        "{missing:?}"
    );

    // Shutdown releases the leases: the other server takes `north` over under a higher epoch
    // and the routed client follows without being told.
    let other_addr = other_srv.addr();
    owner_srv.shutdown().expect("shutdown");
    wait_until("takeover of north", || {
        served(other_addr).contains(&"north".to_string())
    });
    let (now, _) = control
        .shard_owner(&rec.placement.logical_shard_id)
        .expect("owner");
    let now = now.expect("new owner");
    assert_eq!(now.address, other_addr.to_string());
    assert!(now.epoch > owner.epoch);
    north
        .put("wb", "outputs/b.json", b"after handover", &opts)
        .expect("put after handover");
    let entry = north
        .stat("wb", "outputs/a.json")
        .expect("stat of an earlier write");
    assert_eq!(entry.logical_size, 5);
    other_srv.shutdown().expect("shutdown");
    // No server owns the shard now: a routed call gives up at its routing deadline with a
    // connection error (retryable), never hangs.
    let started = Instant::now();
    let err = north
        .with_routing_deadline(Duration::from_secs(1))
        .stat("wb", "outputs/a.json")
        .expect_err("no owner");
    assert!(matches!(err, nokv::Error::Connection { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
}
