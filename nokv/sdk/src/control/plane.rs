//! [`ControlPlane`]: a connection to the control plane of one deployment, its key layout (see
//! the module docs of [`crate::control`]) and the etcd calls every record module makes through
//! it (retried reads, transactions, listings), with the errors they share. A leaf of
//! `control/`.

use std::time::Duration;

use meta::store::etcd::bridge::{self, classify, Backoff, Failure};
use meta::{LogicalShardId, RootId};

use crate::error::{Error, PlacementErrorKind, Result};

/// A refusal of the control plane: [`Error::Placement`] of `kind`.
pub fn refused(kind: PlacementErrorKind, reason: impl Into<String>) -> Error {
    Error::Placement {
        kind,
        reason: reason.into(),
    }
}

/// Longest a control-plane call retries transient etcd failures (no leader, member lost).
pub const RETRY_WINDOW: Duration = Duration::from_secs(20);
/// Deadline of one control-plane request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A key's value with the id of the lease it is bound to (0: none).
pub(crate) type ValueAndLease = (Vec<u8>, i64);

/// A connection to the control plane of one deployment (cheap to clone).
#[derive(Clone)]
pub struct ControlPlane {
    client: etcd_client::Client,
    endpoints: Vec<String>,
    namespace: String,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("endpoints", &self.endpoints)
            .field("namespace", &self.namespace)
            .finish()
    }
}

/// Parses a control URL: one etcd client URL or several separated by commas
/// (`http://127.0.0.1:2379,http://127.0.0.1:22379`).
///
/// Errors: [`Error::InvalidArgument`] for an empty list or a non-http(s) URL.
pub fn parse_control_url(url: &str) -> Result<Vec<String>> {
    let endpoints: Vec<String> = url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if endpoints.is_empty() {
        return Err(Error::InvalidArgument(
            "--control names no etcd endpoint".into(),
        ));
    }
    for e in &endpoints {
        if !(e.starts_with("http://") || e.starts_with("https://")) {
            return Err(Error::InvalidArgument(format!(
                "control endpoint {e:?} must be an http:// or https:// etcd client URL"
            )));
        }
    }
    Ok(endpoints)
}

impl ControlPlane {
    /// Connects (lazily) to the etcd cluster at `endpoints`, deployment `namespace` (e.g.
    /// [`meta::store::etcd::DEFAULT_NAMESPACE`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad namespace or endpoint;
    /// [`Error::Meta`] (`StoreUnavailable`) when the client cannot be built.
    pub fn connect(endpoints: Vec<String>, namespace: &str) -> Result<ControlPlane> {
        meta::store::etcd::validate_namespace(namespace)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let client = meta::store::etcd::connect(&endpoints, REQUEST_TIMEOUT)?;
        Ok(ControlPlane {
            client,
            endpoints,
            namespace: namespace.to_owned(),
        })
    }

    /// The etcd endpoints.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The deployment namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub(crate) fn client(&self) -> etcd_client::Client {
        self.client.clone()
    }

    pub(crate) fn key(&self, rest: &str) -> Vec<u8> {
        format!("{}control/{rest}", self.namespace).into_bytes()
    }

    pub(crate) fn root_key(&self, root: &RootId) -> Vec<u8> {
        self.key(&format!("roots/id/{root}"))
    }

    pub(crate) fn root_name_key(&self, name: &str) -> Vec<u8> {
        self.key(&format!("roots/name/{name}"))
    }

    pub(crate) fn shard_key(&self, shard: &LogicalShardId, what: &str) -> Vec<u8> {
        self.key(&format!("shards/{shard}/{what}"))
    }

    /// Runs one etcd call (built anew for each attempt) with retries of transient failures.
    pub(crate) fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T>
    where
        F: Fn(etcd_client::Client) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>
            + Send
            + 'static,
        T: Send + 'static,
    {
        let mut backoff = Backoff::new(RETRY_WINDOW);
        loop {
            match bridge::run(f(self.client()))? {
                Ok(v) => return Ok(v),
                Err(e) => match classify(&e) {
                    Failure::Transient(r) => {
                        if !backoff.wait() {
                            return Err(control_unavailable(what, &r));
                        }
                    }
                    Failure::Compacted => return Err(control_unavailable(what, "compacted")),
                    Failure::TooLarge(r) | Failure::Permanent(r) => {
                        return Err(control_unavailable(what, &r))
                    }
                },
            }
        }
    }

    /// Exact-key reads of `keys` in one read-only transaction: values (with their lease ids)
    /// in order.
    pub(crate) fn get_many(&self, keys: Vec<Vec<u8>>) -> Result<Vec<Option<ValueAndLease>>> {
        use etcd_client::proto::PbTxnOpResponse;
        let ks = keys.clone();
        let resp = self.call("read", move |mut c| {
            let txn = etcd_client::Txn::new().and_then(
                ks.iter()
                    .map(|k| etcd_client::TxnOp::get(k.clone(), None))
                    .collect::<Vec<_>>(),
            );
            async move { c.txn(txn).await }
        })?;
        let responses = resp.0.responses;
        if responses.len() != keys.len() {
            return Err(control_unavailable("read", "short transaction answer"));
        }
        Ok(responses
            .into_iter()
            .zip(&keys)
            .map(|(op, key)| match op.response {
                Some(PbTxnOpResponse::ResponseRange(r)) => r
                    .kvs
                    .into_iter()
                    .find(|kv| &kv.key == key)
                    .map(|kv| (kv.value, kv.lease)),
                _ => None,
            })
            .collect())
    }

    /// Every `(key, value)` under `prefix` (control-plane listings are small; one range).
    pub(crate) fn list(&self, prefix: Vec<u8>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let resp = self.call("list", move |mut c| {
            let p = prefix.clone();
            async move {
                c.get(p, Some(etcd_client::GetOptions::new().with_prefix()))
                    .await
            }
        })?;
        Ok(resp
            .0
            .kvs
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect())
    }
}

/// A control-plane failure as the SDK error.
pub(crate) fn control_unavailable(what: &str, reason: &str) -> Error {
    Error::Meta(meta::Error::StoreUnavailable {
        reason: format!("control plane {what}: {reason}"),
        write_outcome_unknown: false,
    })
}

/// Milliseconds since the Unix epoch (record timestamps; 0 if the clock is before 1970).
pub(crate) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
