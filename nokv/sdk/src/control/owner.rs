//! Shard-owner records: exclusive, lease-bound ownership of a logical shard with a strictly
//! increasing owner epoch, renewal, release and the fail-stop rule.
//!
//! # Acquire
//!
//! One transaction: the owner key is absent (no live owner) and the epoch counter still holds
//! the value read; it puts `epoch + 1` into the counter and the [`OwnerRecord`] (owner id,
//! address, epoch, lease) bound to a fresh etcd lease. So at most one owner holds a shard at a
//! time, and each new owner's epoch is greater than every earlier one's.
//!
//! # Fail-stop
//!
//! etcd expires a lease `ttl` seconds after the last keep-alive it *processed*, which is after
//! the owner *sent* it. The owner therefore records the monotonic instant just before sending
//! each keep-alive (and the grant); when the answer grants `ttl`, the lease is certainly alive
//! until `sent + ttl` by the owner's clock. The owner serves only until
//! `sent + ttl - margin` ([`serving_deadline`]; margin = max(ttl / 10, 500 ms) against clock-rate
//! differences and scheduling delay), so it stops before the lease can have expired and before
//! any other owner can acquire the shard. Renewal runs every `ttl / 3` on a background thread; a
//! renewal that finds the lease gone marks the ownership lost at once.
//!
//! Independently of the owner's own clock, every write of an etcd-backed shard opened with
//! [`ShardOwnership::fence`] compares the owner key's lease inside its transaction: once etcd has
//! expired or revoked the lease, no write of this owner can commit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meta::store::etcd::OwnerFence;
use meta::LogicalShardId;

use super::plane::{control_unavailable, now_unix_ms, refused, ControlPlane};
use super::records::decode_epoch;
pub use super::records::OwnerRecord;
use crate::error::{Error, PlacementErrorKind, Result};

/// Shortest lease a shard owner may ask for, in seconds.
pub const MIN_TTL_SECONDS: i64 = 2;

/// The fail-stop safety margin for a lease of `ttl`: max(ttl / 10, 500 ms).
pub fn safety_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(500))
}

/// The instant until which an owner may serve after a keep-alive (or grant) sent at `sent` was
/// answered with `ttl`: `sent + ttl - margin` (see the module docs).
pub fn serving_deadline(sent: Instant, ttl: Duration) -> Instant {
    sent + ttl.saturating_sub(safety_margin(ttl))
}

struct State {
    deadline: Instant,
}

struct Shared {
    control: ControlPlane,
    shard: LogicalShardId,
    record: OwnerRecord,
    state: Mutex<State>,
    lost: AtomicBool,
    stop: AtomicBool,
}

impl Shared {
    fn serving(&self) -> bool {
        !self.lost.load(Ordering::Acquire)
            && self
                .state
                .lock()
                .map(|s| Instant::now() < s.deadline)
                .unwrap_or(false)
    }
}

/// Exclusive ownership of one logical shard (see the module docs). Renews itself on a
/// background thread until [`ShardOwnership::release`] or drop (which releases too).
pub struct ShardOwnership {
    shared: Arc<Shared>,
    renewer: Option<std::thread::JoinHandle<()>>,
    released: bool,
}

impl std::fmt::Debug for ShardOwnership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardOwnership")
            .field("shard", &self.shared.shard)
            .field("record", &self.shared.record)
            .field("serving", &self.shared.serving())
            .finish()
    }
}

