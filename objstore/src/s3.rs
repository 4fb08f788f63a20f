//! `S3`: an [`ObjectStore`] over any S3-compatible service (aws-sdk-s3).
//!
//! # Addressing
//!
//! Object key `k` is stored as `{prefix}/{k}` in `bucket` (just `k` when the prefix is empty).
//! The endpoint is AWS's regional endpoint unless [`S3Config::endpoint`] names another one
//! (MinIO, Ceph, s3s-fs, ...); [`S3Config::path_style`] selects `https://host/bucket/key`
//! addressing instead of virtual-hosted `https://bucket.host/key`. Credentials and, when not
//! configured, the region come from the standard AWS chain (environment variables
//! `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` / `AWS_REGION`, the shared
//! `~/.aws/config` and `~/.aws/credentials` profile selected by `AWS_PROFILE`, `credential_process`,
//! web identity, container and instance metadata). Credentials are never stored by NoKV.
//!
//! # Sync over async
//!
//! [`ObjectStore`] is synchronous. Each `S3` owns a small multi-thread tokio runtime (2 worker
//! threads) and blocks on it. When a method is called from a thread that is itself inside a
//! tokio runtime, the request is driven on a short-lived scoped helper thread instead, so
//! runtimes are never nested (nesting would panic).
//!
//! # Writes
//!
//! - Bodies up to [`S3Config::multipart_threshold`] (default 8 MiB) are one `PutObject`; larger
//!   bodies use a multipart upload in [`S3Config::part_size`] parts, aborted on any failure so no
//!   orphaned parts are left behind by a failed call. A process killed mid-upload cannot abort:
//!   [`ObjectStore::put_if_absent_observed`] hands the upload id to an [`UploadObserver`] before
//!   the first part (the publish ledger records it), and [`ObjectStore::abort_upload`] lets
//!   recovery abort it later; [`ObjectStore::list_uploads`] lists what is still open.
//! - DELETE and AbortMultipartUpload are writes: sent without an answer after every retry, they
//!   fail with [`Error::Ambiguous`] (the object may or may not be gone).
//! - `put_if_absent` creates with `If-None-Match: *` (on `PutObject`, or on
//!   `CompleteMultipartUpload`); HTTP 412 means [`PutOutcome::AlreadyExists`]. Services that
//!   ignore the header are detected ([`ConditionalPut::Auto`] probes once with a dedicated key,
//!   `nokv/probe/if-none-match`) and fall back to HEAD-then-PUT. **That fallback races**: two
//!   concurrent creators can both see "absent" and both write (the last write wins and both
//!   report `Created`). NoKV tolerates it because block keys are revision-owned and written by
//!   exactly one publisher whose ledger row owns the key before the first byte is sent
//!   (docs/metadata-format.md, StagedObject); the CAS only guards replays.
//!
//! # Failures
//!
//! Throttling (429, `SlowDown`, 503), other 5xx, timeouts and connection failures are retried
//! with exponential backoff and full jitter ([`RetryPolicy`]); other 4xx answers are
//! [`Error::Refused`]. A write whose request was sent but whose answer never arrived (attempt
//! timeout, connection reset, unreadable response, or a 5xx that may have been applied) is
//! retried too when the retry cannot change the meaning (`put` overwrites with the same bytes);
//! when the retries run out, or a create-only retry finds the object that the lost attempt may
//! have written, the call fails with [`Error::Ambiguous`] — recorded, never guessed. Decide it
//! with [`S3::resolve_ambiguous`] / [`crate::resolve_ambiguous`] (HEAD + SHA-256).
//! Connection failures that provably happened before the request left (connection refused,
//! connect timeout) are plain [`Error::Unavailable`].

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};

use crate::error::Error;
use crate::keys::{list_dir_part, validate_key, MAX_KEY_LEN};
use crate::retry::RetryPolicy;
use crate::store::{ObjectMeta, ObjectStore, OpenUpload, PutOutcome, Resolution, UploadObserver};

/// Default size above which a body is uploaded with multipart upload: 8 MiB.
pub const DEFAULT_MULTIPART_THRESHOLD: u64 = 8 * 1024 * 1024;
/// Default multipart part size: 8 MiB (S3 requires at least 5 MiB for every part but the last).
pub const DEFAULT_PART_SIZE: u64 = 8 * 1024 * 1024;
/// Smallest part size S3 accepts for parts other than the last: 5 MiB.
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// Region used when neither the configuration nor the AWS environment names one.
pub const FALLBACK_REGION: &str = "us-east-1";
/// Key (below the prefix) that [`ConditionalPut::Auto`] uses to detect `If-None-Match` support.
pub const PROBE_KEY: &str = "nokv/probe/if-none-match";

const PROBE_BODY: &[u8] = b"nokv conditional-create probe\n";

/// How `put_if_absent` makes creation conditional.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConditionalPut {
    /// Probe once per provider instance (two `If-None-Match: *` PUTs of [`PROBE_KEY`]): when the
    /// second answers 412 the header is honoured, otherwise fall back to HEAD-then-PUT.
    #[default]
    Auto,
    /// Always send `If-None-Match: *` (AWS S3 since 2024, MinIO, s3s-fs, ...).
    IfNoneMatch,
    /// HEAD, then PUT when absent. Racy (see the module docs); for services that ignore the
    /// header.
    HeadThenPut,
}

