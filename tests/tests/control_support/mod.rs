//! Shared harness of the multi-process control-plane tests (`tests/control_failover.rs`): a
//! three-member etcd cluster (testkit), an s3s-fs object server, `nokv serve --control` child
//! processes of the real CLI binary, routed writers that log every acknowledged write durably,
//! and the checks run afterwards.
//!
//! s3s-fs must be on `PATH` or in `$CARGO_HOME/bin` (`.ci/run` installs it); a missing binary
//! fails the test.

#![allow(dead_code)]

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nokv::control::ControlPlane;
use nokv::PutOptions;
use nokv_remote::RemoteClient;
use serde_json::Value;

/// Lease TTL of the servers, seconds.
pub const TTL_SECS: u64 = 3;
/// Object-server credentials (s3s-fs accepts exactly these).
pub const ACCESS_KEY: &str = "nokv-ctl-test";
/// Object-server secret.
pub const SECRET_KEY: &str = "nokv-ctl-test-secret";
/// Bucket of the deployment.
pub const BUCKET: &str = "nokv-ctl";

/// Serializes the tests of one binary: each starts an etcd cluster and two servers, which is
/// the whole 2-core machine's worth of work.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn free_port() -> u16 {
    testkit::s3s::free_port().expect("free port")
}

use testkit::s3s::wait_tcp;

/// A running s3s-fs over a temporary directory, killed on drop.
pub struct ObjectServer {
    _server: testkit::s3s::S3sFs,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl ObjectServer {
    /// Starts s3s-fs with the deployment bucket.
    pub fn start() -> ObjectServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = testkit::s3s::S3sFs::start(dir.path(), BUCKET, ACCESS_KEY, SECRET_KEY)
            .expect("start s3s-fs");
        ObjectServer {
            endpoint: server.endpoint.clone(),
            _server: server,
            _dir: dir,
        }
    }
}

/// One `nokv serve --control` child process.
pub struct Server {
    child: Option<Child>,
    /// `host:port` it listens on.
    pub addr: String,
    /// Its stderr log.
    pub log: PathBuf,
}

