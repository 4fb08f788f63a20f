//! Shared helpers of the S3 integration tests (`tests/s3_*.rs`, cargo feature `s3-tests`).
//!
//! The endpoint of a running S3-compatible server comes from `NOKV_TEST_S3_ENDPOINT`
//! (credentials from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`, region from `AWS_REGION`).
//! A missing or unreachable endpoint FAILS the test: these tests never skip silently.
//! `.ci/run` starts s3s-fs and exports the variables; see README "S3 tests".

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use objstore::{ConditionalPut, RetryPolicy, S3Config, S3};

/// The test endpoint; panics (fails the test) when unset or unreachable.
pub fn endpoint() -> String {
    let ep = match std::env::var("NOKV_TEST_S3_ENDPOINT") {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "NOKV_TEST_S3_ENDPOINT is not set: the s3-tests need a running S3-compatible server \
             (e.g. `s3s-fs --host 127.0.0.1 --port 9000 --access-key K --secret-key S DIR`, then \
             NOKV_TEST_S3_ENDPOINT=http://127.0.0.1:9000 AWS_ACCESS_KEY_ID=K AWS_SECRET_ACCESS_KEY=S \
             AWS_REGION=us-east-1); see README"
        ),
    };
    let authority = ep
        .split_once("://")
        .map_or(ep.as_str(), |(_, r)| r)
        .trim_end_matches('/');
    let reachable = authority
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(3)).is_ok());
    assert!(reachable, "the S3 test endpoint {ep} is not reachable");
    for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        assert!(
            std::env::var(var).is_ok_and(|v| !v.is_empty()),
            "{var} must be set for the S3 tests"
        );
    }
    ep
}

/// A random lowercase hex tag (for unique bucket names and prefixes).
pub fn tag() -> String {
    let mut raw = [0u8; 6];
    getrandom_fill(&mut raw);
    objstore::hex_lower(&raw)
}

fn getrandom_fill(buf: &mut [u8]) {
    // Unique enough for test names: time + address entropy, no extra dependency.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let local = 0u8;
    let seed = format!("{nanos}-{:p}-{:?}", &local, std::thread::current().id());
    let digest = objstore::sha256_uri(seed.as_bytes());
    let hex = digest.trim_start_matches("sha256:").as_bytes();
    for (i, b) in buf.iter_mut().enumerate() {
        *b = hex[i].wrapping_mul(31).wrapping_add(hex[i + 16]);
    }
}

/// A configuration for a fresh bucket `nokv-{name}-{tag}` on the test endpoint.
pub fn config(name: &str, prefix: &str) -> S3Config {
    let mut c = S3Config::new(format!("nokv-{name}-{}", tag()), prefix);
    c.endpoint = Some(endpoint());
    c.path_style = true;
    c.conditional_put = ConditionalPut::Auto;
    c.retry = RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(50),
    };
    c
}

/// Opens `config` and creates its bucket.
pub fn open(config: S3Config) -> S3 {
    let s3 = S3::open(config).expect("open S3 provider");
    s3.create_bucket().expect("create test bucket");
    s3
}

/// A provider on a fresh bucket.
pub fn fresh(name: &str, prefix: &str) -> S3 {
    open(config(name, prefix))
}

/// A TCP server on 127.0.0.1 that accepts connections, reads what is sent and never answers
/// (each connection is held open until the listener thread ends after `hold`). Returns its URL.
pub fn black_hole(hold: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind black hole");
    let addr = listener.local_addr().expect("addr");
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + hold;
        let mut held = Vec::new();
        while std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
                    let mut buf = [0u8; 65536];
                    let _ = std::io::Read::read(&mut stream, &mut buf);
                    held.push(stream);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    format!("http://{addr}")
}

/// A 127.0.0.1 URL on which nothing listens (connections are refused).
pub fn refused_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}

/// Deterministic pseudo-random bytes.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
