//! The store configuration file `<store>/nokv-store.json` (see the module docs of
//! [`crate::store_config`]): its types, and reading, writing and building it. A leaf of
//! `store_config/`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use objstore::{ObjectSync, S3Config};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// File name of the store configuration inside the store directory.
pub const CONFIG_FILE: &str = "nokv-store.json";
/// `format` value of the configuration file.
pub const CONFIG_FORMAT: &str = "nokv-store-config";
/// Object key (below the provider's prefix) of the object-namespace marker.
pub const MARKER_KEY: &str = "nokv/namespace.json";
/// `format` value of the marker object.
pub const MARKER_FORMAT: &str = "nokv-object-namespace";
/// Default cache directory of S3 stores, relative to the store directory.
pub const DEFAULT_CACHE_DIR: &str = "cache";
/// Default byte bound of the block cache: 1 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = objstore::cache::DEFAULT_CACHE_BYTES;

/// The persisted store configuration (see the module docs for the JSON form).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Always [`CONFIG_FORMAT`].
    pub format: String,
    /// Format version; `1`.
    pub version: u32,
    /// Random store identity (32 lowercase hex characters), also written into the marker.
    pub store_uuid: String,
    /// Where object bytes live.
    pub objects: ObjectsConfig,
    /// Local block cache in front of a remote provider (`None`: no cache).
    #[serde(default)]
    pub cache: Option<CacheConfig>,
    /// Which TxnStore holds the metadata (absent: holt in `<store>/meta`).
    #[serde(default, skip_serializing_if = "MetadataConfig::is_holt")]
    pub metadata: MetadataConfig,
}

/// Where a store's metadata lives: which TxnStore backs its logical shard.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "engine", rename_all = "lowercase", deny_unknown_fields)]
pub enum MetadataConfig {
    /// The embedded holt database in `<store>/meta` (default).
    #[default]
    Holt,
    /// The root's logical shard in an etcd cluster, placed by the control plane there.
    Etcd {
        /// etcd client URLs.
        endpoints: Vec<String>,
        /// Deployment namespace (e.g. `/nokv/`).
        namespace: String,
        /// The root's name in the control plane.
        root: String,
        /// The root id (32 lowercase hex characters).
        root_id: String,
    },
}

impl MetadataConfig {
    /// True for the embedded holt default.
    pub fn is_holt(&self) -> bool {
        matches!(self, MetadataConfig::Holt)
    }
}

/// The object provider of a store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "lowercase", deny_unknown_fields)]
pub enum ObjectsConfig {
    /// `LocalDir` at `<store>/objects`.
    Local {
        /// How objects are made durable (absent: [`ObjectSyncConfig::Syncfs`]).
        #[serde(default, skip_serializing_if = "ObjectSyncConfig::is_default")]
        sync: ObjectSyncConfig,
    },
    /// An S3-compatible bucket.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix inside the bucket (`""` = bucket root).
        #[serde(default)]
        prefix: String,
        /// Endpoint URL; `None` = AWS.
        #[serde(default)]
        endpoint: Option<String>,
        /// Region; `None` = AWS environment/profile (else `us-east-1`).
        #[serde(default)]
        region: Option<String>,
        /// Path-style addressing.
        #[serde(default)]
        path_style: bool,
    },
}

/// How a local object directory makes objects durable (`"sync"` of the local provider;
/// `nokv init --object-sync syncfs|per-file`). Maps to [`objstore::ObjectSync`], whose docs
/// say what each costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectSyncConfig {
    /// `"syncfs"`: one `syncfs(2)` shared by concurrent puts (the default; per file where the
    /// platform has no `syncfs`). For a store that owns its file system or shares an idle one.
    #[default]
    Syncfs,
    /// `"per_file"`: an `fsync` of each object file and of its directories. For a file system
    /// shared with busy programs.
    PerFile,
}

impl ObjectSyncConfig {
    /// True for the default, [`ObjectSyncConfig::Syncfs`].
    pub fn is_default(&self) -> bool {
        *self == ObjectSyncConfig::Syncfs
    }
}

impl From<ObjectSyncConfig> for ObjectSync {
    fn from(sync: ObjectSyncConfig) -> ObjectSync {
        match sync {
            ObjectSyncConfig::Syncfs => ObjectSync::Syncfs,
            ObjectSyncConfig::PerFile => ObjectSync::PerFile,
        }
    }
}

impl std::str::FromStr for ObjectSyncConfig {
    type Err = String;

