//! The shard table of a `--control` server: which roots this process serves, and the
//! acquisition loop that fills it (initial placement and **takeover**) and empties it
//! (fail-stop).
//!
//! Every `poll` interval the loop
//!
//! 1. drops every served shard whose ownership stopped serving (its serving deadline passed or a
//!    renewal found the lease gone): its background passes stop and its store handle closes;
//! 2. lists the control plane's shards and tries to acquire, in random order, the etcd-backed
//!    shards that serve a root and have no live owner — at most one per pass, so servers that
//!    start together spread the shards between them. A shard whose owner died becomes free
//!    when etcd expires the owner's lease (within its TTL), and the next pass of a surviving
//!    server takes it over under the next owner epoch.
//!
//! Acquiring a shard is opening its root's store exactly as an embedded client or the
//! single-store server does ([`nokv::Client::open_with`] on the root's served directory): the
//! shard-owner lease is acquired without waiting, the shard is opened with the ownership as the
//! fence of every etcd transaction (the RootFence is installed or validated by the schema gate,
//! a `Provisioning` root becomes `Active`), orphaned publish operations are recovered and the
//! snapshot reaper runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use meta::LogicalShardId;

use super::super::state::{AppState, ServerOptions};
use super::super::{journal, metrics, routes};
use nokv::client::{Client, ClientOptions};
use nokv::control::shard::ShardStatus;
use nokv::control::{ControlPlane, ShardEngine};
use nokv::error::{Error, Result};
use nokv::store_config::{CacheConfig, MetadataConfig, ObjectsConfig, StoreConfig};
use nokv::workbench::Workbench;

/// Hex digits of the root id in a root's object prefix.
const ROOT_PREFIX_HEX: usize = 16;

/// One root this server serves.
pub(crate) struct Served {
    /// The root's name.
    pub(crate) root: String,
    /// Its logical shard.
    pub(crate) shard: LogicalShardId,
    /// The owner epoch this server holds the shard under.
    pub(crate) epoch: u64,
    /// The root's server state (store handle, journal, metrics).
    pub(crate) state: Arc<AppState>,
    /// The `/v1/` router of the root (the single-store server's routes).
    pub(crate) router: axum::Router,
    stop_background: tokio::sync::watch::Sender<bool>,
}

impl Served {
    /// Whether this server may still serve the root (see
    /// [`nokv::control::ShardOwnership::is_serving`]).
    pub(crate) fn is_serving(&self) -> bool {
        self.state
            .client
            .ownership()
            .is_some_and(nokv::control::ShardOwnership::is_serving)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.stop_background.send(true);
    }
}

/// Where the objects of served roots live: the deployment's namespace, one sub-namespace per
/// root.
#[derive(Debug, Clone)]
pub(crate) struct ObjectsTemplate {
    pub(crate) objects: ObjectsConfig,
    pub(crate) cache: Option<CacheConfig>,
}

impl ObjectsTemplate {
    /// The store configuration of root `name` (`root_id`, 32 hex): its object namespace is the
    /// deployment's S3 prefix plus `/<first 16 hex of root_id>` (or `<dir>/objects` for local
    /// objects), and its store uuid is the root id, so every server that takes the root over
    /// finds the same namespace marker (two roots whose ids share 16 hex digits would find each
    /// other's marker and be refused with `NamespaceMismatch`, never mixed). The short prefix
    /// keeps object keys short: object keys already carry the shard and root ids.
    fn root_config(
        &self,
        endpoints: &[String],
        namespace: &str,
        name: &str,
        root_id: &str,
    ) -> StoreConfig {
        let objects = match &self.objects {
            ObjectsConfig::Local { sync } => ObjectsConfig::Local { sync: *sync },
            ObjectsConfig::S3 {
                bucket,
                prefix,
                endpoint,
                region,
                path_style,
            } => ObjectsConfig::S3 {
                bucket: bucket.clone(),
                prefix: {
                    let short = root_id.get(..ROOT_PREFIX_HEX).unwrap_or(root_id);
                    if prefix.is_empty() {
                        short.to_owned()
                    } else {
                        format!("{prefix}/{short}")
                    }
                },
                endpoint: endpoint.clone(),
                region: region.clone(),
                path_style: *path_style,
            },
        };
        StoreConfig {
            format: nokv::store_config::CONFIG_FORMAT.into(),
            version: 1,
            store_uuid: root_id.to_owned(),
            objects,
            cache: self.cache.clone(),
            metadata: MetadataConfig::Etcd {
                endpoints: endpoints.to_vec(),
                namespace: namespace.to_owned(),
                root: name.to_owned(),
                root_id: root_id.to_owned(),
            },
        }
    }
}

/// The served roots by name, shared by the request dispatcher and the acquisition loop.
#[derive(Default)]
pub(crate) struct ShardTable {
    served: RwLock<HashMap<String, Arc<Served>>>,
}

impl ShardTable {
    /// The served root `name`, if this server holds it.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Served>> {
        self.served.read().ok().and_then(|m| m.get(name).cloned())
    }

    /// Every served root, in name order.
    pub(crate) fn all(&self) -> Vec<Arc<Served>> {
        let mut v: Vec<Arc<Served>> = self
            .served
            .read()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.root.cmp(&b.root));
        v
    }

    fn insert(&self, served: Served) {
        if let Ok(mut m) = self.served.write() {
            m.insert(served.root.clone(), Arc::new(served));
        }
    }

    fn remove_lost(&self) -> Vec<Arc<Served>> {
        let Ok(mut m) = self.served.write() else {
            return Vec::new();
        };
        let lost: Vec<String> = m
            .iter()
            .filter(|(_, s)| !s.is_serving())
            .map(|(k, _)| k.clone())
            .collect();
        lost.iter().filter_map(|k| m.remove(k)).collect()
    }

    /// Empties the table (shutdown): the caller drops the entries, which releases the leases
    /// once in-flight requests let go of them.
    pub(crate) fn drain(&self) -> Vec<Arc<Served>> {
        self.served
            .write()
            .map(|mut m| m.drain().map(|(_, v)| v).collect())
            .unwrap_or_default()
    }
}