impl ControlPlane {
    /// Tries once to become the owner of `shard` with a lease of `ttl` (whole seconds, at least
    /// [`MIN_TTL_SECONDS`]).
    ///
    /// Errors: [`Error::Placement`] with `OwnerHeld` (naming the holder) when a live owner
    /// holds it, `UnknownShard` when there is no shard record, `Conflict` when another
    /// acquisition raced this one; [`Error::InvalidArgument`] for a bad TTL; etcd unavailable.
    pub fn acquire_shard(
        &self,
        shard: &LogicalShardId,
        owner_id: &str,
        address: &str,
        ttl: Duration,
    ) -> Result<ShardOwnership> {
        let ttl_s = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        if ttl_s < MIN_TTL_SECONDS {
            return Err(Error::InvalidArgument(format!(
                "a shard-owner lease lasts at least {MIN_TTL_SECONDS} s"
            )));
        }
        self.require_shard(shard)?;
        let owner_key = self.shard_key(shard, "owner");
        let epoch_key = self.shard_key(shard, "epoch");
        let got = self.get_many(vec![owner_key.clone(), epoch_key.clone()])?;
        if let Some((v, _)) = got.first().cloned().flatten() {
            let holder = OwnerRecord::decode(&v)?;
            return Err(refused(
                PlacementErrorKind::OwnerHeld,
                format!(
                    "shard {shard} is held by {} ({}) at epoch {}",
                    holder.owner_id, holder.address, holder.epoch
                ),
            ));
        }
        let previous = got.get(1).cloned().flatten();
        let last = previous
            .as_ref()
            .map(|(v, _)| decode_epoch(v))
            .transpose()?
            .unwrap_or(0);
        let epoch = last
            .checked_add(1)
            .ok_or_else(|| Error::InvalidArgument("owner epoch space exhausted".into()))?;
        let sent = Instant::now();
        let grant = self.call("grant lease", move |mut c| async move {
            c.lease_grant(ttl_s, None).await
        })?;
        let lease_id = grant.id();
        let granted = Duration::from_secs(u64::try_from(grant.ttl()).unwrap_or(0));
        let record = OwnerRecord {
            owner_id: owner_id.to_owned(),
            address: address.to_owned(),
            epoch,
            lease_id,
            ttl_seconds: grant.ttl(),
            acquired_unix_ms: now_unix_ms(),
        };
        let value = serde_json::to_vec(&record)
            .map_err(|e| Error::InvalidArgument(format!("owner record: {e}")))?;
        let (ok, ek, prev) = (owner_key.clone(), epoch_key.clone(), previous.map(|p| p.0));
        let resp = self.call("acquire shard", move |mut c| {
            let epoch_cmp = match &prev {
                None => etcd_client::Compare::version(ek.clone(), etcd_client::CompareOp::Equal, 0),
                Some(v) => etcd_client::Compare::value(
                    ek.clone(),
                    etcd_client::CompareOp::Equal,
                    v.clone(),
                ),
            };
            let txn = etcd_client::Txn::new()
                .when(vec![
                    etcd_client::Compare::version(ok.clone(), etcd_client::CompareOp::Equal, 0),
                    epoch_cmp,
                ])
                .and_then(vec![
                    etcd_client::TxnOp::put(ek.clone(), epoch.to_be_bytes().to_vec(), None),
                    etcd_client::TxnOp::put(
                        ok.clone(),
                        value.clone(),
                        Some(etcd_client::PutOptions::new().with_lease(lease_id)),
                    ),
                ]);
            async move { c.txn(txn).await }
        });
        let applied = match resp {
            Ok(r) if r.succeeded() => true,
            // A retried acquisition whose first attempt applied finds its own lease on the key.
            Ok(_) | Err(_) => self
                .get_many(vec![owner_key.clone()])
                .ok()
                .and_then(|g| g.into_iter().next().flatten())
                .is_some_and(|(_, lease)| lease == lease_id),
        };
        if !applied {
            let _ = self.call("revoke lease", move |mut c| async move {
                c.lease_revoke(lease_id).await
            });
            return Err(refused(
                PlacementErrorKind::Conflict,
                format!("another owner acquired shard {shard} concurrently"),
            ));
        }
        let shared = Arc::new(Shared {
            control: self.clone(),
            shard: *shard,
            record,
            state: Mutex::new(State {
                deadline: serving_deadline(sent, granted),
            }),
            lost: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let renewer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("nokv-shard-lease".into())
                .spawn(move || renew_loop(&shared, granted))
                .map_err(|e| control_unavailable("lease renewal", &e.to_string()))?
        };
        Ok(ShardOwnership {
            shared,
            renewer: Some(renewer),
            released: false,
        })
    }

    /// [`ControlPlane::acquire_shard`], retried while another owner holds the shard, for at most
    /// `wait` (a crashed owner's lease expires within its TTL).
    ///
    /// Errors: `OwnerHeld` after `wait`; the other errors of `acquire_shard` at once.
    pub fn acquire_shard_waiting(
        &self,
        shard: &LogicalShardId,
        owner_id: &str,
        address: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<ShardOwnership> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(20);
        loop {
            match self.acquire_shard(shard, owner_id, address, ttl) {
                Err(Error::Placement {
                    kind: PlacementErrorKind::OwnerHeld | PlacementErrorKind::Conflict,
                    reason,
                }) => {
                    if Instant::now() >= deadline {
                        return Err(refused(PlacementErrorKind::OwnerHeld, reason));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(250));
                }
                other => return other,
            }
        }
    }
}

impl ControlPlane {
    /// The current owner record of `shard` (`None`: no live owner) and the last owner epoch
    /// granted (0: never owned), read in one transaction.
    ///
    /// Errors: a malformed record; etcd unavailable.
    pub fn shard_owner(&self, shard: &LogicalShardId) -> Result<(Option<OwnerRecord>, u64)> {
        let got = self.get_many(vec![
            self.shard_key(shard, "owner"),
            self.shard_key(shard, "epoch"),
        ])?;
        let mut it = got.into_iter();
        let owner = it
            .next()
            .flatten()
            .map(|(v, _)| OwnerRecord::decode(&v))
            .transpose()?;
        let epoch = it
            .next()
            .flatten()
            .map(|(v, _)| decode_epoch(&v))
            .transpose()?
            .unwrap_or(0);
        Ok((owner, epoch))
    }
}

fn renew_loop(shared: &Shared, ttl: Duration) {
    let period = (ttl / 3).max(Duration::from_millis(200));
    let lease = shared.record.lease_id;
    loop {
        // Sleep in short steps so release/drop is prompt.
        let wake = Instant::now() + period;
        while Instant::now() < wake {
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if shared.stop.load(Ordering::Acquire) || shared.lost.load(Ordering::Acquire) {
            return;
        }
        let sent = Instant::now();
        let client = shared.control.client();
        let answer = meta::store::etcd::bridge::run(async move {
            let mut c = client;
            let (mut keeper, mut stream) = c.lease_keep_alive(lease).await?;
            keeper.keep_alive().await?;
            stream.message().await
        });
        match answer {
            Ok(Ok(Some(resp))) if resp.ttl() > 0 => {
                let granted = Duration::from_secs(u64::try_from(resp.ttl()).unwrap_or(0));
                if let Ok(mut s) = shared.state.lock() {
                    s.deadline = serving_deadline(sent, granted);
                }
            }
            // The lease is gone (expired, revoked): this owner has lost the shard.
            Ok(Ok(_)) => {
                shared.lost.store(true, Ordering::Release);
                return;
            }
            // No answer: keep trying until the serving deadline passes on its own.
            Ok(Err(_)) | Err(_) => {}
        }
    }
}

impl ShardOwnership {
    /// The owner record (epoch, lease, address).
    pub fn record(&self) -> &OwnerRecord {
        &self.shared.record
    }

    /// The owned logical shard.
    pub fn shard(&self) -> LogicalShardId {
        self.shared.shard
    }

    /// The owner epoch of this ownership.
    pub fn epoch(&self) -> u64 {
        self.shared.record.epoch
    }

    /// Whether this owner may still serve the shard: renewals keep it true; it turns false at
    /// the serving deadline (before the lease can have expired) or as soon as a renewal finds
    /// the lease gone, and never turns true again.
    pub fn is_serving(&self) -> bool {
        let serving = self.shared.serving();
        if !serving {
            self.shared.lost.store(true, Ordering::Release);
        }
        serving
    }

    /// `Ok(())` while [`ShardOwnership::is_serving`]; else the typed `LeaseLost` refusal a
    /// fail-stop owner answers with.
    ///
    /// Errors: [`Error::Placement`] with [`PlacementErrorKind::LeaseLost`].
    pub fn check_serving(&self) -> Result<()> {
        if self.is_serving() {
            return Ok(());
        }
        Err(refused(
            PlacementErrorKind::LeaseLost,
            format!(
                "this process no longer owns shard {} (its lease lapsed or was taken over)",
                self.shared.shard
            ),
        ))
    }

    /// The fence an etcd-backed shard store compares in every transaction for this ownership.
    pub fn fence(&self) -> OwnerFence {
        OwnerFence {
            key: self.shared.control.shard_key(&self.shared.shard, "owner"),
            lease_id: self.shared.record.lease_id,
            serving: Some({
                let shared = Arc::clone(&self.shared);
                meta::store::etcd::ServingCheck(Arc::new(move || shared.serving()))
            }),
        }
    }

    /// Stops renewing without releasing: the lease lapses after its TTL exactly as if this
    /// process had frozen or lost its network. (Shutdown paths that must not hand the shard
    /// over early; fail-stop tests.)
    pub fn stop_renewing(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = self.renewer.take() {
            let _ = h.join();
        }
    }

    /// Gives the shard up now: stops renewing, marks the ownership lost and revokes the lease
    /// (etcd deletes the owner record with it), so another owner can acquire at once.
    ///
    /// Errors: etcd unavailable (the lease then lapses after its TTL).
    pub fn release(mut self) -> Result<()> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<()> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        self.stop_renewing();
        self.shared.lost.store(true, Ordering::Release);
        let lease = self.shared.record.lease_id;
        let revoked = meta::store::etcd::bridge::run({
            let mut c = self.shared.control.client();
            async move { c.lease_revoke(lease).await }
        })?;
        match revoked {
            Ok(_) => Ok(()),
            // An expired lease is already gone: nothing to give up.
            Err(etcd_client::Error::GRpcStatus(s)) if s.message().contains("not found") => Ok(()),
            Err(e) => Err(control_unavailable("revoke lease", &e.to_string())),
        }
    }
}

impl Drop for ShardOwnership {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}
