//! Store configuration persisted at store creation (`nokv init`), and the object-namespace
//! marker that ties a store to its object namespace.
//!
//! # `<store>/nokv-store.json`
//!
//! Written once by [`init_store`] (temp file + `fsync` + rename + directory `fsync`), read by
//! every [`crate::client::Client::open`]. A store directory without the file is an embedded store on
//! the local directory `<store>/objects` (every store created before `nokv init` existed).
//!
//! ```json
//! {
//!   "format": "nokv-store-config",
//!   "version": 1,
//!   "store_uuid": "5f0c3e0d9a7b4c21b1e2d3f4a5b6c7d8",
//!   "objects": {
//!     "provider": "s3",
//!     "bucket": "research",
//!     "prefix": "team-a/nokv",
//!     "endpoint": "http://127.0.0.1:9000",
//!     "region": "us-east-1",
//!     "path_style": true
//!   },
//!   "cache": { "dir": "cache", "max_bytes": 1073741824 }
//! }
//! ```
//!
//! A store whose metadata lives in etcd (`nokv init --metadata-etcd URLS`) also carries
//!
//! ```json
//!   "metadata": {
//!     "engine": "etcd",
//!     "endpoints": ["http://127.0.0.1:2379"],
//!     "namespace": "/nokv/",
//!     "root": "team-a",
//!     "root_id": "9f2c…"
//!   }
//! ```
//!
//! naming the control plane (see [`crate::control`]) that holds the root's RootPlacement and its
//! logical shard's records; without it the metadata is the holt database in `<store>/meta`.
//!
//! `objects` is `{"provider": "local"}` for the local directory, `{"provider": "local", "sync":
//! "per_file"}` for one that makes objects durable with an `fsync` per file and directory
//! instead of the default shared `syncfs` group flush (`"sync": "syncfs"`, also what a file
//! without `sync` means; see [`objstore::ObjectSync`]). `store_uuid` is 16 random
//! bytes as 32 lowercase hex characters. `cache` (S3 only; `null` disables it) names the local
//! block cache directory (relative paths are relative to the store directory) and its byte
//! bound. Credentials are never written: they come from the standard AWS chain at open.
//! Unknown `format`/`version` values and unknown fields are refused (fail closed).
//!
//! # Object-namespace marker
//!
//! [`MARKER_KEY`] (`nokv/namespace.json`, i.e. `<prefix>/nokv/namespace.json` in the bucket) is
//! created with put-if-absent at init and holds `{"format": "nokv-object-namespace",
//! "version": 1, "store_uuid": "…"}`. Every open of a configured store reads it and refuses the
//! store ([`crate::error::Error::NamespaceMismatch`]) when it is missing or names another store, so
//! a store pointed at the wrong bucket/prefix never publishes into, or trusts, a foreign
//! namespace.
//!
//! ```text
//! store_config/
//!   config.rs   the file: StoreConfig and its parts, InitOptions, load and write_new
//!   objects.rs  the configured object provider and the namespace marker
//!   init.rs     init_store (`nokv init`), which ends by opening the new store
//! ```

pub(crate) mod config;
mod init;
pub(crate) mod objects;

pub use config::{
    CacheConfig, InitOptions, MetadataConfig, ObjectSyncConfig, ObjectsConfig, StoreConfig,
    CONFIG_FILE, CONFIG_FORMAT, DEFAULT_CACHE_BYTES, DEFAULT_CACHE_DIR, MARKER_FORMAT, MARKER_KEY,
};
pub use init::{init_store, InitOutcome};
pub use objects::{open_objects, open_objects_read_only, prepare_served_root};