impl Server {
    /// Starts a server with state directory `state` on a free loopback port.
    pub fn start(state: &Path, control: &str, objects: &ObjectServer) -> Server {
        let log = state.with_extension("log");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
            .arg("--store")
            .arg(state)
            .args(["serve", "--control", control, "--listen", &addr])
            .args(["--lease-ttl", &TTL_SECS.to_string()])
            .args(["--objects", &format!("s3://{BUCKET}")])
            .args(["--endpoint", &objects.endpoint])
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("AWS_REGION", "us-east-1")
            .env_remove("NOKV_TOKEN")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("start nokv serve --control");
        assert!(
            wait_tcp(&addr, Duration::from_secs(30)),
            "the server did not listen"
        );
        Server {
            child: Some(child),
            addr,
            log,
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child
            .as_ref()
            .and_then(|c| i32::try_from(c.id()).ok())
            .expect("running server")
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this handle still owns (not yet reaped).
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill({signal})");
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The roots `/healthz` lists as served (empty when the server does not answer).
    pub fn served_roots(&self) -> Vec<String> {
        match http(&self.addr, "GET", "/healthz", b"") {
            Some((200, body)) => serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.get("roots").cloned())
                .and_then(|r| r.as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter(|r| r.get("serving").and_then(Value::as_bool) == Some(true))
                .filter_map(|r| r.get("root").and_then(Value::as_str).map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Its stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: as in `signal`: the child is not reaped yet. SIGCONT first in case a test
            // left it stopped.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGCONT);
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One HTTP/1.1 exchange with `Connection: close` (no client library: the tests also talk to
/// a server that is not the root's owner, bypassing the routing client). `None` when the
/// connection fails.
pub fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> Option<(u16, Vec<u8>)> {
    let sock: SocketAddr = addr.parse().ok()?;
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(3)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text_end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..text_end]).ok()?;
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let mut body = raw[text_end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body)?;
    }
    Some((status, body))
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = b.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..line_end]).ok()?.trim(), 16).ok()?;
        b = &b[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// A deployment: etcd cluster, object server, roots, two servers.
pub struct Deployment {
    /// The etcd cluster (three members).
    pub etcd: testkit::etcd::EtcdCluster,
    /// Comma-separated etcd client URLs.
    pub control: String,
    /// The object server.
    pub objects: ObjectServer,
    /// The servers.
    pub servers: Vec<Server>,
    /// Root names.
    pub roots: Vec<String>,
    /// Temporary state directories and logs.
    pub dir: tempfile::TempDir,
}

impl Deployment {
    /// Starts etcd (3 members), s3s-fs, creates `roots` (one logical shard each: a logical
    /// shard serves one root in this version) and two servers, and waits until every root is
    /// served.
    pub fn start(roots: &[&str]) -> Deployment {
        let etcd = testkit::etcd::EtcdCluster::start(3).expect("etcd cluster");
        let control = etcd.endpoints().join(",");
        let objects = ObjectServer::start();
        let cp = control_plane(&control);
        for r in roots {
            cp.create_root(r, None).expect("create root");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let servers = (0..2)
            .map(|i| Server::start(&dir.path().join(format!("server{i}")), &control, &objects))
            .collect();
        let d = Deployment {
            etcd,
            control,
            objects,
            servers,
            roots: roots.iter().map(|r| r.to_string()).collect(),
            dir,
        };
        d.wait_served(&d.roots, None, Duration::from_secs(60));
        d
    }

    /// Waits until every root of `roots` is served by some server (by `only` when given);
    /// returns the time it took. Panics after `within`.
    pub fn wait_served(&self, roots: &[String], only: Option<usize>, within: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let served: Vec<String> = self
                .servers
                .iter()
                .enumerate()
                .filter(|(i, _)| only.is_none_or(|o| o == *i))
                .flat_map(|(_, s)| s.served_roots())
                .collect();
            if roots.iter().all(|r| served.contains(r)) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "roots {roots:?} not served within {within:?}; served {served:?}; logs:\n{}",
                self.servers
                    .iter()
                    .map(Server::log_text)
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Index of the server that owns `root` now (by its address in the owner record).
    pub fn owner_of(&self, root: &str) -> usize {
        let cp = control_plane(&self.control);
        let rec = cp.root_by_name(root).expect("read").expect("root");
        let (owner, _) = cp
            .shard_owner(&rec.placement.logical_shard_id)
            .expect("owner");
        let addr = owner.expect("an owner").address;
        self.servers
            .iter()
            .position(|s| s.addr == addr)
            .expect("owner is one of the servers")
    }

    /// The owner epoch of `root`'s shard now.
    pub fn epoch_of(&self, root: &str) -> u64 {
        let cp = control_plane(&self.control);
        let rec = cp.root_by_name(root).expect("read").expect("root");
        let (owner, last) = cp
            .shard_owner(&rec.placement.logical_shard_id)
            .expect("owner");
        owner.map_or(last, |o| o.epoch)
    }

    /// A routed client of `root`.
    pub fn client(&self, root: &str) -> RemoteClient {
        RemoteClient::connect_routed(&self.control, "/nokv/", root, None)
            .expect("routed client")
            .with_routing_deadline(Duration::from_secs(40))
            .with_response_timeout(Duration::from_secs(5))
    }
}

/// A control-plane handle.
pub fn control_plane(control: &str) -> ControlPlane {
    ControlPlane::connect(
        nokv::control::parse_control_url(control).expect("urls"),
        "/nokv/",
    )
    .expect("control plane")
}

/// One write a writer tried.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Root.
    pub root: String,
    /// Workbench-relative path.
    pub path: String,
    /// `sha256:` digest of the body.
    pub digest: String,
    /// Whether it was acknowledged (and logged).
    pub acked: bool,
    /// When the answer came.
    pub at: Instant,
}

/// Routed writers: `per_root` threads per root publish small JSON files create-only to
/// workbench `load` until stopped; every acknowledged write is appended to the ack log and
/// fdatasync'd before the next write.
pub struct Writers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Vec<Attempt>>>,
    /// The durable ack log.
    pub ack_log: PathBuf,
}

impl Writers {
    /// Starts the writers.
    pub fn start(d: &Deployment, per_root: usize) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let ack_log = d.dir.path().join("acks.log");
        let log = Arc::new(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&ack_log)
                .expect("ack log"),
        ));
        let mut threads = Vec::new();
        for root in &d.roots {
            d.client(root)
                .create_workbench("load")
                .expect("create the load workbench");
            for t in 0..per_root {
                let client = d.client(root);
                let (stop, log, root) = (stop.clone(), log.clone(), root.clone());
                threads.push(std::thread::spawn(move || {
                    let mut attempts = Vec::new();
                    let mut i = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        let path = format!("outputs/w{t}/{i:06}.json");
                        let body = format!(
                            "{{\"root\":\"{root}\",\"writer\":{t},\"seq\":{i},\"pad\":\"{}\"}}",
                            "x".repeat(64 + (i % 7) as usize * 40)
                        );
                        let digest = objstore::sha256_uri(body.as_bytes());
                        let result = client.put(
                            "load",
                            &path,
                            body.as_bytes(),
                            &PutOptions::create("application/json", "control-failover-test"),
                        );
                        let acked = match result {
                            Ok(r) => {
                                assert_eq!(r.digest_uri, digest, "receipt digest");
                                let mut f = log.lock().expect("log");
                                writeln!(f, "{root} {path} {digest}").expect("log write");
                                f.sync_data().expect("log fdatasync");
                                true
                            }
                            Err(e) => {
                                if attempts.len() < 3 {
                                    eprintln!("writer {root}/{t}: {path}: {e}");
                                }
                                false
                            }
                        };
                        attempts.push(Attempt {
                            root: root.clone(),
                            path,
                            digest,
                            acked,
                            at: Instant::now(),
                        });
                        i += 1;
                    }
                    attempts
                }));
            }
        }
        Writers {
            stop,
            threads,
            ack_log,
        }
    }

    /// Stops the writers and returns every attempt.
    pub fn stop(self) -> Vec<Attempt> {
        self.stop.store(true, Ordering::Release);
        self.threads
            .into_iter()
            .flat_map(|t| t.join().expect("writer thread"))
            .collect()
    }
}