/// Configuration of an [`S3`] provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Config {
    /// Bucket name (3..=63 characters of `a-z 0-9 . -`, starting and ending alphanumeric).
    pub bucket: String,
    /// Key prefix inside the bucket, without leading or trailing `/` (`""` = bucket root).
    /// Characters `A-Z a-z 0-9 / _ . -`; no empty, `.` or `..` segment.
    pub prefix: String,
    /// Endpoint URL (`http://127.0.0.1:9000`); `None` = AWS's endpoint for the region.
    pub endpoint: Option<String>,
    /// Region; `None` = from the AWS environment/profile, else [`FALLBACK_REGION`].
    pub region: Option<String>,
    /// Path-style addressing (`host/bucket/key`) instead of virtual-hosted (`bucket.host/key`).
    pub path_style: bool,
    /// Bodies larger than this many bytes use multipart upload. Default 8 MiB.
    pub multipart_threshold: u64,
    /// Multipart part size in bytes (at least 5 MiB). Default 8 MiB.
    pub part_size: u64,
    /// Conditional-create strategy of `put_if_absent`.
    pub conditional_put: ConditionalPut,
    /// Retry policy of every request.
    pub retry: RetryPolicy,
    /// Deadline of one request attempt (connect + send + receive). Default 120 s.
    pub attempt_timeout: Duration,
    /// TCP/TLS connect deadline. Default 5 s.
    pub connect_timeout: Duration,
    /// `max-keys` of one ListObjectsV2 page (1..=1000). Default 1000.
    pub list_page_size: i32,
}

impl S3Config {
    /// A configuration for `bucket` / `prefix` with every other field at its default.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: prefix.into(),
            endpoint: None,
            region: None,
            path_style: false,
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            part_size: DEFAULT_PART_SIZE,
            conditional_put: ConditionalPut::Auto,
            retry: RetryPolicy::default(),
            attempt_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(5),
            list_page_size: 1000,
        }
    }

    /// Parses `s3://bucket` or `s3://bucket/prefix/path` (a trailing `/` is dropped) into a
    /// default configuration.
    ///
    /// Errors: [`Error::InvalidConfig`] for another scheme, an empty bucket, or a bucket/prefix
    /// that fails [`S3Config::validate`].
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| Error::InvalidConfig {
                reason: format!("{url:?} is not an s3://bucket/prefix URL"),
            })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let config = Self::new(bucket, prefix.trim_end_matches('/'));
        config.validate()?;
        Ok(config)
    }

    /// The `s3://bucket/prefix` form of the configured namespace.
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }

    /// Checks the bucket name, prefix, endpoint, part size and list page size.
    ///
    /// Errors: [`Error::InvalidConfig`] naming the first problem.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        let b = self.bucket.as_bytes();
        let bucket_ok = (3..=63).contains(&b.len())
            && b.iter()
                .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-'))
            && b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric);
        if !bucket_ok {
            return bad(format!(
                "bucket {:?} is not a valid S3 bucket name (3-63 of a-z 0-9 . -)",
                self.bucket
            ));
        }
        if !self.prefix.is_empty() {
            let chars_ok = self
                .prefix
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'_' | b'.' | b'-'));
            let segments_ok = self
                .prefix
                .split('/')
                .all(|s| !s.is_empty() && s != "." && s != "..");
            if !chars_ok || !segments_ok || self.prefix.len() > 512 {
                return bad(format!(
                    "key prefix {:?} must be segments of A-Z a-z 0-9 _ . - joined by '/', without leading/trailing '/', at most 512 bytes",
                    self.prefix
                ));
            }
        }
        if let Some(ep) = &self.endpoint {
            if !(ep.starts_with("http://") || ep.starts_with("https://")) || ep.len() < 10 {
                return bad(format!(
                    "endpoint {ep:?} must be an http:// or https:// URL"
                ));
            }
        }
        if let Some(r) = &self.region {
            if r.is_empty() || !r.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
                return bad(format!("region {r:?} is not a region name"));
            }
        }
        if self.part_size < MIN_PART_SIZE {
            return bad(format!(
                "part size {} is below the S3 minimum of 5 MiB",
                self.part_size
            ));
        }
        if !(1..=1000).contains(&self.list_page_size) {
            return bad("list page size must be 1..=1000".into());
        }
        if self.retry.max_attempts == 0 {
            return bad("retry.max_attempts must be at least 1".into());
        }
        Ok(())
    }

    /// The full bucket key of object key `key` (`{prefix}/{key}`).
    fn full_key(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.prefix)
        }
    }

    /// The bucket-key prefix every object of this provider starts with (`""` or `prefix/`).
    fn key_base(&self) -> String {
        if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        }
    }
}

/// Counters of one [`S3`] provider (since it was opened).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Stats {
    /// HTTP requests attempted (each retry counts).
    pub requests: u64,
    /// Attempts repeated after a transient or ambiguous failure.
    pub retries: u64,
    /// Multipart uploads started.
    pub multipart_uploads: u64,
    /// Calls that ended in [`Error::Ambiguous`].
    pub ambiguous: u64,
    /// `Some(true)` once `If-None-Match` is known to be honoured, `Some(false)` when the
    /// HEAD-then-PUT fallback is in use, `None` before the first conditional create (Auto).
    pub conditional_header: Option<bool>,
}

