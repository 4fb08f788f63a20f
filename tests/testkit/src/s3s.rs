//! A real S3-compatible server on loopback for tests and benchmarks: s3s-fs over a directory.
//!
//! [`S3sFs::start`] finds the `s3s-fs` binary ([`s3s_fs_binary`]: `PATH`, then
//! `$CARGO_HOME/bin`, where `cargo install --locked s3s-fs@0.14.1 --features binary` puts it),
//! creates the bucket directory, starts it on a free loopback port with the given credentials,
//! waits until it accepts connections and kills it when the handle drops.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::etcd::HarnessError;

fn err(msg: impl Into<String>) -> HarnessError {
    HarnessError(msg.into())
}

/// A loopback port that was free a moment ago. Errors: no port could be bound.
pub fn free_port() -> Result<u16, HarnessError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| err(format!("bind 127.0.0.1:0: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| err(format!("local_addr: {e}")))
}

/// Whether `addr` (`host:port`) accepts a TCP connection within `within` (polled every 20 ms).
pub fn wait_tcp(addr: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect(addr).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The s3s-fs binary: on `PATH`, else `$CARGO_HOME/bin` (default `~/.cargo/bin`). Errors: not
/// installed.
pub fn s3s_fs_binary() -> Result<PathBuf, HarnessError> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("s3s-fs"))
                .collect()
        })
        .unwrap_or_default();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(c) = cargo_home {
        candidates.push(c.join("bin").join("s3s-fs"));
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        err("s3s-fs is not installed (cargo install --locked s3s-fs@0.14.1 --features binary)")
    })
}

/// A running s3s-fs, killed when dropped.
#[derive(Debug)]
pub struct S3sFs {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl S3sFs {
    /// Serves `dir` (bucket `bucket` created in it) with the given credentials. Errors: the
    /// binary is missing, it cannot start, or it does not listen within 20 s.
    pub fn start(
        dir: &Path,
        bucket: &str,
        access_key: &str,
        secret_key: &str,
    ) -> Result<S3sFs, HarnessError> {
        let bin = s3s_fs_binary()?;
        std::fs::create_dir_all(dir.join(bucket))
            .map_err(|e| err(format!("create bucket directory: {e}")))?;
        let port = free_port()?;
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", access_key, "--secret-key", secret_key])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| err(format!("start s3s-fs: {e}")))?;
        let mut server = S3sFs {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        if !wait_tcp(&format!("127.0.0.1:{port}"), Duration::from_secs(20)) {
            server.kill();
            return Err(err("s3s-fs did not listen within 20 s"));
        }
        Ok(server)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3sFs {
    fn drop(&mut self) {
        self.kill();
    }
}