/// Reads the durable ack log: `(root, path, digest)` per acknowledged write.
pub fn read_acks(log: &Path) -> Vec<(String, String, String)> {
    let f = std::fs::File::open(log).expect("ack log");
    std::io::BufReader::new(f)
        .lines()
        .map(|l| {
            let l = l.expect("line");
            let mut it = l.split(' ');
            (
                it.next().expect("root").to_owned(),
                it.next().expect("path").to_owned(),
                it.next().expect("digest").to_owned(),
            )
        })
        .collect()
}

/// Checks that every logged acknowledgement is present with its bytes, that every
/// unacknowledged attempt is either absent or whole (never half-visible), and that fsck of
/// every root (reference counts recomputed from rows, objects present) is clean. Returns the
/// number of acknowledged writes.
pub fn verify(d: &Deployment, attempts: &[Attempt], ack_log: &Path) -> usize {
    let acks = read_acks(ack_log);
    let clients: std::collections::HashMap<String, RemoteClient> =
        d.roots.iter().map(|r| (r.clone(), d.client(r))).collect();
    for (root, path, digest) in &acks {
        let c = &clients[root];
        let entry = c
            .stat("load", path)
            .unwrap_or_else(|e| panic!("acknowledged {root}:{path} is missing: {e}"));
        assert_eq!(&entry.body_digest_uri, digest, "{root}:{path}");
        let bytes = c.read_all("load", path).expect("read acknowledged body");
        assert_eq!(&objstore::sha256_uri(&bytes), digest, "{root}:{path} bytes");
    }
    for a in attempts.iter().filter(|a| !a.acked) {
        match clients[&a.root].stat("load", &a.path) {
            Ok(entry) => {
                assert_eq!(entry.body_digest_uri, a.digest);
                let bytes = clients[&a.root]
                    .read_all("load", &a.path)
                    .expect("read unacknowledged but visible body");
                assert_eq!(objstore::sha256_uri(&bytes), a.digest, "whole or nothing");
            }
            Err(nokv::Error::OperationFailed { code, .. }) if code == "NotFound" => {}
            Err(e) => panic!("stat of unacknowledged {}:{}: {e}", a.root, a.path),
        }
    }
    for (root, c) in &clients {
        let report = c.fsck().expect("fsck");
        assert_eq!(
            report.get("clean").and_then(Value::as_bool),
            Some(true),
            "fsck of {root}: {report}"
        );
    }
    acks.len()
}