/// What the acquisition loop needs.
pub(crate) struct Acquirer {
    pub(crate) control: ControlPlane,
    pub(crate) base: ServerOptions,
    pub(crate) objects: ObjectsTemplate,
    pub(crate) address: String,
    pub(crate) poll: Duration,
    pub(crate) table: Arc<ShardTable>,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) stop: Arc<AtomicBool>,
}

impl Acquirer {
    /// Runs passes until `stop` is set (see the module docs).
    pub(crate) fn run(&self) {
        while !self.stop.load(Ordering::Acquire) {
            self.pass();
            let wake = std::time::Instant::now() + self.poll;
            while std::time::Instant::now() < wake && !self.stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(20).min(self.poll));
            }
        }
    }

    /// One pass: drop lost shards, acquire at most one free one.
    fn pass(&self) {
        for lost in self.table.remove_lost() {
            eprintln!(
                "nokv serve: stopped serving root {} (shard {}, epoch {}): the shard-owner lease lapsed or was taken over",
                lost.root, lost.shard, lost.epoch
            );
        }
        let shards = match self.control.list_shards() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("nokv serve: cannot list shards: {e}");
                return;
            }
        };
        let mut free: Vec<&ShardStatus> = shards
            .iter()
            .filter(|s| s.record.engine == ShardEngine::Etcd && s.owner.is_none())
            .filter(|s| s.roots.len() == 1)
            .collect();
        shuffle(&mut free);
        for status in free {
            let Some(root) = status.roots.first() else {
                continue;
            };
            if self.table.get(&root.name).is_some() {
                continue;
            }
            match self.open_root(&root.name, &root.placement.root_id.to_string()) {
                Ok(served) => {
                    eprintln!(
                        "nokv serve: serving root {} (shard {}, owner epoch {})",
                        served.root, served.shard, served.epoch
                    );
                    self.table.insert(served);
                    return;
                }
                // Another server was faster: try the next free shard.
                Err(Error::StoreBusy) => {}
                Err(Error::Placement { .. }) => {}
                Err(e) => eprintln!("nokv serve: cannot open root {}: {e}", root.name),
            }
        }
    }

    /// Acquires and opens root `name` (see the module docs).
    fn open_root(&self, name: &str, root_id: &str) -> Result<Served> {
        let dir = served_root_dir(&self.base.store, root_id);
        let config = self.objects.root_config(
            self.control.endpoints(),
            self.control.namespace(),
            name,
            root_id,
        );
        nokv::store_config::prepare_served_root(&dir, &config)?;
        let client = Client::open_with(
            &dir,
            ClientOptions {
                // Never wait for a live owner: the next pass tries again.
                lock_wait: Duration::ZERO,
                // The one owner holds the writer lock for its whole life.
                writer_idle_release: None,
                owner_address: self.address.clone(),
                owner_lease_ttl: self.base.owner_lease_ttl,
                ..ClientOptions::default()
            },
        )?;
        let (shard, epoch) = match client.ownership() {
            Some(o) => (o.shard(), o.epoch()),
            None => {
                return Err(Error::StoreConfig {
                    reason: format!("root {name} did not open on an etcd-backed shard"),
                })
            }
        };
        let journal = journal::Journal::open(&dir.join("server"), self.base.replay_retention)?;
        let registry = nokv::access::TokenRegistry::at_store(&dir);
        let audit = nokv::access::AuditLog::at_store(&dir);
        let opts = ServerOptions {
            store: dir,
            ..self.base.clone()
        };
        let state = Arc::new(AppState {
            workbench: Workbench::new(client.clone()),
            client,
            opts,
            metrics: metrics::Metrics::default(),
            journal,
            registry,
            sessions: super::super::auth::Sessions::default(),
            audit,
        });
        let router = routes::router(state.clone());
        let (stop_background, stopped) = tokio::sync::watch::channel(false);
        {
            let _inside = self.runtime.enter();
            // Detached: it ends when `stop_background` fires (or its sender drops).
            drop(routes::spawn_background(state.clone(), stopped));
        }
        Ok(Served {
            root: name.to_owned(),
            shard,
            epoch,
            state,
            router,
            stop_background,
        })
    }
}

/// `<state dir>/roots/<root_id>`: the served directory of one root (configuration, block cache,
/// request journal; local objects when the deployment has no S3 namespace).
pub(crate) fn served_root_dir(state_dir: &Path, root_id: &str) -> PathBuf {
    state_dir.join("roots").join(root_id)
}

/// Fisher–Yates with the OS random source (order only; no security property needed).
fn shuffle<T>(v: &mut [T]) {
    let mut seed = [0u8; 8];
    if getrandom::fill(&mut seed).is_err() {
        return;
    }
    let mut x = u64::from_le_bytes(seed) | 1;
    for i in (1..v.len()).rev() {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = usize::try_from(x % (i as u64 + 1)).unwrap_or(0);
        v.swap(i, j);
    }
}
