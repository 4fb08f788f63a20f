//! The Publish-operation ledger on a real S3-compatible service (s3s-fs; cargo feature
//! `s3-tests`): an injected outage after k of n blocks leaves the bucket listing equal to the
//! ledger's uploaded rows and recovery deletes exactly them; an ambiguous S3 upload (sent, never
//! answered) is quarantined with evidence and reconciled by a later recovery pass.
#![cfg(feature = "s3-tests")]

mod s3_support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use meta::codec::{PublishPhase, StagedProviderState};
use meta::ops::publish::operation as ledger;
use nokv::{Client, ClientOptions, PutOptions};
use objstore::{
    ConditionalPut, Error as ObjError, ObjectMeta, ObjectStore, PutOutcome, RetryPolicy, S3Config,
    S3,
};

/// Every call goes to the real bucket, except: puts after `puts_allowed` fail (or, with
/// `ambiguous_puts`, go to a provider that never answers), and deletes fail while
/// `deletes_down`.
#[derive(Debug)]
struct Routed {
    real: S3,
    ambiguous_puts: Option<S3>,
    puts: AtomicU64,
    puts_allowed: AtomicU64,
    deletes_down: AtomicBool,
}

impl Routed {
    fn new(real: S3, ambiguous_puts: Option<S3>) -> Self {
        Routed {
            real,
            ambiguous_puts,
            puts: AtomicU64::new(0),
            puts_allowed: AtomicU64::new(u64::MAX),
            deletes_down: AtomicBool::new(false),
        }
    }
    fn faulted(&self, key: &str) -> Option<ObjError> {
        let n = self.puts.fetch_add(1, Ordering::SeqCst);
        (n >= self.puts_allowed.load(Ordering::SeqCst)).then(|| ObjError::Unavailable {
            key: key.into(),
            reason: "injected outage".into(),
        })
    }
}

impl ObjectStore for Routed {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), ObjError> {
        if let Some(e) = self.faulted(key) {
            return Err(e);
        }
        match &self.ambiguous_puts {
            Some(hole) => hole.put(key, bytes),
            None => self.real.put(key, bytes),
        }
    }
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, ObjError> {
        if let Some(e) = self.faulted(key) {
            return Err(e);
        }
        match &self.ambiguous_puts {
            Some(hole) => hole.put_if_absent(key, bytes),
            None => self.real.put_if_absent(key, bytes),
        }
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
        if self.deletes_down.load(Ordering::SeqCst) {
            return Err(ObjError::Unavailable {
                key: key.into(),
                reason: "injected outage".into(),
            });
        }
        self.real.delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, ObjError> {
        self.real.list(prefix)
    }
    fn provider_name(&self) -> &'static str {
        "s3"
    }
}

fn client(dir: &std::path::Path, objects: Arc<Routed>) -> Client {
    let c = Client::open_with(
        dir.join("store"),
        ClientOptions {
            block_size: 1024,
            objects: Some(objects),
            ..Default::default()
        },
    )
    .unwrap();
    c.create_workbench("wb").unwrap();
    c
}

/// Block objects in the bucket (the provider's conditional-put probe and the namespace marker
/// excluded).
fn bucket_listing(s3: &dyn ObjectStore) -> BTreeSet<String> {
    s3.list("")
        .unwrap()
        .into_iter()
        .filter(|k| k != "nokv/namespace.json" && !k.starts_with("nokv/probe/"))
        .collect()
}

#[test]
fn s3_outage_after_k_of_n_blocks_leaves_the_bucket_equal_to_the_ledger_until_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let routed = Arc::new(Routed::new(s3_support::fresh("ledger", "p"), None));
    let c = client(dir.path(), routed.clone());
    routed.puts.store(0, Ordering::SeqCst);
    routed.puts_allowed.store(2, Ordering::SeqCst);
    routed.deletes_down.store(true, Ordering::SeqCst);
    let data = s3_support::bytes(5 * 1024, 3);
    let err = c
        .put(
            "wb",
            "outputs/x.bin",
            &data,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .unwrap_err();
    assert!(matches!(err, nokv::Error::ObjectUnavailable(_)), "{err:?}");
    assert!(c.stat("wb", "outputs/x.bin").is_err(), "nothing visible");
    let ops = ledger::list(c.meta()).unwrap();
    assert_eq!(ops.len(), 1);
    let rows = ledger::ledger(c.meta(), &ops[0].operation_id).unwrap();
    let uploaded: BTreeSet<String> = rows
        .iter()
        .filter(|(_, r)| r.provider_state == StagedProviderState::Uploaded)
        .map(|(_, r)| r.object_key.clone())
        .collect();
    assert_eq!(uploaded.len(), 2);
    assert_eq!(
        bucket_listing(&routed.real),
        uploaded,
        "bucket listing == ledger"
    );
    routed.puts_allowed.store(u64::MAX, Ordering::SeqCst);
    routed.deletes_down.store(false, Ordering::SeqCst);
    let summary = c.recover_operations().unwrap();
    assert_eq!(summary.cleaned, 1, "{summary:?}");
    assert!(bucket_listing(&routed.real).is_empty());
    // The store still publishes normally afterwards.
    c.put(
        "wb",
        "outputs/x.bin",
        &data,
        &PutOptions::create("application/octet-stream", "t"),
    )
    .unwrap();
    assert_eq!(c.read_all("wb", "outputs/x.bin").unwrap(), data);
}

#[test]
fn an_ambiguous_s3_upload_is_quarantined_and_reconciled_by_a_later_pass() {
    s3_support::endpoint();
    let mut hole = S3Config::new("bucket-hole", "p");
    hole.endpoint = Some(s3_support::black_hole(Duration::from_secs(20)));
    hole.path_style = true;
    hole.conditional_put = ConditionalPut::IfNoneMatch;
    hole.attempt_timeout = Duration::from_millis(300);
    hole.connect_timeout = Duration::from_millis(300);
    hole.retry = RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
    };
    let dir = tempfile::tempdir().unwrap();
    let routed = Arc::new(Routed::new(
        s3_support::fresh("quarantine", "p"),
        Some(S3::open(hole).unwrap()),
    ));
    let c = client(dir.path(), routed.clone());
    let err = c
        .put(
            "wb",
            "outputs/q.bin",
            b"payload",
            &PutOptions::create("text/plain", "t"),
        )
        .unwrap_err();
    assert!(matches!(err, nokv::Error::ObjectUnavailable(_)), "{err:?}");
    let ops = ledger::list(c.meta()).unwrap();
    let op = &ops[0].operation;
    assert_eq!(op.phase, PublishPhase::Quarantined);
    assert!(
        op.quarantine_evidence
            .as_deref()
            .is_some_and(|e| e.contains("ambiguous upload")),
        "{op:?}"
    );
    let rows = ledger::ledger(c.meta(), &ops[0].operation_id).unwrap();
    assert_eq!(rows[0].1.provider_state, StagedProviderState::Ambiguous);
    // The key stays owned until a later pass confirms it absent.
    assert_eq!(c.ledger_owned_keys().unwrap().len(), 1);
    let summary = c.recover_operations().unwrap();
    assert_eq!(summary.reconciled, 1, "{summary:?}");
    assert_eq!(
        ledger::get(c.meta(), &ops[0].operation_id)
            .unwrap()
            .unwrap()
            .phase,
        PublishPhase::Cleaned
    );
    assert!(c.ledger_owned_keys().unwrap().is_empty());
}
