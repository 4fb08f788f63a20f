//! `nokv init` ([`init_store`]): write the configuration and the namespace marker, create the
//! root in the control plane for etcd metadata, then open the new store once. Above `config.rs`
//! and `objects.rs`, and above the client's opening, which reads the configuration back through
//! them.

use std::path::Path;

use objstore::PutOutcome;

#[cfg(feature = "etcd")]
use super::config::MetadataConfig;
#[cfg(not(feature = "etcd"))]
use super::config::ETCD_UNSUPPORTED;
use super::config::{config_error, InitOptions, StoreConfig, MARKER_KEY};
use super::objects::{build_provider, check_marker, marker_bytes};
use crate::client::{Client, ClientOptions};
use crate::error::Result;

/// What [`init_store`] did.
#[derive(Clone, Debug)]
pub struct InitOutcome {
    /// The configuration in force.
    pub config: StoreConfig,
    /// False when the store was already initialized with the same settings (idempotent rerun
    /// that only completed a missing marker, if any).
    pub created: bool,
}

/// `--metadata-etcd URLS` of `nokv init`: validates the namespace and root name and sets the
/// metadata configuration (the RootPlacement is created when the configuration is first written).
#[cfg(feature = "etcd")]
fn etcd_metadata(wanted: &mut StoreConfig, control: &str, options: &InitOptions) -> Result<()> {
    let endpoints = crate::control::parse_control_url(control)?;
    let namespace = options
        .etcd_namespace
        .clone()
        .unwrap_or_else(|| meta::store::etcd::DEFAULT_NAMESPACE.to_owned());
    meta::store::etcd::validate_namespace(&namespace).map_err(|e| config_error(e.to_string()))?;
    let root = options
        .root_name
        .clone()
        .unwrap_or_else(|| format!("store-{}", wanted.store_uuid.get(..12).unwrap_or("x")));
    crate::control::placement::validate_root_name(&root)?;
    wanted.metadata = MetadataConfig::Etcd {
        endpoints,
        namespace,
        root,
        root_id: String::new(),
    };
    Ok(())
}

/// `nokv init`: persists the configuration, writes the namespace marker (put-if-absent) and
/// creates the metadata store.
///
/// Re-running with the same settings completes an interrupted init (idempotent). Refused:
/// different settings on an initialized store, a store that already holds metadata but no
/// configuration (it was created without `init` on the local directory), and an object
/// namespace whose marker belongs to another store.
///
/// Errors: [`Error::StoreConfig`], [`Error::NamespaceMismatch`], [`Error::ObjectUnavailable`],
/// [`Error::LocalIo`], plus those of [`Client::open_with`].
pub fn init_store(dir: &Path, options: &InitOptions) -> Result<InitOutcome> {
    #[cfg_attr(not(feature = "etcd"), allow(unused_mut))]
    let mut wanted = StoreConfig::from_init(options)?;
    if let Some(control) = &options.metadata_etcd {
        #[cfg(not(feature = "etcd"))]
        return Err(config_error(format!(
            "--metadata-etcd {control}: {ETCD_UNSUPPORTED}"
        )));
        #[cfg(feature = "etcd")]
        etcd_metadata(&mut wanted, control, options)?;
    }
    let (config, created) = match StoreConfig::load(dir)? {
        Some(existing) => {
            if !existing.same_settings(&wanted, options.root_name.as_deref()) {
                return Err(config_error(format!(
                    "the store is already initialized with other settings ({})",
                    existing.describe_objects()
                )));
            }
            (existing, false)
        }
        None => {
            if dir.join("meta").exists() {
                return Err(config_error(
                    "the directory already holds a store created without `nokv init` (local objects); init only creates new stores",
                ));
            }
            #[cfg(feature = "etcd")]
            if let MetadataConfig::Etcd {
                endpoints,
                namespace,
                root,
                root_id,
            } = &mut wanted.metadata
            {
                // The RootPlacement exists before the root's first write (docs/metadata-format.md).
                let control = crate::control::ControlPlane::connect(endpoints.clone(), namespace)?;
                let record = control.create_root(root, None)?;
                *root_id = record.placement.root_id.to_string();
            }
            wanted.write_new(dir)?;
            (wanted, true)
        }
    };
    let store = build_provider(dir, &config, true)?;
    match store.put_if_absent(MARKER_KEY, &marker_bytes(&config)?)? {
        PutOutcome::Created => {}
        PutOutcome::AlreadyExists => check_marker(store.as_ref(), &config)?,
    }
    drop(store);
    Client::open_with(
        dir,
        ClientOptions {
            create_if_missing: true,
            ..Default::default()
        },
    )?;
    Ok(InitOutcome { config, created })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::store_config::config::{ObjectSyncConfig, ObjectsConfig, CONFIG_FILE};
    use std::fs;

    #[test]
    fn init_with_per_file_sync_opens_the_objects_that_way() {
        let a = tempfile::tempdir().expect("tempdir");
        let options = InitOptions {
            object_sync: Some(ObjectSyncConfig::PerFile),
            ..Default::default()
        };
        let outcome = init_store(a.path(), &options).expect("init");
        assert_eq!(
            StoreConfig::load(a.path()).expect("load"),
            Some(outcome.config.clone())
        );
        assert_eq!(
            outcome.config.objects,
            ObjectsConfig::Local {
                sync: ObjectSyncConfig::PerFile
            }
        );
        // Re-running init with another mode is another setting.
        assert!(matches!(
            init_store(a.path(), &InitOptions::default()),
            Err(Error::StoreConfig { .. })
        ));
        assert!(!init_store(a.path(), &options).expect("rerun").created);
        crate::client::Client::open(a.path()).expect("open per-file store");
        // The mode is for local objects only.
        let s3 = InitOptions {
            objects: Some("s3://bucket/x".into()),
            object_sync: Some(ObjectSyncConfig::Syncfs),
            ..Default::default()
        };
        assert!(matches!(
            StoreConfig::from_init(&s3),
            Err(Error::StoreConfig { .. })
        ));
    }

    #[test]
    fn local_store_with_foreign_marker_is_refused() {
        let a = tempfile::tempdir().expect("tempdir");
        let outcome = init_store(a.path(), &InitOptions::default()).expect("init");
        assert!(outcome.created);
        crate::client::Client::open(a.path()).expect("reopen own namespace");
        // Another store's configuration pointed at the same objects directory.
        let mut foreign = outcome.config.clone();
        foreign.store_uuid = "ff".repeat(16);
        fs::remove_file(a.path().join(CONFIG_FILE)).expect("rm");
        foreign.write_new(a.path()).expect("write foreign");
        assert!(matches!(
            crate::client::Client::open(a.path()),
            Err(Error::NamespaceMismatch { .. })
        ));
    }
}
