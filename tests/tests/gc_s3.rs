//! Object lifetime on a real S3-compatible service (s3s-fs; cargo feature `s3-tests`, run by
//! `.ci/run`):
//!
//! - a GC DELETE whose answer is lost (a proxy forwards the request to s3s-fs and drops the
//!   response) quarantines the revision; the next pass HEADs each object, finds it absent and
//!   publishes Deleted;
//! - a process killed (SIGKILL) during a multipart `collect` leaves its upload open with the id
//!   recorded in the StagedObject ledger; recovery aborts it, so no multipart upload stays open
//!   (checked through ListMultipartUploads where the service implements it, and through the
//!   s3s-fs data directory `NOKV_TEST_S3_DIR` otherwise). The multipart test stores blocks under
//!   short names ([`nokv_tests::ShortKeys`]): s3s-fs names its multipart files after the base64
//!   object key, which exceeds the file-name limit for full block keys.
#![cfg(feature = "s3-tests")]

mod s3_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use meta::codec::{RevisionState, StagedObject};
use nokv::lifetime::{GcOptions, RemoveOptions};
use nokv::{Client, ClientOptions, PutOptions};
use objstore::{
    ConditionalPut, Error as ObjError, ObjectMeta, ObjectStore, PutOutcome, RetryPolicy, S3,
};

/// A TCP proxy in front of `upstream` (`http://host:port`): requests are always forwarded; while
/// `drop_answers` is set, the upstream's responses are read and discarded (the answer is lost).
fn lossy_proxy(upstream: &str) -> (String, Arc<AtomicBool>) {
    let target = upstream
        .split_once("://")
        .map_or(upstream, |(_, r)| r)
        .trim_end_matches('/')
        .to_string();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let addr = listener.local_addr().expect("addr");
    let drop_answers = Arc::new(AtomicBool::new(false));
    let flag = drop_answers.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let Ok(mut server) = TcpStream::connect(&target) else {
                continue;
            };
            let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
                continue;
            };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = c2.read(&mut buf) {
                    if n == 0 || s2.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            let flag = flag.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = server.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if !flag.load(Ordering::SeqCst) && client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), drop_answers)
}

/// Every call goes to `real` except DELETE, which goes through the lossy proxy.
#[derive(Debug)]
struct LossyDeletes {
    real: S3,
    proxied: S3,
}

impl ObjectStore for LossyDeletes {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), ObjError> {
        self.real.put(key, bytes)
    }
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, ObjError> {
        self.real.put_if_absent(key, bytes)
    }
    fn get(&self, key: &str) -> Result<Vec<u8>, ObjError> {
        self.real.get(key)
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, ObjError> {
        self.real.get_range(key, offset, len)
    }
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjError> {
        self.real.head(key)
    }
    fn delete(&self, key: &str) -> Result<(), ObjError> {
        self.proxied.delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, ObjError> {
        self.real.list(prefix)
    }
    fn provider_name(&self) -> &'static str {
        "s3"
    }
}

#[test]
fn a_gc_delete_whose_answer_is_lost_is_quarantined_and_reconciled_by_the_next_pass() {
    let endpoint = s3_support::endpoint();
    let real_config = s3_support::config("gclost", "p");
    let real = s3_support::open(real_config.clone());
    let (proxy, drop_answers) = lossy_proxy(&endpoint);
    let mut proxied_config = real_config;
    proxied_config.endpoint = Some(proxy);
    proxied_config.conditional_put = ConditionalPut::IfNoneMatch;
    proxied_config.attempt_timeout = Duration::from_millis(400);
    proxied_config.connect_timeout = Duration::from_millis(400);
    proxied_config.retry = RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
    };
    let proxied = S3::open(proxied_config).unwrap();
    let objects = Arc::new(LossyDeletes { real, proxied });
    let dir = tempfile::tempdir().unwrap();
    let client = Client::open_with(
        dir.path().join("store"),
        ClientOptions {
            objects: Some(objects.clone()),
            ..ClientOptions::default()
        },
    )
    .unwrap();
    client
        .config_set("history_retention_versions", "0")
        .unwrap();
    client.create_workbench("wb").unwrap();
    let bytes = s3_support::bytes(3000, 11);
    client
        .put(
            "wb",
            "outputs/x.bin",
            &bytes,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .unwrap();
    let entry = client.stat("wb", "outputs/x.bin").unwrap();
    let rev = entry.artifact_revision_id;
    let key = client.meta().read().manifest(&rev).unwrap()[0]
        .object_key
        .clone();
    client
        .remove("wb", "outputs/x.bin", &RemoveOptions::default())
        .unwrap();

    drop_answers.store(true, Ordering::SeqCst);
    let report = client.gc(&GcOptions::default()).unwrap();
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    assert_eq!(report.quarantined[0].revision, rev);
    assert!(
        report.quarantined[0].evidence.contains("ambiguous DELETE"),
        "{}",
        report.quarantined[0].evidence
    );
    assert!(report.collected.is_empty());
    let state = client.meta().read().revision(&rev).unwrap().unwrap().state;
    assert_eq!(state, RevisionState::Quarantined);
    // The DELETE did reach the service: the object is gone, only the answer was lost.
    assert_eq!(objects.real.head(&key).unwrap(), None);
    let e = client.gc_explain_revision(&rev.to_hex()).unwrap();
    assert!(matches!(
        e.verdict,
        nokv::lifetime::Verdict::Quarantined { .. }
    ));

    drop_answers.store(false, Ordering::SeqCst);
    let report = client.gc(&GcOptions::default()).unwrap();
    assert_eq!(report.collected.len(), 1, "{report:?}");
    assert!(report.collected[0].reconciled);
    assert!(report.quarantined.is_empty());
    let state = client.meta().read().revision(&rev).unwrap().unwrap().state;
    assert_eq!(state, RevisionState::Deleted);
    let outcome = client.fsck().unwrap();
    assert!(
        outcome.report.findings.is_empty(),
        "{:?}",
        outcome.report.findings
    );
}

