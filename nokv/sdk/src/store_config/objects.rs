//! The object provider a store's configuration names, and the object-namespace marker that ties
//! the store to its namespace (see the module docs of [`crate::store_config`], "Object-namespace
//! marker").

use std::path::Path;
use std::sync::Arc;

use objstore::{
    CacheOptions, CachedStore, LocalDir, LocalOptions, ObjectStore, PutOutcome, S3Config, S3,
};
use serde::{Deserialize, Serialize};

use super::config::{
    config_error, MetadataConfig, ObjectsConfig, StoreConfig, MARKER_FORMAT, MARKER_KEY,
};
use crate::error::{Error, Result};

/// The marker object's JSON body.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    format: String,
    version: u32,
    store_uuid: String,
}

/// Builds the object provider of the store in `dir` (`config` as loaded by
/// [`StoreConfig::load`]): `LocalDir` at `<dir>/objects` without a configuration; S3 (wrapped
/// in the block cache when configured) otherwise. With a configuration, the namespace marker
/// must exist and carry the configured `store_uuid`.
///
/// Errors: [`Error::NamespaceMismatch`]; [`Error::StoreConfig`] for an unusable provider or
/// cache configuration; [`Error::ObjectUnavailable`] when the marker cannot be read.
pub fn open_objects(dir: &Path, config: Option<&StoreConfig>) -> Result<Arc<dyn ObjectStore>> {
    let Some(config) = config else {
        return Ok(Arc::new(LocalDir::open(dir.join("objects"))?));
    };
    let store = build_provider(dir, config, true)?;
    check_marker(store.as_ref(), config)?;
    Ok(store)
}

/// [`open_objects`] for a read-only client: touches nothing on disk. A local provider is opened
/// without creating or syncing its directory ([`LocalDir::open_existing`]); an S3 provider is
/// used without the local block cache, whose directory a read-only store may not let it write.
/// The namespace marker is checked like [`open_objects`] does.
///
/// Errors: [`Error::StoreConfig`] when the S3 client cannot be built;
/// [`Error::NamespaceMismatch`] when the marker is missing or foreign.
pub fn open_objects_read_only(
    dir: &Path,
    config: Option<&StoreConfig>,
) -> Result<Arc<dyn ObjectStore>> {
    let Some(config) = config else {
        return Ok(Arc::new(LocalDir::open_existing(dir.join("objects"))));
    };
    let store = build_provider(dir, config, false)?;
    check_marker(store.as_ref(), config)?;
    Ok(store)
}

/// The configured provider; `writable` opens the local directory for writing (created and
/// synced) and puts the block cache in front of S3, otherwise nothing local is touched.
pub(super) fn build_provider(
    dir: &Path,
    config: &StoreConfig,
    writable: bool,
) -> Result<Arc<dyn ObjectStore>> {
    match &config.objects {
        ObjectsConfig::Local { .. } if !writable => {
            Ok(Arc::new(LocalDir::open_existing(dir.join("objects"))))
        }
        ObjectsConfig::Local { sync } => Ok(Arc::new(LocalDir::open_with(
            dir.join("objects"),
            LocalOptions {
                sync: (*sync).into(),
            },
        )?)),
        ObjectsConfig::S3 {
            bucket,
            prefix,
            endpoint,
            region,
            path_style,
        } => {
            let mut s3c = S3Config::new(bucket.clone(), prefix.clone());
            s3c.endpoint = endpoint.clone();
            s3c.region = region.clone();
            s3c.path_style = *path_style;
            let s3 = S3::open(s3c).map_err(|e| config_error(e.to_string()))?;
            match &config.cache {
                None => Ok(Arc::new(s3)),
                Some(_) if !writable => Ok(Arc::new(s3)),
                Some(cache) => {
                    let cache_dir = if cache.dir.is_absolute() {
                        cache.dir.clone()
                    } else {
                        dir.join(&cache.dir)
                    };
                    let cached =
                        CachedStore::open(s3, CacheOptions::new(cache_dir, cache.max_bytes))
                            .map_err(|e| config_error(e.to_string()))?;
                    Ok(Arc::new(cached))
                }
            }
        }
    }
}

pub(super) fn marker_bytes(config: &StoreConfig) -> Result<Vec<u8>> {
    let marker = Marker {
        format: MARKER_FORMAT.into(),
        version: 1,
        store_uuid: config.store_uuid.clone(),
    };
    let mut bytes = serde_json::to_vec_pretty(&marker)
        .map_err(|e| config_error(format!("cannot encode the namespace marker: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Reads the marker and compares its uuid with the configuration's.
pub(super) fn check_marker(store: &dyn ObjectStore, config: &StoreConfig) -> Result<()> {
    let found = match store.get(MARKER_KEY) {
        Ok(bytes) => bytes,
        Err(objstore::Error::NotFound { .. }) => {
            return Err(Error::NamespaceMismatch {
                reason: format!(
                    "the object namespace ({}) has no NoKV namespace marker; it is not this store's namespace (store {})",
                    config.describe_objects(),
                    config.store_uuid
                ),
            })
        }
        Err(e) => return Err(e.into()),
    };
    let marker: Marker = serde_json::from_slice(&found).map_err(|_| Error::NamespaceMismatch {
        reason: format!(
            "the namespace marker in {} is not a NoKV marker",
            config.describe_objects()
        ),
    })?;
    if marker.format != MARKER_FORMAT || marker.store_uuid != config.store_uuid {
        return Err(Error::NamespaceMismatch {
            reason: format!(
                "the object namespace {} belongs to store {}, not to this store ({})",
                config.describe_objects(),
                marker.store_uuid,
                config.store_uuid
            ),
        });
    }
    Ok(())
}

/// Prepares the store directory of one root served by a `nokv serve --control` server
/// (docs/design.md, "Distribution"): `<dir>/nokv-store.json` names the root's etcd-backed shard and
/// the deployment's object namespace for the root; the namespace marker is written
/// (put-if-absent) or checked. Idempotent: an existing configuration must equal `config`.
///
/// Errors: [`Error::StoreConfig`] when `dir` holds another configuration;
/// [`Error::NamespaceMismatch`] when the object namespace belongs to another store;
/// [`Error::ObjectUnavailable`] / [`Error::LocalIo`].
pub fn prepare_served_root(dir: &Path, config: &StoreConfig) -> Result<()> {
    match StoreConfig::load(dir)? {
        Some(existing) if existing == *config => {}
        Some(existing) => {
            return Err(config_error(format!(
                "{} already configures another store ({}, root {:?})",
                dir.display(),
                existing.describe_objects(),
                match &existing.metadata {
                    MetadataConfig::Etcd { root, .. } => root.as_str(),
                    MetadataConfig::Holt => "(holt)",
                }
            )))
        }
        None => config.write_new(dir)?,
    }
    let store = build_provider(dir, config, true)?;
    match store.put_if_absent(MARKER_KEY, &marker_bytes(config)?)? {
        PutOutcome::Created => Ok(()),
        PutOutcome::AlreadyExists => check_marker(store.as_ref(), config),
    }
}
