//! # testkit — services for NoKV's multi-process tests
//!
//! Test-only support shared by the `meta`, `nokv` and `nokv-tests` suites. It depends on no NoKV
//! crate (so every crate can take it as a dev-dependency without a cycle) and on nothing but the
//! standard library.
//!
//! - [`etcd`]: a real etcd cluster (one or three members by default) on loopback ports with its
//!   data in a temporary directory, started from the `etcd` binary on `PATH` and killed when the
//!   handle drops — or, if the test process itself dies, by the per-member guard process that
//!   watches the test process's pipe.
//! - [`s3s`]: an s3s-fs S3-compatible server over a directory on a loopback port, killed on drop,
//!   and the loopback helpers it uses (`free_port`, `wait_tcp`).

#![deny(missing_docs)]

pub mod etcd;
pub mod s3s;
