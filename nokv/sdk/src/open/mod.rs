//! Opening an embedded store: [`Client::open`], [`Client::open_read_only`] and
//! [`Client::open_with`] — the store configuration (`crate::store_config`), the metadata shard
//! (holt in `<store>/meta`, or an etcd TxnStore through `crate::control`), the object provider,
//! then the recovery pass of `crate::publication` and the snapshot reaper.

#[cfg(feature = "etcd")]
mod etcd;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use meta::MetaShard;
use objstore::ObjectStore;

use crate::client::{Client, ClientOptions};
use crate::error::{not_writable, store_dir_error, Error, Result};

/// How long a writer sharing the lock waits for it when a live `nokv serve` is recorded for the
/// store (see `Client::open_holt_meta`): a server never releases the lock, so a refusal within
/// this wait means the store is served.
const SERVED_PROBE: std::time::Duration = std::time::Duration::from_millis(250);

impl Client {
    /// Opens (creating when missing) the embedded store in `dir` with default options.
    ///
    /// Errors: [`Error::Meta`] when the schema gate refuses the store (wrong marker, registry or
    /// presentation root) or its files are damaged; [`Error::StoreBusy`] when another process
    /// kept the store locked for the whole lock wait; [`Error::LocalIo`] when the directory cannot
    /// be created.
    pub fn open(dir: impl AsRef<Path>) -> Result<Client> {
        Self::open_with(dir, ClientOptions::default())
    }