    /// `syncfs`, `per-file` (or `per_file`). Errors: any other value, with the accepted ones.
    fn from_str(value: &str) -> std::result::Result<Self, String> {
        match value {
            "syncfs" => Ok(ObjectSyncConfig::Syncfs),
            "per-file" | "per_file" => Ok(ObjectSyncConfig::PerFile),
            other => Err(format!(
                "unknown object sync mode {other:?}; use syncfs or per-file"
            )),
        }
    }
}

/// The block cache of a store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Cache directory; relative paths are relative to the store directory.
    pub dir: PathBuf,
    /// Byte bound of the cache.
    pub max_bytes: u64,
}

/// What `nokv init` asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitOptions {
    /// `s3://bucket/prefix`; `None` = the local directory.
    pub objects: Option<String>,
    /// S3 endpoint URL.
    pub endpoint: Option<String>,
    /// S3 region.
    pub region: Option<String>,
    /// Force path-style addressing (also implied by an endpoint on an IP address or
    /// `localhost`, where virtual-hosted addressing cannot work).
    pub path_style: bool,
    /// Cache directory (S3 only; default `cache` inside the store).
    pub cache_dir: Option<PathBuf>,
    /// Cache byte bound (S3 only; default 1 GiB; `0` disables the cache).
    pub cache_bytes: Option<u64>,
    /// Keep the metadata in etcd: the control URL (etcd client URLs, comma-separated). The root
    /// is created in the control plane (RootPlacement before the first write) on a new
    /// etcd-backed logical shard. `None`: holt in `<store>/meta`.
    pub metadata_etcd: Option<String>,
    /// Deployment namespace in etcd (default `/nokv/`; with `metadata_etcd` only).
    pub etcd_namespace: Option<String>,
    /// Root name in the control plane (default `store-<first 12 hex of the store uuid>`; with
    /// `metadata_etcd` only).
    pub root_name: Option<String>,
    /// How the local object directory makes objects durable (local objects only; default
    /// [`ObjectSyncConfig::Syncfs`]).
    pub object_sync: Option<ObjectSyncConfig>,
}

pub(super) fn config_error(reason: impl Into<String>) -> Error {
    Error::StoreConfig {
        reason: reason.into(),
    }
}