/// Open multipart uploads of the bucket: through ListMultipartUploads, or — s3s-fs does not
/// implement it (HTTP 501) — from its data directory (`.upload-<id>.json` per open upload).
fn open_uploads(s3: &S3) -> Vec<String> {
    match s3.list_uploads("") {
        Ok(uploads) => uploads.into_iter().map(|u| u.upload_id).collect(),
        Err(ObjError::Refused {
            status: Some(501), ..
        }) => {
            let dir = std::env::var("NOKV_TEST_S3_DIR").expect(
                "the S3 service does not implement ListMultipartUploads: NOKV_TEST_S3_DIR must \
                 name the s3s-fs data directory (.ci/run exports it)",
            );
            std::fs::read_dir(dir)
                .expect("read the s3s-fs directory")
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let id = name.strip_prefix(".upload-")?.strip_suffix(".json")?;
                    Some(id.to_string())
                })
                .collect()
        }
        Err(e) => panic!("listing multipart uploads failed: {e}"),
    }
}

#[test]
fn a_process_killed_during_a_multipart_collect_leaves_no_upload_open_after_recovery() {
    let endpoint = s3_support::endpoint();
    let mut config = s3_support::config("multipart", "p");
    config.multipart_threshold = 5 * 1024 * 1024;
    config.part_size = 5 * 1024 * 1024;
    let s3 = s3_support::open(config.clone());
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_multipart_collector"))
        .arg(&store)
        .arg(&config.bucket)
        .arg(&endpoint)
        .env("NOKV_FAULT_POINT", "multipart-after-first-part")
        .output()
        .expect("run multipart_collector");
    assert_eq!(
        out.status.code(),
        None,
        "the collector should have been killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The upload is open, and the ledger owns its id.
    let before = open_uploads(&s3);
    let opened = {
        let client = Client::open_with(
            &store,
            ClientOptions {
                objects: Some(Arc::new(nokv_tests::ShortKeys {
                    inner: S3::open(config.clone()).unwrap(),
                })),
                recover_at_open: false,
                block_size: 12 * 1024 * 1024,
                ..ClientOptions::default()
            },
        )
        .unwrap();
        let ops = meta::ops::publish::operation::list_pending(client.meta()).unwrap();
        assert_eq!(ops.len(), 1);
        let rows: Vec<(u64, StagedObject)> =
            meta::ops::publish::operation::ledger(client.meta(), &ops[0].operation_id).unwrap();
        rows[0]
            .1
            .upload_id
            .clone()
            .expect("the ledger recorded the upload id")
    };
    assert!(before.contains(&opened), "{before:?} lacks {opened}");
    // Recovery (at open) aborts the upload from the ledger.
    let client = Client::open_with(
        &store,
        ClientOptions {
            objects: Some(Arc::new(nokv_tests::ShortKeys {
                inner: S3::open(config).unwrap(),
            })),
            block_size: 12 * 1024 * 1024,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let summary = client
        .open_recovery()
        .expect("recovery ran")
        .as_ref()
        .expect("recovery succeeded");
    assert_eq!(summary.cleaned, 1, "{summary:?}");
    assert!(
        !open_uploads(&s3).contains(&opened),
        "the killed upload is still open"
    );
    assert!(client.stat("mp", "outputs/big.bin").is_err());
}