    /// Opens the existing embedded store in `dir` read-only with default options (see
    /// [`ClientOptions::read_only`]): the metadata as of this call through
    /// `meta::MetaShard::open_read_only`, the object provider opened without creating or syncing
    /// anything (an S3 store is read without its local block cache). Reads work exactly as on a
    /// writer handle; every write answers [`Error::ReadOnlyStore`] and writes nothing.
    ///
    /// Errors: [`Error::StoreNotFound`] when `dir` holds no store (nothing is created);
    /// [`Error::Meta`] when the schema gate refuses the store or its files are damaged or
    /// unreadable; [`Error::StoreConfig`] / [`Error::NamespaceMismatch`] for the object
    /// configuration.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Client> {
        Self::open_with(
            dir,
            ClientOptions {
                read_only: true,
                ..ClientOptions::default()
            },
        )
    }

    /// Opens the embedded store in `dir` with explicit options.
    ///
    /// A writer open (the default) takes the store's lock; an existing store is not written by
    /// the open itself — the owner epoch advances right before the first write of this handle —
    /// except by the recovery pass and the snapshot reaper, which write only when they find
    /// work. A store whose files cannot be written (read-only file system, another user's files)
    /// answers [`Error::ReadOnlyStore`]; open it with [`ClientOptions::read_only`] to read it.
    pub fn open_with(dir: impl AsRef<Path>, options: ClientOptions) -> Result<Client> {
        let dir = dir.as_ref().to_path_buf();
        if !(1024..=64 * 1024 * 1024).contains(&options.block_size) {
            return Err(Error::InvalidArgument(format!(
                "block size {} is outside 1 KiB ..= 64 MiB",
                options.block_size
            )));
        }
        if options.read_only {
            return Self::open_read_only_with(dir, options);
        }
        let store_config = crate::store_config::config::StoreConfig::load(&dir)?;
        let etcd_metadata = store_config
            .as_ref()
            .map(|c| &c.metadata)
            .filter(|m| !m.is_holt());
        // Missing metadata beside objects is lost metadata (the holt open below refuses it as
        // damaged), never "no store".
        if !options.create_if_missing
            && etcd_metadata.is_none()
            && !dir.join("meta").is_dir()
            && !holds_objects(&dir.join("objects"))
        {
            return Err(Error::StoreNotFound);
        }
        std::fs::create_dir_all(&dir).map_err(|source| store_dir_error(&dir, source))?;
        let now = std::time::Instant::now();
        // A wait too long for the clock waits for ever.
        let deadline = now
            .checked_add(options.lock_wait)
            .unwrap_or_else(|| now + std::time::Duration::from_secs(u64::from(u32::MAX)));
        let mut backoff = std::time::Duration::from_millis(2);
        let (meta, ownership) = if let Some(metadata) = etcd_metadata {
            #[cfg(not(feature = "etcd"))]
            {
                let _ = metadata;
                return Err(crate::store_config::config::etcd_unsupported());
            }
            #[cfg(feature = "etcd")]
            let (meta, ownership) = etcd::open_shard(
                metadata,
                meta::OpenOptions {
                    presentation_root: options.presentation_root.clone(),
                    // Long-running writers keep their MVCC history bounded between reaper runs.
                    history_policy: Some(options.snapshot_policy),
                    ..Default::default()
                },
                options.lock_wait,
                options.owner_lease_ttl,
                &options.owner_address,
            )?;
            #[cfg(feature = "etcd")]
            (meta, Some(ownership))
        } else {
            (
                Self::open_holt_meta(&dir, &options, deadline, &mut backoff)?,
                None,
            )
        };
        // Provider from the persisted store configuration (LocalDir at <store>/objects when the
        // store has none; S3 behind the block cache otherwise, namespace marker checked).
        let objects: Arc<dyn ObjectStore> = match &options.objects {
            Some(objects) => objects.clone(),
            None => crate::store_config::objects::open_objects(&dir, store_config.as_ref())?,
        };
        let shared_lock = meta.holt_db().is_some_and(holt::Db::shares_writer_lock);
        let mut client = Client::from_parts(dir.clone(), meta, objects, ownership, &options);
        if shared_lock {
            // A store whose writers/ cannot be written is read-only for writers, like one whose
            // meta/ cannot be (the typed ReadOnlyStore, never an internal error).
            let registration = crate::writers::Registration::start(&dir).map_err(|e| match e {
                Error::LocalIo { ref source, .. } => match not_writable(source) {
                    Some(reason) => Error::ReadOnlyStore {
                        reason: reason.into(),
                    },
                    None => e,
                },
                other => other,
            })?;
            client.set_registration(registration);
        }
        if options.recover_at_open {
            // Orphans are recovered before the handle is used; a failure (e.g. the provider is
            // unreachable) leaves them for the next pass and never blocks reads.
            let outcome = client.recover_operations().map_err(|e| e.to_string());
            client.set_open_recovery(outcome);
        }
        // The snapshot reaper runs at every writer open (best effort; see crate::snapshot).
        let _ = client.reap_snapshots();
        Ok(client)
    }

    /// Opens the holt metadata in `<dir>/meta`, waiting out another process's lock.
    fn open_holt_meta(
        dir: &Path,
        options: &ClientOptions,
        deadline: std::time::Instant,
        backoff: &mut std::time::Duration,
    ) -> Result<MetaShard> {
        // Objects are only ever written after the metadata was initialized: empty metadata
        // beside objects is lost metadata, never a new store.
        let require_initialized = holds_objects(&dir.join("objects"));
        // A live `nokv serve` recorded for this store holds the lock for its whole life: a
        // writer sharing the lock waits only long enough to confirm that (the record may be
        // stale — its process gone or its pid reused), then says where the store is served.
        let served =
            options.writer_idle_release.is_some() && crate::address::serving(dir).is_some();
        let wait = if served {
            options.lock_wait.min(SERVED_PROBE)
        } else {
            options.lock_wait
        };
        let meta = loop {
            let opened = MetaShard::open(
                dir.join("meta"),
                meta::OpenOptions {
                    presentation_root: options.presentation_root.clone(),
                    // Long-running writers keep their MVCC history bounded between reaper runs.
                    history_policy: Some(options.snapshot_policy),
                    require_initialized,
                    holt: holt::Options {
                        writer_lock: match options.writer_idle_release {
                            Some(idle_release) => holt::WriterLock::Shared { idle_release, wait },
                            None => holt::WriterLock::Held,
                        },
                        ..holt::Options::default()
                    },
                    ..Default::default()
                },
            );
            match opened {
                Err(meta::Error::Storage(holt::Error::Locked { .. })) => {
                    // A running server holds the lock for as long as it runs: say where it
                    // serves instead of waiting for it.
                    let refused = crate::error::locked(dir);
                    if matches!(refused, Error::StoreServed { .. })
                        || std::time::Instant::now() >= deadline
                    {
                        return Err(refused);
                    }
                    std::thread::sleep(*backoff);
                    *backoff = (*backoff * 2).min(std::time::Duration::from_millis(100));
                }
                Err(meta::Error::Storage(holt::Error::Io { source, .. }))
                    if not_writable(&source).is_some() =>
                {
                    return Err(Error::ReadOnlyStore {
                        reason: not_writable(&source).unwrap_or_default().into(),
                    });
                }
                other => break other?,
            }
        };
        Ok(meta)
    }

    /// [`Client::open_with`] for [`ClientOptions::read_only`].
    fn open_read_only_with(dir: PathBuf, options: ClientOptions) -> Result<Client> {
        let store_config = crate::store_config::config::StoreConfig::load(&dir)?;
        // As for a writer: empty or missing metadata beside objects is lost metadata.
        let require_initialized = holds_objects(&dir.join("objects"));
        let open = meta::OpenOptions {
            presentation_root: options.presentation_root.clone(),
            require_initialized,
            ..Default::default()
        };
        let meta = match store_config.as_ref().map(|c| &c.metadata) {
            #[cfg(feature = "etcd")]
            Some(metadata) if !metadata.is_holt() => etcd::open_shard_read_only(metadata, open)?,
            #[cfg(not(feature = "etcd"))]
            Some(metadata) if !metadata.is_holt() => {
                return Err(crate::store_config::config::etcd_unsupported())
            }
            _ => {
                if !dir.join("meta").is_dir() && !require_initialized {
                    return Err(Error::StoreNotFound);
                }
                MetaShard::open_read_only(dir.join("meta"), open)?
            }
        };
        let objects: Arc<dyn ObjectStore> = match &options.objects {
            Some(objects) => objects.clone(),
            None => {
                crate::store_config::objects::open_objects_read_only(&dir, store_config.as_ref())?
            }
        };
        Ok(Client::from_parts(dir, meta, objects, None, &options))
    }
}

/// Whether the local object directory `objects` holds any object other than the namespace
/// marker `nokv init` writes before the metadata exists (at most two short `read_dir` steps; a
/// missing or unreadable directory counts as empty). Objects are published only after the
/// metadata was initialized, so one there means the store existed.
fn holds_objects(objects: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(objects) else {
        return false;
    };
    for entry in entries.flatten() {
        if entry.file_name() != "nokv" {
            return true;
        }
        let Ok(inner) = std::fs::read_dir(entry.path()) else {
            return true;
        };
        if inner.flatten().any(|e| e.file_name() != "namespace.json") {
            return true;
        }
    }
    false
}