impl StoreConfig {
    /// Builds a new configuration (fresh random `store_uuid`) from init options.
    ///
    /// Errors: [`Error::StoreConfig`] for an unusable `--objects`/`--endpoint`/`--region`, or
    /// cache options without S3.
    pub fn from_init(options: &InitOptions) -> Result<StoreConfig> {
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).map_err(|e| config_error(format!("no randomness: {e}")))?;
        let store_uuid = objstore::hex_lower(&raw);
        let (objects, cache) = match &options.objects {
            None => {
                if options.endpoint.is_some()
                    || options.region.is_some()
                    || options.path_style
                    || options.cache_dir.is_some()
                    || options.cache_bytes.is_some()
                {
                    return Err(config_error(
                        "--endpoint, --region, --path-style and --cache-* need --objects s3://bucket/prefix",
                    ));
                }
                (
                    ObjectsConfig::Local {
                        sync: options.object_sync.unwrap_or_default(),
                    },
                    None,
                )
            }
            Some(_) if options.object_sync.is_some() => {
                return Err(config_error(
                    "--object-sync applies to local objects only (not with --objects s3://…)",
                ))
            }
            Some(url) => {
                let mut s3 = S3Config::from_url(url).map_err(|e| config_error(e.to_string()))?;
                s3.endpoint = options.endpoint.clone();
                s3.region = options.region.clone();
                s3.path_style = options.path_style
                    || options
                        .endpoint
                        .as_deref()
                        .is_some_and(endpoint_needs_path_style);
                s3.validate().map_err(|e| config_error(e.to_string()))?;
                let cache = match options.cache_bytes {
                    Some(0) => None,
                    bytes => Some(CacheConfig {
                        dir: options
                            .cache_dir
                            .clone()
                            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE_DIR)),
                        max_bytes: bytes.unwrap_or(DEFAULT_CACHE_BYTES),
                    }),
                };
                (
                    ObjectsConfig::S3 {
                        bucket: s3.bucket,
                        prefix: s3.prefix,
                        endpoint: s3.endpoint,
                        region: s3.region,
                        path_style: s3.path_style,
                    },
                    cache,
                )
            }
        };
        if options.metadata_etcd.is_none()
            && (options.etcd_namespace.is_some() || options.root_name.is_some())
        {
            return Err(config_error(
                "--etcd-namespace and --root need --metadata-etcd",
            ));
        }
        Ok(StoreConfig {
            format: CONFIG_FORMAT.into(),
            version: 1,
            store_uuid,
            objects,
            cache,
            metadata: MetadataConfig::Holt,
        })
    }

    /// Reads `<dir>/nokv-store.json`; `Ok(None)` when the store has no configuration file.
    ///
    /// Errors: [`Error::StoreConfig`] when the file is unreadable, not valid JSON, or has an
    /// unknown format/version/field or a malformed uuid.
    pub fn load(dir: &Path) -> Result<Option<StoreConfig>> {
        let path = dir.join(CONFIG_FILE);
        let text = match fs::read(&path) {
            Ok(t) => t,
            // No store there (also when a path component is a regular file: the caller's
            // create or open of the directory then reports that failure itself).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(config_error(format!("cannot read {CONFIG_FILE}: {e}"))),
        };
        let config: StoreConfig = serde_json::from_slice(&text).map_err(|e| {
            config_error(format!(
                "{CONFIG_FILE} is not a valid store configuration: {e}"
            ))
        })?;
        if config.format != CONFIG_FORMAT || config.version != 1 {
            return Err(config_error(format!(
                "{CONFIG_FILE} has format {:?} version {}; this build reads {CONFIG_FORMAT:?} version 1",
                config.format, config.version
            )));
        }
        if config.store_uuid.len() != 32
            || !config
                .store_uuid
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        {
            return Err(config_error(format!(
                "{CONFIG_FILE} has a malformed store_uuid"
            )));
        }
        Ok(Some(config))
    }

    /// Writes the configuration durably and exactly once: temp file, `fsync`, hard link to
    /// the final name (fails if one exists), directory `fsync`.
    ///
    /// Errors: [`Error::StoreConfig`] when a configuration already exists;
    /// [`Error::InvalidArgument`] when `dir` is, or lies under, a regular file;
    /// [`Error::ReadOnlyStore`]; [`Error::LocalIo`].
    pub fn write_new(&self, dir: &Path) -> Result<()> {
        let io = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::LocalIo { op, path, source }
        };
        fs::create_dir_all(dir).map_err(|source| crate::error::store_dir_error(dir, source))?;
        let target = dir.join(CONFIG_FILE);
        let tmp = dir.join(format!(".{CONFIG_FILE}.tmp-{}", self.store_uuid));
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| config_error(format!("cannot encode the configuration: {e}")))?;
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(&text)?;
                f.write_all(b"\n")?;
                f.sync_all()
            });
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io("write", &tmp)(e));
        }
        let linked = fs::hard_link(&tmp, &target);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(config_error("the store is already initialized"))
            }
            Err(e) => return Err(io("link", &target)(e)),
        }
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("sync", dir))
    }

    /// The same settings, ignoring the store uuid (re-running `init` with the same flags).
    /// For etcd metadata the root id is drawn at init, so only endpoints, namespace and (when
    /// `other` names one) the root name are compared.
    pub(super) fn same_settings(&self, other: &StoreConfig, root_name: Option<&str>) -> bool {
        let metadata_matches = match (&self.metadata, &other.metadata) {
            (
                MetadataConfig::Etcd {
                    endpoints,
                    namespace,
                    root,
                    ..
                },
                MetadataConfig::Etcd {
                    endpoints: e2,
                    namespace: n2,
                    ..
                },
            ) => endpoints == e2 && namespace == n2 && root_name.is_none_or(|r| r == root),
            (a, b) => a == b,
        };
        self.objects == other.objects && self.cache == other.cache && metadata_matches
    }

    /// A one-line description of where objects live (`local` or `s3://bucket/prefix`).
    pub fn describe_objects(&self) -> String {
        match &self.objects {
            ObjectsConfig::Local {
                sync: ObjectSyncConfig::Syncfs,
            } => "local directory objects/".into(),
            ObjectsConfig::Local {
                sync: ObjectSyncConfig::PerFile,
            } => "local directory objects/ (per-file syncs)".into(),
            ObjectsConfig::S3 {
                bucket,
                prefix,
                endpoint,
                ..
            } => {
                let url = S3Config::new(bucket.clone(), prefix.clone()).url();
                match endpoint {
                    Some(ep) => format!("{url} via {ep}"),
                    None => url,
                }
            }
        }
    }
}

/// Is `endpoint`'s host an IP address or `localhost` (virtual-hosted addressing impossible)?
fn endpoint_needs_path_style(endpoint: &str) -> bool {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok()
}

/// What a build without the SDK's `etcd` feature answers for a store whose metadata lives on etcd.
#[cfg(not(feature = "etcd"))]
pub(super) const ETCD_UNSUPPORTED: &str =
    "this build of NoKV has no etcd support (the SDK's `etcd` feature is off; the Python \
     SDK is built without it); open the store with the nokv CLI or through `nokv serve`";