/// An [`ObjectStore`] over an S3-compatible bucket (see the module docs).
pub struct S3 {
    /// `Some` until drop; dropped with `shutdown_background` so dropping never blocks.
    runtime: Option<tokio::runtime::Runtime>,
    client: aws_sdk_s3::Client,
    config: S3Config,
    conditional: Mutex<Option<bool>>,
    requests: AtomicU64,
    retries: AtomicU64,
    multipart_uploads: AtomicU64,
    ambiguous: AtomicU64,
}

impl std::fmt::Debug for S3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3")
            .field("bucket", &self.config.bucket)
            .field("prefix", &self.config.prefix)
            .field("endpoint", &self.config.endpoint)
            .finish_non_exhaustive()
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Why one attempt failed.
enum Failure {
    /// Worth repeating. `maybe_applied`: a write may have taken effect (the request was sent).
    Transient { reason: String, maybe_applied: bool },
    /// Final answer for this call.
    Permanent(Error),
}

/// What the service said, reduced to what the retry loop and callers need.
struct Answer {
    status: Option<u16>,
    code: Option<String>,
    message: String,
}

impl S3 {
    /// Builds the provider: validates `config`, starts the runtime and loads the AWS
    /// configuration chain (no request is sent; credentials are resolved on first use).
    ///
    /// Errors: [`Error::InvalidConfig`] for a bad configuration; [`Error::Io`] when the runtime
    /// cannot start.
    pub fn open(config: S3Config) -> Result<S3, Error> {
        config.validate()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("nokv-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::io("start_runtime", "", e))?;
        let region = config.region.clone();
        let load = async move {
            let mut loader = aws_config::defaults(BehaviorVersion::latest());
            if let Some(r) = region {
                loader = loader.region(Region::new(r));
            }
            loader.load().await
        };
        let sdk = if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| s.spawn(|| runtime.block_on(load)).join()).map_err(|_| {
                Error::InvalidConfig {
                    reason: "loading the AWS configuration panicked".into(),
                }
            })?
        } else {
            runtime.block_on(load)
        };
        let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
            .connect_timeout(config.connect_timeout)
            .operation_attempt_timeout(config.attempt_timeout)
            .build();
        let mut builder = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(config.path_style)
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
            .timeout_config(timeouts)
            // Integrity is NoKV's own SHA-256 per block (checked on every read); optional CRC
            // trailers are left off for compatibility with S3-compatible services.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        if sdk.region().is_none() {
            builder = builder.region(Region::new(FALLBACK_REGION));
        }
        if let Some(ep) = &config.endpoint {
            builder = builder.endpoint_url(ep.clone());
        }
        let client = aws_sdk_s3::Client::from_conf(builder.build());
        let conditional = match config.conditional_put {
            ConditionalPut::Auto => None,
            ConditionalPut::IfNoneMatch => Some(true),
            ConditionalPut::HeadThenPut => Some(false),
        };
        Ok(S3 {
            runtime: Some(runtime),
            client,
            config,
            conditional: Mutex::new(conditional),
            requests: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            multipart_uploads: AtomicU64::new(0),
            ambiguous: AtomicU64::new(0),
        })
    }

    /// The configuration this provider was opened with.
    pub fn config(&self) -> &S3Config {
        &self.config
    }

    /// Counters since open.
    pub fn stats(&self) -> S3Stats {
        S3Stats {
            requests: self.requests.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            multipart_uploads: self.multipart_uploads.load(Ordering::Relaxed),
            ambiguous: self.ambiguous.load(Ordering::Relaxed),
            conditional_header: *self.conditional_lock(),
        }
    }

    /// Creates the bucket when it does not exist yet (idempotent: a bucket already owned by
    /// the caller is fine). Meant for tests and local S3-compatible servers; production
    /// buckets are provisioned by their operators.
    ///
    /// Errors: [`Error::Refused`] (e.g. the name is taken by someone else), [`Error::Unavailable`].
    pub fn create_bucket(&self) -> Result<(), Error> {
        let bucket = self.config.bucket.clone();
        let outcome = self.call("create_bucket", &bucket, false, |s| {
            let bucket = bucket.clone();
            async move {
                match s.client.create_bucket().bucket(&bucket).send().await {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        let answer = answer_of(&e);
                        match answer.code.as_deref() {
                            Some("BucketAlreadyOwnedByYou") | Some("BucketAlreadyExists")
                                if answer.status == Some(409) =>
                            {
                                Ok(())
                            }
                            _ => Err(classify(&e, answer, "create_bucket", &bucket, false)),
                        }
                    }
                }
            }
        });
        outcome.map(|_| ())
    }

    /// Decides an [`Error::Ambiguous`] write by HEAD + SHA-256 (see [`crate::resolve_ambiguous`]).
    pub fn resolve_ambiguous(
        &self,
        key: &str,
        expected_len: u64,
        expected_digest_uri: &str,
    ) -> Result<Resolution, Error> {
        crate::store::resolve_ambiguous(self, key, expected_len, expected_digest_uri)
    }

    fn conditional_lock(&self) -> std::sync::MutexGuard<'_, Option<bool>> {
        // The guarded value is a plain cache of a probe result; a poisoned lock is still valid.
        self.conditional.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `fut` to completion on the provider's runtime without nesting runtimes.
    fn block_on<F>(&self, fut: F) -> Result<F::Output, Error>
    where
        F: Future + Send,
        F::Output: Send,
    {
        let rt = self.runtime.as_ref().ok_or_else(|| Error::Unavailable {
            key: String::new(),
            reason: "the S3 provider is shutting down".into(),
        })?;
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| s.spawn(|| rt.block_on(fut)).join()).map_err(|_| {
                Error::Unavailable {
                    key: String::new(),
                    reason: "an S3 request worker panicked".into(),
                }
            })
        } else {
            Ok(rt.block_on(fut))
        }
    }

    /// Runs one logical call with bounded retries. Returns the value and whether an earlier
    /// failed attempt of this call may have been applied (a sent write without an answer).
    fn call<'a, T, F, Fut>(
        &'a self,
        op: &'static str,
        key: &str,
        write: bool,
        attempt: F,
    ) -> Result<(T, bool), Error>
    where
        T: Send,
        F: Fn(&'a S3) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, Failure>> + Send,
    {
        let fut = async {
            let policy = self.config.retry;
            let mut maybe_applied = false;
            let mut last_reason = String::new();
            for n in 0..policy.max_attempts {
                if n > 0 {
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(policy.jittered_backoff(n - 1)).await;
                }
                self.requests.fetch_add(1, Ordering::Relaxed);
                match attempt(self).await {
                    Ok(v) => return Ok((v, maybe_applied)),
                    Err(Failure::Permanent(e)) => return Err(e),
                    Err(Failure::Transient {
                        reason,
                        maybe_applied: m,
                    }) => {
                        maybe_applied |= m;
                        last_reason = reason;
                    }
                }
            }
            let reason = format!(
                "{} attempts failed; last: {last_reason}",
                policy.max_attempts
            );
            if write && maybe_applied {
                Err(Error::Ambiguous {
                    op,
                    key: key.to_owned(),
                    reason,
                })
            } else {
                Err(Error::Unavailable {
                    key: key.to_owned(),
                    reason,
                })
            }
        };
        let result = self.block_on(fut)?;
        if matches!(result, Err(Error::Ambiguous { .. })) {
            self.ambiguous.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Validates `key` and returns its bucket key.
    fn bucket_key(&self, key: &str) -> Result<String, Error> {
        validate_key(key)?;
        let full = self.config.full_key(key);
        if full.len() > MAX_KEY_LEN {
            return Err(Error::InvalidKey {
                key: key.to_owned(),
                reason: "key plus the S3 prefix is longer than 1024 bytes",
            });
        }
        Ok(full)
    }

    /// One PutObject attempt; `if_none_match` adds `If-None-Match: *`. Ok(false) = 412.
    async fn put_once(
        &self,
        key: &str,
        full: &str,
        bytes: &[u8],
        if_none_match: bool,
    ) -> Result<bool, Failure> {
        let mut req = self
            .client
            .put_object()
            .bucket(&self.config.bucket)
            .key(full)
            .content_length(len_i64(bytes.len()))
            .body(ByteStream::from(bytes.to_vec()));
        if if_none_match {
            req = req.if_none_match("*");
        }
        match req.send().await {
            Ok(_) => Ok(true),
            Err(e) => {
                let answer = answer_of(&e);
                if if_none_match && answer.status == Some(412) {
                    return Ok(false);
                }
                Err(classify(&e, answer, "put", key, true))
            }
        }
    }

    /// Uploads `bytes` to `key` (single PUT or multipart). `create_only`: conditional on
    /// absence via `If-None-Match: *`. Returns `Created` or, only when `create_only`,
    /// `AlreadyExists`.
    fn upload(
        &self,
        key: &str,
        bytes: &[u8],
        create_only: bool,
        observer: Option<&mut dyn UploadObserver>,
    ) -> Result<PutOutcome, Error> {
        let full = self.bucket_key(key)?;
        let op = if create_only { "put_if_absent" } else { "put" };
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        let (created, maybe_applied) = if size > self.config.multipart_threshold {
            self.multipart(key, &full, bytes, create_only, observer)?
        } else {
            self.call(op, key, true, |s| {
                let full = full.clone();
                async move { s.put_once(key, &full, bytes, create_only).await }
            })?
        };
        match (created, maybe_applied) {
            (true, _) => Ok(PutOutcome::Created),
            // 412 after an attempt that may have landed: the object may be our own write.
            (false, true) => {
                self.ambiguous.fetch_add(1, Ordering::Relaxed);
                Err(Error::Ambiguous {
                    op,
                    key: key.to_owned(),
                    reason: "a retried create-only write found an object that an earlier, unanswered attempt may have written".into(),
                })
            }
            (false, false) => Ok(PutOutcome::AlreadyExists),
        }
    }

    /// Multipart upload of `bytes`; aborts the upload on any failure. `observer` learns the
    /// upload id before the first part and each acknowledged part. Returns (created,
    /// maybe_applied) like [`S3::call`].
    fn multipart(
        &self,
        key: &str,
        full: &str,
        bytes: &[u8],
        create_only: bool,
        mut observer: Option<&mut dyn UploadObserver>,
    ) -> Result<(bool, bool), Error> {
        self.multipart_uploads.fetch_add(1, Ordering::Relaxed);
        let bucket = self.config.bucket.clone();
        let (upload_id, _) = self.call("create_multipart_upload", key, false, |s| {
            let bucket = bucket.clone();
            async move {
                match s
                    .client
                    .create_multipart_upload()
                    .bucket(&bucket)
                    .key(full)
                    .send()
                    .await
                {
                    Ok(out) => out
                        .upload_id()
                        .map(str::to_owned)
                        .ok_or(Failure::Transient {
                            reason: "CreateMultipartUpload returned no upload id".into(),
                            maybe_applied: false,
                        }),
                    Err(e) => Err(classify(
                        &e,
                        answer_of(&e),
                        "create_multipart_upload",
                        key,
                        false,
                    )),
                }
            }
        })?;
        let result = match observer
            .as_deref_mut()
            .map(|o| o.upload_started(&upload_id))
        {
            Some(Err(e)) => Err(e),
            _ => self.multipart_parts_and_complete(
                key,
                full,
                bytes,
                create_only,
                &upload_id,
                observer,
            ),
        };
        let completed = matches!(result, Ok((true, _)));
        if !completed {
            // Best effort: a failed call never leaves parts behind (an upload that did complete
            // answers NoSuchUpload, which is ignored).
            let bucket = bucket.clone();
            let upload_id = upload_id.clone();
            let _ = self.call("abort_multipart_upload", key, false, |s| {
                let bucket = bucket.clone();
                let upload_id = upload_id.clone();
                async move {
                    match s
                        .client
                        .abort_multipart_upload()
                        .bucket(&bucket)
                        .key(full)
                        .upload_id(&upload_id)
                        .send()
                        .await
                    {
                        Ok(_) => Ok(()),
                        Err(e) => {
                            absent_or_failure::<(), _>(&e, "abort_multipart_upload", key, false)
                                .map(|_| ())
                        }
                    }
                }
            });
        }
        result
    }

    fn multipart_parts_and_complete(
        &self,
        key: &str,
        full: &str,
        bytes: &[u8],
        create_only: bool,
        upload_id: &str,
        mut observer: Option<&mut dyn UploadObserver>,
    ) -> Result<(bool, bool), Error> {
        let bucket = self.config.bucket.clone();
        let part_size = usize::try_from(self.config.part_size).unwrap_or(usize::MAX);
        let mut parts = Vec::new();
        for (i, chunk) in bytes.chunks(part_size).enumerate() {
            let number = i32::try_from(i + 1).map_err(|_| Error::InvalidConfig {
                reason: "too many multipart parts".into(),
            })?;
            let (etag, _) = self.call("upload_part", key, false, |s| {
                let bucket = bucket.clone();
                async move {
                    match s
                        .client
                        .upload_part()
                        .bucket(&bucket)
                        .key(full)
                        .upload_id(upload_id)
                        .part_number(number)
                        .content_length(len_i64(chunk.len()))
                        .body(ByteStream::from(chunk.to_vec()))
                        .send()
                        .await
                    {
                        Ok(out) => Ok(out.e_tag().map(str::to_owned)),
                        Err(e) => Err(classify(&e, answer_of(&e), "upload_part", key, false)),
                    }
                }
            })?;
            parts.push(
                CompletedPart::builder()
                    .part_number(number)
                    .set_e_tag(etag)
                    .build(),
            );
            if let Some(o) = observer.as_deref_mut() {
                o.part_sent(u32::try_from(number).unwrap_or(u32::MAX));
            }
        }
        let uses_header = create_only && self.conditional_header()?;
        if create_only && !uses_header && self.head(key)?.is_some() {
            return Ok((false, false));
        }
        let done = CompletedMultipartUpload::builder()
            .set_parts(Some(parts))
            .build();
        let op = if create_only { "put_if_absent" } else { "put" };
        self.call(op, key, true, |s| {
            let bucket = bucket.clone();
            let done = done.clone();
            async move {
                let mut req = s
                    .client
                    .complete_multipart_upload()
                    .bucket(&bucket)
                    .key(full)
                    .upload_id(upload_id)
                    .multipart_upload(done);
                if uses_header {
                    req = req.if_none_match("*");
                }
                match req.send().await {
                    Ok(_) => Ok(true),
                    Err(e) => {
                        let answer = answer_of(&e);
                        if uses_header && answer.status == Some(412) {
                            return Ok(false);
                        }
                        // A retried Complete of an upload that already completed.
                        if answer.code.as_deref() == Some("NoSuchUpload") {
                            return Err(Failure::Permanent(Error::Ambiguous {
                                op,
                                key: key.to_owned(),
                                reason: "the multipart upload vanished during completion".into(),
                            }));
                        }
                        Err(classify(&e, answer, op, key, true))
                    }
                }
            }
        })
    }

    /// `put_if_absent`, reporting a multipart upload to `observer`.
    fn create_only(
        &self,
        key: &str,
        bytes: &[u8],
        observer: Option<&mut dyn UploadObserver>,
    ) -> Result<PutOutcome, Error> {
        validate_key(key)?;
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        // Multipart decides on the header itself (at completion time).
        if size <= self.config.multipart_threshold && !self.conditional_header()? {
            if self.head(key)?.is_some() {
                return Ok(PutOutcome::AlreadyExists);
            }
            return self.upload(key, bytes, false, observer);
        }
        self.upload(key, bytes, true, observer)
    }

    /// Whether `If-None-Match: *` is honoured (probing once under [`ConditionalPut::Auto`]).
    fn conditional_header(&self) -> Result<bool, Error> {
        if let Some(known) = *self.conditional_lock() {
            return Ok(known);
        }
        let full = self.bucket_key(PROBE_KEY)?;
        // Some(true): created; Some(false): 412; None: the service rejects the header.
        let probe = || {
            self.call("put_if_absent", PROBE_KEY, true, |s| {
                let full = full.clone();
                async move {
                    match s.put_once(PROBE_KEY, &full, PROBE_BODY, true).await {
                        Ok(created) => Ok(Some(created)),
                        Err(Failure::Permanent(Error::Refused {
                            status: Some(400 | 501),
                            ..
                        })) => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
        };
        let honoured = match probe()?.0 {
            None => false,
            // 412 straight away: the probe existed and the header was honoured.
            Some(false) => true,
            // The first PUT created the probe: a second one must be refused with 412.
            Some(true) => matches!(probe()?.0, Some(false)),
        };
        *self.conditional_lock() = Some(honoured);
        Ok(honoured)
    }
}

impl ObjectStore for S3 {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        self.upload(key, bytes, false, None).map(|_| ())
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error> {
        self.create_only(key, bytes, None)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>, Error> {
        let full = self.bucket_key(key)?;
        let (bytes, _) = self.call("get", key, false, |s| {
            let full = full.clone();
            async move { s.get_once(key, &full, None).await.map(|(b, _)| b) }
        })?;
        Ok(bytes)
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        let full = self.bucket_key(key)?;
        let out_of_bounds = |size| Error::RangeOutOfBounds {
            key: key.to_owned(),
            offset,
            len,
            size,
        };
        let Some(end) = offset.checked_add(len) else {
            let size = self.head(key)?.map(|m| m.size).ok_or(Error::NotFound {
                key: key.to_owned(),
            })?;
            return Err(out_of_bounds(size));
        };
        if len == 0 {
            let size = self.head(key)?.map(|m| m.size).ok_or(Error::NotFound {
                key: key.to_owned(),
            })?;
            return if offset <= size {
                Ok(Vec::new())
            } else {
                Err(out_of_bounds(size))
            };
        }
        let range = format!("bytes={offset}-{}", end - 1);
        let got = self.call("get_range", key, false, |s| {
            let full = full.clone();
            let range = range.clone();
            async move { s.get_once(key, &full, Some(range)).await }
        });
        match got {
            Ok(((bytes, total), _)) => {
                if u64::try_from(bytes.len()).ok() == Some(len) {
                    Ok(bytes)
                } else {
                    // The service clipped the range at end-of-object.
                    let size = match total {
                        Some(t) => t,
                        None => self.head(key)?.map_or(0, |m| m.size),
                    };
                    Err(out_of_bounds(size))
                }
            }
            Err(Error::Refused {
                status: Some(416), ..
            }) => {
                let size = self.head(key)?.map(|m| m.size).ok_or(Error::NotFound {
                    key: key.to_owned(),
                })?;
                Err(out_of_bounds(size))
            }
            Err(e) => Err(e),
        }
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Error> {
        let full = self.bucket_key(key)?;
        let bucket = self.config.bucket.clone();
        let (meta, _) = self.call("head", key, false, |s| {
            let full = full.clone();
            let bucket = bucket.clone();
            async move {
                match s
                    .client
                    .head_object()
                    .bucket(&bucket)
                    .key(&full)
                    .send()
                    .await
                {
                    Ok(out) => Ok(Some(ObjectMeta::new(
                        u64::try_from(out.content_length().unwrap_or(0)).unwrap_or(0),
                    ))),
                    Err(e) => absent_or_failure(&e, "head", key, false),
                }
            }
        })?;
        Ok(meta)
    }

    fn delete(&self, key: &str) -> Result<(), Error> {
        let full = self.bucket_key(key)?;
        let bucket = self.config.bucket.clone();
        // A DELETE sent without an answer may have been applied: `write = true` makes the
        // exhausted retries an `Ambiguous` outcome (never guessed; GC quarantines it).
        self.call("delete", key, true, |s| {
            let full = full.clone();
            let bucket = bucket.clone();
            async move {
                match s
                    .client
                    .delete_object()
                    .bucket(&bucket)
                    .key(&full)
                    .send()
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) => absent_or_failure::<(), _>(&e, "delete", key, true).map(|_| ()),
                }
            }
        })
        .map(|_| ())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        if list_dir_part(prefix)?.is_none() {
            return Ok(Vec::new());
        }
        let base = self.config.key_base();
        let full_prefix = format!("{base}{prefix}");
        let bucket = self.config.bucket.clone();
        let page_size = self.config.list_page_size;
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let (page, _) = self.call("list", prefix, false, |s| {
                let bucket = bucket.clone();
                let full_prefix = full_prefix.clone();
                let token = token.clone();
                async move {
                    let mut req = s
                        .client
                        .list_objects_v2()
                        .bucket(&bucket)
                        .max_keys(page_size);
                    if !full_prefix.is_empty() {
                        req = req.prefix(&full_prefix);
                    }
                    if let Some(t) = token {
                        req = req.continuation_token(t);
                    }
                    match req.send().await {
                        Ok(out) => {
                            let names: Vec<String> = out
                                .contents()
                                .iter()
                                .filter_map(|o| o.key().map(str::to_owned))
                                .collect();
                            let next = if out.is_truncated() == Some(true) {
                                out.next_continuation_token().map(str::to_owned)
                            } else {
                                None
                            };
                            Ok((names, next))
                        }
                        Err(e) => Err(classify(&e, answer_of(&e), "list", prefix, false)),
                    }
                }
            })?;
            let (names, next) = page;
            for name in names {
                if let Some(key) = name.strip_prefix(&base) {
                    // Foreign objects in the bucket are never objects of this provider.
                    if key.starts_with(prefix) && validate_key(key).is_ok() {
                        keys.push(key.to_owned());
                    }
                }
            }
            match next {
                Some(t) if Some(&t) != token.as_ref() => token = Some(t),
                _ => break,
            }
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    fn provider_name(&self) -> &'static str {
        "s3"
    }

    fn put_if_absent_observed(
        &self,
        key: &str,
        bytes: &[u8],
        observer: &mut dyn UploadObserver,
    ) -> Result<PutOutcome, Error> {
        self.create_only(key, bytes, Some(observer))
    }

    fn abort_upload(&self, key: &str, upload_id: &str) -> Result<(), Error> {
        let full = self.bucket_key(key)?;
        let bucket = self.config.bucket.clone();
        // An abort sent without an answer may have been applied: ambiguous, like a DELETE.
        self.call("abort_multipart_upload", key, true, |s| {
            let full = full.clone();
            let bucket = bucket.clone();
            async move {
                match s
                    .client
                    .abort_multipart_upload()
                    .bucket(&bucket)
                    .key(&full)
                    .upload_id(upload_id)
                    .send()
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) => absent_or_failure::<(), _>(&e, "abort_multipart_upload", key, true)
                        .map(|_| ()),
                }
            }
        })
        .map(|_| ())
    }

    fn list_uploads(&self, prefix: &str) -> Result<Vec<OpenUpload>, Error> {
        if list_dir_part(prefix)?.is_none() {
            return Ok(Vec::new());
        }
        let base = self.config.key_base();
        let full_prefix = format!("{base}{prefix}");
        let bucket = self.config.bucket.clone();
        let mut out = Vec::new();
        let mut markers: (Option<String>, Option<String>) = (None, None);
        loop {
            let (page, _) = self.call("list_multipart_uploads", prefix, false, |s| {
                let bucket = bucket.clone();
                let full_prefix = full_prefix.clone();
                let (key_marker, id_marker) = markers.clone();
                async move {
                    let mut req = s.client.list_multipart_uploads().bucket(&bucket);
                    if !full_prefix.is_empty() {
                        req = req.prefix(&full_prefix);
                    }
                    if let Some(k) = key_marker {
                        req = req.key_marker(k);
                    }
                    if let Some(u) = id_marker {
                        req = req.upload_id_marker(u);
                    }
                    match req.send().await {
                        Ok(o) => {
                            let uploads: Vec<(String, String)> = o
                                .uploads()
                                .iter()
                                .filter_map(|u| {
                                    Some((u.key()?.to_owned(), u.upload_id()?.to_owned()))
                                })
                                .collect();
                            let next = if o.is_truncated() == Some(true) {
                                (
                                    o.next_key_marker().map(str::to_owned),
                                    o.next_upload_id_marker().map(str::to_owned),
                                )
                            } else {
                                (None, None)
                            };
                            Ok((uploads, next))
                        }
                        Err(e) => Err(classify(
                            &e,
                            answer_of(&e),
                            "list_multipart_uploads",
                            prefix,
                            false,
                        )),
                    }
                }
            })?;
            let (uploads, next) = page;
            for (name, upload_id) in uploads {
                if let Some(key) = name.strip_prefix(&base) {
                    if key.starts_with(prefix) {
                        out.push(OpenUpload {
                            key: key.to_owned(),
                            upload_id,
                        });
                    }
                }
            }
            match next {
                (None, None) => break,
                n if n == markers => break,
                n => markers = n,
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

impl S3 {
    /// One (ranged) GetObject attempt: the body and, for a ranged read, the object's total
    /// size from `Content-Range`.
    async fn get_once(
        &self,
        key: &str,
        full: &str,
        range: Option<String>,
    ) -> Result<(Vec<u8>, Option<u64>), Failure> {
        let ranged = range.is_some();
        let out = match self
            .client
            .get_object()
            .bucket(&self.config.bucket)
            .key(full)
            .set_range(range)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let answer = answer_of(&e);
                if answer.status == Some(404) || answer.code.as_deref() == Some("NoSuchKey") {
                    return Err(Failure::Permanent(Error::NotFound {
                        key: key.to_owned(),
                    }));
                }
                return Err(classify(&e, answer, "get", key, false));
            }
        };
        let total = if ranged {
            out.content_range()
                .and_then(|r| r.rsplit('/').next())
                .and_then(|t| t.parse::<u64>().ok())
        } else {
            None
        };
        let expected = usize::try_from(out.content_length().unwrap_or(0)).unwrap_or(0);
        let mut body = out.body;
        // One copy: chunks are appended straight into a buffer of the announced length.
        let mut bytes = Vec::with_capacity(expected.min(256 * 1024 * 1024));
        loop {
            match body.try_next().await {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => {
                    return Err(Failure::Transient {
                        reason: format!("reading the response body failed: {e}"),
                        maybe_applied: false,
                    })
                }
            }
        }
        Ok((bytes, total))
    }
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Status, error code and message of a failed request.
fn answer_of<E: ProvideErrorMetadata + std::error::Error + 'static>(
    err: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> Answer {
    let status = err.raw_response().map(|r| r.status().as_u16());
    let code = ProvideErrorMetadata::code(err).map(str::to_owned);
    let message = match ProvideErrorMetadata::message(err) {
        Some(m) => m.to_owned(),
        None => format!("{}", aws_sdk_s3::error::DisplayErrorContext(err)),
    };
    Answer {
        status,
        code,
        message,
    }
}

/// Did this dispatch failure happen before the request left the client (nothing was sent)?
/// Walks the error chain for a refused/unroutable connection or the connector's connect phase.
fn failed_before_send(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::HostUnreachable
                    | std::io::ErrorKind::NetworkUnreachable
            ) {
                return true;
            }
        }
        let text = e.to_string();
        if text.contains("(Connect)")
            || text.contains("connect timeout")
            || text.contains("dns error")
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// For a read-only or idempotent request on which "no such key / upload" means done (HEAD,
/// DELETE, multipart abort): a 404 answer is `Ok(None)`; any other failure is [`classify`]d
/// (`write`: the request changes state, so a sent-but-unanswered attempt may have applied).
fn absent_or_failure<T, E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    err: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    op: &'static str,
    key: &str,
    write: bool,
) -> Result<Option<T>, Failure> {
    let answer = answer_of(err);
    if answer.status == Some(404) {
        return Ok(None);
    }
    Err(classify(err, answer, op, key, write))
}

/// Maps a failed request to a retry decision. `write`: the request may change state, so a
/// sent-but-unanswered attempt may have been applied.
fn classify<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    err: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    answer: Answer,
    op: &'static str,
    key: &str,
    write: bool,
) -> Failure {
    let detail = format!("{}", aws_sdk_s3::error::DisplayErrorContext(err));
    match err {
        SdkError::ConstructionFailure(_) => Failure::Permanent(Error::Refused {
            op,
            key: key.to_owned(),
            status: None,
            reason: format!("request could not be built: {detail}"),
        }),
        SdkError::TimeoutError(_) => Failure::Transient {
            reason: format!("attempt timed out: {detail}"),
            maybe_applied: write,
        },
        SdkError::DispatchFailure(d) => {
            if d.is_user() {
                return Failure::Permanent(Error::Refused {
                    op,
                    key: key.to_owned(),
                    status: None,
                    reason: detail,
                });
            }
            let before = d
                .as_connector_error()
                .is_some_and(|c| failed_before_send(c));
            Failure::Transient {
                reason: format!("connection failed: {detail}"),
                maybe_applied: write && !before,
            }
        }
        SdkError::ResponseError(_) => Failure::Transient {
            reason: format!("unreadable response: {detail}"),
            maybe_applied: write,
        },
        _ => {
            let status = answer.status.unwrap_or(0);
            let code = answer.code.as_deref().unwrap_or("");
            let throttled = status == 429
                || status == 503
                || matches!(
                    code,
                    "SlowDown" | "Throttling" | "ThrottlingException" | "RequestLimitExceeded"
                );
            let reason = format!("HTTP {status} {code}: {}", answer.message);
            // 501 Not Implemented is the one 5xx that is permanent: the service lacks the
            // operation (it falls through to `Refused`).
            if throttled {
                // Throttling rejects the request before it is applied.
                Failure::Transient {
                    reason,
                    maybe_applied: false,
                }
            } else if (status >= 500 && status != 501)
                || matches!(
                    code,
                    "RequestTimeout"
                        | "InternalError"
                        | "OperationAborted"
                        | "ConditionalRequestConflict"
                )
                || status == 409 && code == "OperationAborted"
            {
                // A 5xx on a write is not proof that nothing was applied.
                Failure::Transient {
                    reason,
                    maybe_applied: write && status >= 500,
                }
            } else {
                Failure::Permanent(Error::Refused {
                    op,
                    key: key.to_owned(),
                    status: answer.status,
                    reason,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_url_splits_bucket_and_prefix() {
        let c = S3Config::from_url("s3://my-bucket/team/nokv/").expect("valid");
        assert_eq!(c.bucket, "my-bucket");
        assert_eq!(c.prefix, "team/nokv");
        assert_eq!(c.url(), "s3://my-bucket/team/nokv");
        assert_eq!(c.full_key("nokv/x"), "team/nokv/nokv/x");
        let root = S3Config::from_url("s3://bucket").expect("valid");
        assert_eq!(root.prefix, "");
        assert_eq!(root.full_key("a"), "a");
        assert_eq!(root.url(), "s3://bucket");
    }

    #[test]
    fn invalid_namespaces_are_refused_before_any_request() {
        for url in [
            "http://bucket/x",
            "s3://",
            "s3://ab",
            "s3://Upper",
            "s3://bucket//x",
            "s3://bucket/../x",
            "s3://bucket/a b",
            "s3://-bucket",
        ] {
            assert!(
                matches!(S3Config::from_url(url), Err(Error::InvalidConfig { .. })),
                "{url} accepted"
            );
        }
        let mut c = S3Config::new("bucket", "");
        c.part_size = 1024;
        assert!(matches!(c.validate(), Err(Error::InvalidConfig { .. })));
        let mut c = S3Config::new("bucket", "");
        c.endpoint = Some("localhost:9000".into());
        assert!(matches!(c.validate(), Err(Error::InvalidConfig { .. })));
    }

    #[test]
    fn refused_connection_is_not_a_sent_request() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(failed_before_send(&refused));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(!failed_before_send(&reset));
    }
}
