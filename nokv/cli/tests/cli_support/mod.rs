//! The harness the CLI and server tests share: a `nokv serve` in the test process and one run of
//! the `nokv` binary.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use nokv_server::{RunningServer, ServerOptions};

/// Starts `nokv serve` on `store` at a free loopback port, its background passes (maintenance,
/// recovery) off so that only the test's calls change the store.
pub fn server(store: &Path) -> RunningServer {
    nokv_server::start(ServerOptions {
        store: store.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .expect("start nokv serve")
}

/// Runs the `nokv` binary with `target` (`--store DIR` or `--server URL`) then `args`, with
/// neither `NOKV_SERVER` nor `NOKV_STORE` inherited and stdin closed; waits for it.
pub fn nokv(target: &[&str], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(target)
        .args(args)
        .env_remove("NOKV_SERVER")
        .env_remove("NOKV_STORE")
        .output()
        .expect("run nokv")
}

/// The `(code, message)` of an operation error a remote call returned; panics on any other error.
pub fn operation_failure(e: nokv::Error) -> (String, String) {
    match e {
        nokv::Error::OperationFailed { code, message } => (code, message),
        other => panic!("expected an operation error, got {other:?}"),
    }
}