/// The error of opening an etcd-backed store in a build without the `etcd` feature.
#[cfg(not(feature = "etcd"))]
pub(crate) fn etcd_unsupported() -> Error {
    config_error(format!(
        "this store keeps its metadata on etcd: {ETCD_UNSUPPORTED}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_on_ip_or_localhost_implies_path_style() {
        assert!(endpoint_needs_path_style("http://127.0.0.1:9000"));
        assert!(endpoint_needs_path_style("http://localhost:9000/"));
        assert!(endpoint_needs_path_style("http://[::1]:9000"));
        assert!(!endpoint_needs_path_style("https://s3.example.com"));
    }

    #[test]
    fn local_init_has_no_cache_and_rejects_s3_flags() {
        let c = StoreConfig::from_init(&InitOptions::default()).expect("local");
        assert_eq!(
            c.objects,
            ObjectsConfig::Local {
                sync: ObjectSyncConfig::Syncfs
            }
        );
        assert!(c.cache.is_none());
        assert_eq!(c.store_uuid.len(), 32);
        let bad = InitOptions {
            endpoint: Some("http://127.0.0.1:1".into()),
            ..Default::default()
        };
        assert!(matches!(
            StoreConfig::from_init(&bad),
            Err(Error::StoreConfig { .. })
        ));
    }

    #[test]
    fn config_round_trips_and_is_written_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = StoreConfig::from_init(&InitOptions {
            objects: Some("s3://bucket/team/x".into()),
            endpoint: Some("http://127.0.0.1:9000".into()),
            cache_bytes: Some(4096),
            ..Default::default()
        })
        .expect("s3 config");
        assert!(matches!(
            c.objects,
            ObjectsConfig::S3 {
                path_style: true,
                ..
            }
        ));
        c.write_new(dir.path()).expect("first write");
        assert_eq!(
            StoreConfig::load(dir.path()).expect("load"),
            Some(c.clone())
        );
        assert!(matches!(
            c.write_new(dir.path()),
            Err(Error::StoreConfig { .. })
        ));
    }

    #[test]
    fn unknown_config_version_fails_closed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = r#"{"format":"nokv-store-config","version":2,"store_uuid":"00000000000000000000000000000000","objects":{"provider":"local"}}"#;
        fs::write(dir.path().join(CONFIG_FILE), text).expect("write");
        assert!(matches!(
            StoreConfig::load(dir.path()),
            Err(Error::StoreConfig { .. })
        ));
        let text = r#"{"format":"nokv-store-config","version":1,"store_uuid":"00000000000000000000000000000000","objects":{"provider":"ftp"}}"#;
        fs::write(dir.path().join(CONFIG_FILE), text).expect("write");
        assert!(StoreConfig::load(dir.path()).is_err());
    }

    #[test]
    fn local_sync_mode_round_trips_and_defaults_to_syncfs() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A configuration written before the mode existed still parses, as the default.
        let old = r#"{"format":"nokv-store-config","version":1,"store_uuid":"00000000000000000000000000000000","objects":{"provider":"local"}}"#;
        fs::write(dir.path().join(CONFIG_FILE), old).expect("write");
        let loaded = StoreConfig::load(dir.path())
            .expect("load")
            .expect("config");
        assert_eq!(
            loaded.objects,
            ObjectsConfig::Local {
                sync: ObjectSyncConfig::Syncfs
            }
        );
        // The default is not written, so older builds keep reading the file.
        let text = serde_json::to_string(&loaded).expect("encode");
        assert!(text.contains(r#""objects":{"provider":"local"}"#), "{text}");
        let per_file = old.replace(
            r#"{"provider":"local"}"#,
            r#"{"provider":"local","sync":"per_file"}"#,
        );
        fs::write(dir.path().join(CONFIG_FILE), &per_file).expect("write");
        let loaded = StoreConfig::load(dir.path())
            .expect("load")
            .expect("config");
        assert_eq!(
            loaded.objects,
            ObjectsConfig::Local {
                sync: ObjectSyncConfig::PerFile
            }
        );
        // Unknown modes and unknown fields are refused.
        for bad in [
            r#"{"provider":"local","sync":"never"}"#,
            r#"{"provider":"local","sync":"syncfs","fsync":true}"#,
        ] {
            let text = old.replace(r#"{"provider":"local"}"#, bad);
            fs::write(dir.path().join(CONFIG_FILE), &text).expect("write");
            assert!(StoreConfig::load(dir.path()).is_err(), "{bad} accepted");
        }
        assert_eq!("per-file".parse(), Ok(ObjectSyncConfig::PerFile));
        assert_eq!("syncfs".parse(), Ok(ObjectSyncConfig::Syncfs));
        assert!("fsync".parse::<ObjectSyncConfig>().is_err());
    }
}
