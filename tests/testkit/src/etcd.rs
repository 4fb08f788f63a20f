//! A real etcd cluster on loopback for tests.
//!
//! [`EtcdCluster::start`] launches `members` etcd processes (the `etcd` binary on `PATH`, or
//! `$NOKV_ETCD_BIN`) with free loopback client and peer ports, waits until every member answers
//! `GET /health` with `"health":"true"`, and returns a handle. Dropping the handle kills every
//! member and removes the data directories.
//!
//! # No leaked processes
//!
//! Each member runs under a tiny `sh` guard whose standard input is a pipe held by the test
//! process. The guard starts etcd in the background, prints its pid, then reads commands
//! (`kill`, `stop`, `cont`, `forget`) from the pipe. When the pipe closes — the handle dropped,
//! or the test process exited or was killed without running destructors — the guard kills etcd
//! with SIGKILL and removes the member's data directory. A cluster therefore never outlives
//! the process that started it, even when it lives in a `static` ([`shared`]).
//!
//! # Where the data lives
//!
//! Under `$NOKV_TEST_ETCD_DIR` when set, else `/dev/shm` when it is a writable directory (tmpfs:
//! the tests inject process kills, not power loss, and fsync on a shared disk would dominate
//! their run time), else the system temp directory.
//!
//! # Server limits
//!
//! Members start with the limits NoKV documents for etcd-backed shards
//! ([`ClusterOptions::default`]: `--max-txn-ops 16384`, `--max-request-bytes 33554432`) and
//! never with auto-compaction (NoKV compacts history itself, below every shard's history floor).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Why a cluster could not be started or driven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessError(pub String);

impl std::fmt::Display for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HarnessError {}

fn err(reason: impl Into<String>) -> HarnessError {
    HarnessError(reason.into())
}

/// How to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of members (1 ..= 7).
    pub members: usize,
    /// `--max-txn-ops`: most operations (compares, or success ops, or failure ops) of one
    /// transaction.
    pub max_txn_ops: u32,
    /// `--max-request-bytes`: largest request a member accepts, in bytes.
    pub max_request_bytes: u64,
    /// `--quota-backend-bytes` (`None`: etcd's default, 2 GiB).
    pub quota_backend_bytes: Option<u64>,
    /// How long to wait for every member to report healthy.
    pub start_timeout: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            members: 3,
            max_txn_ops: 16_384,
            max_request_bytes: 32 * 1024 * 1024,
            quota_backend_bytes: None,
            start_timeout: Duration::from_secs(60),
        }
    }
}

/// The guard process of one running member.
struct Guard {
    wrapper: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    etcd_pid: u32,
}

impl Guard {
    fn send(&mut self, cmd: &str) -> Result<(), HarnessError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| err("member guard already closed"))?;
        stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| err(format!("member guard pipe: {e}")))
    }

    /// Closes the pipe (the guard kills etcd; removes the data unless told to `forget`) and
    /// reaps the guard.
    fn close(mut self) {
        drop(self.stdin.take());
        let _ = self.wrapper.wait();
    }
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    guard: Option<Guard>,
}

/// A running etcd cluster on loopback (see the module docs). Killed on drop.
pub struct EtcdCluster {
    root: PathBuf,
    token: String,
    options: ClusterOptions,
    members: Vec<Mutex<Member>>,
}

impl std::fmt::Debug for EtcdCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCluster")
            .field("root", &self.root)
            .field("endpoints", &self.endpoints())
            .finish()
    }
}

const GUARD_SCRIPT: &str = r#"
"$NOKV_ETCD_BIN" "$@" >>"$NOKV_ETCD_LOG" 2>&1 &
pid=$!
echo "$pid"
keep=""
while read -r cmd; do
  case "$cmd" in
    kill) kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""; echo done ;;
    stop) kill -STOP "$pid" 2>/dev/null; echo done ;;
    cont) kill -CONT "$pid" 2>/dev/null; echo done ;;
    forget) keep=1; break ;;
  esac
done
if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
if [ -z "$keep" ]; then
  rm -rf "$NOKV_ETCD_MEMBER_DIR" "$NOKV_ETCD_LOG"
  rmdir "$(dirname "$NOKV_ETCD_MEMBER_DIR")" 2>/dev/null
fi
"#;

/// Whether an etcd test must return early because etcd is not installed here: `true` (after
/// printing why on stderr) when no etcd binary is found ([`etcd_binary`]) and
/// `$NOKV_REQUIRE_ETCD` is unset, so `cargo test --workspace` passes on a machine without
/// etcd. With `NOKV_REQUIRE_ETCD=1` (`.ci/run` sets it) a missing binary panics instead: CI
/// never skips. `false` when the binary is present (the test then fails, never skips, if the
/// cluster cannot start).
///
/// Use as the first line of every test that starts etcd:
/// `if testkit::etcd::skip_without_etcd() { return; }`
pub fn skip_without_etcd() -> bool {
    match etcd_binary() {
        Ok(_) => false,
        Err(e) if std::env::var_os("NOKV_REQUIRE_ETCD").is_some_and(|v| !v.is_empty()) => {
            panic!("NOKV_REQUIRE_ETCD is set but etcd cannot run: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}; set NOKV_REQUIRE_ETCD=1 to make this a failure");
            true
        }
    }
}

/// The etcd binary: `$NOKV_ETCD_BIN`, else `etcd` on `PATH`.
pub fn etcd_binary() -> Result<PathBuf, HarnessError> {
    if let Ok(bin) = std::env::var("NOKV_ETCD_BIN") {
        if !bin.is_empty() {
            return Ok(PathBuf::from(bin));
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            err("the etcd binary is not on PATH (install Debian's etcd-server, or set NOKV_ETCD_BIN)")
        })
}

fn data_root() -> PathBuf {
    if let Ok(d) = std::env::var("NOKV_TEST_ETCD_DIR") {
        if !d.is_empty() {
            return PathBuf::from(d);
        }
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
        && tempdir_in(shm, "probe").is_ok_and(|p| std::fs::remove_dir(p).is_ok())
    {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

fn random_tag() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

fn tempdir_in(parent: &Path, what: &str) -> Result<PathBuf, HarnessError> {
    for _ in 0..16 {
        let dir = parent.join(format!("nokv-etcd-{what}-{}", random_tag()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(err(format!("cannot create {}: {e}", dir.display()))),
        }
    }
    Err(err("cannot create a unique temporary directory"))
}

// Member ports come from `crate::s3s::free_port`: the listener is closed before etcd binds it;
// a lost race makes the member fail to start and the cluster start is retried.
use crate::s3s::free_port;

/// `GET /health` on a member's client port; true when it reports `"health":"true"`.
fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    let req =
        format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut body = String::new();
    let _ = s.take(64 * 1024).read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

impl EtcdCluster {
    /// Starts a cluster with [`ClusterOptions::default`] and `members` members.
    ///
    /// Errors: [`HarnessError`] when etcd is missing or the cluster does not become healthy
    /// (after a few attempts with fresh ports), with the tail of a member log.
    pub fn start(members: usize) -> Result<EtcdCluster, HarnessError> {
        Self::start_with(ClusterOptions {
            members,
            ..ClusterOptions::default()
        })
    }

    /// Starts a cluster with explicit options (see [`EtcdCluster::start`]).
    pub fn start_with(options: ClusterOptions) -> Result<EtcdCluster, HarnessError> {
        if !(1..=7).contains(&options.members) {
            return Err(err("an etcd test cluster has 1 ..= 7 members"));
        }
        let bin = etcd_binary()?;
        let mut last = err("no attempt made");
        for _ in 0..4 {
            match Self::try_start(&bin, &options) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn try_start(bin: &Path, options: &ClusterOptions) -> Result<EtcdCluster, HarnessError> {
        let root = tempdir_in(&data_root(), "cluster")?;
        let token = format!("nokv-test-{}", random_tag());
        let mut members = Vec::with_capacity(options.members);
        for i in 0..options.members {
            let name = format!("m{i}");
            let data_dir = root.join(&name);
            std::fs::create_dir_all(&data_dir)
                .map_err(|e| err(format!("cannot create {}: {e}", data_dir.display())))?;
            members.push(Member {
                log: root.join(format!("{name}.log")),
                name,
                client_port: free_port()?,
                peer_port: free_port()?,
                data_dir,
                guard: None,
            });
        }
        let cluster = EtcdCluster {
            root,
            token,
            options: options.clone(),
            members: members.into_iter().map(Mutex::new).collect(),
        };
        let initial = cluster.initial_cluster();
        for m in &cluster.members {
            let mut m = m.lock().map_err(|_| err("member lock poisoned"))?;
            let guard = spawn_member(bin, &m, &initial, &cluster.token, options, "new")?;
            m.guard = Some(guard);
        }
        cluster.wait_healthy(0..options.members)?;
        Ok(cluster)
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .filter_map(|m| m.lock().ok())
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn wait_healthy(&self, which: std::ops::Range<usize>) -> Result<(), HarnessError> {
        let deadline = Instant::now() + self.options.start_timeout;
        for i in which {
            let (port, log) = {
                let m = self.member(i)?;
                (m.client_port, m.log.clone())
            };
            loop {
                if healthy(port) {
                    break;
                }
                if Instant::now() >= deadline {
                    let tail = std::fs::read_to_string(&log)
                        .map(|t| {
                            let lines: Vec<&str> = t.lines().collect();
                            lines[lines.len().saturating_sub(15)..].join("\n")
                        })
                        .unwrap_or_default();
                    return Err(err(format!(
                        "etcd member m{i} (client port {port}) did not become healthy within {:?}; log tail:\n{tail}",
                        self.options.start_timeout
                    )));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    fn member(&self, i: usize) -> Result<std::sync::MutexGuard<'_, Member>, HarnessError> {
        self.members
            .get(i)
            .ok_or_else(|| err(format!("no member {i}")))?
            .lock()
            .map_err(|_| err("member lock poisoned"))
    }

    /// Client URLs of every member (`http://127.0.0.1:PORT`), in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .filter_map(|m| m.lock().ok())
            .map(|m| format!("http://127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// Client URL of member `i`.
    ///
    /// Errors: no such member.
    pub fn endpoint(&self, i: usize) -> Result<String, HarnessError> {
        Ok(format!("http://127.0.0.1:{}", self.member(i)?.client_port))
    }

    /// The options the cluster was started with.
    pub fn options(&self) -> &ClusterOptions {
        &self.options
    }

    /// Whether member `i` answers `GET /health` with `"health":"true"` right now.
    pub fn is_healthy(&self, i: usize) -> bool {
        self.member(i)
            .map(|m| healthy(m.client_port))
            .unwrap_or(false)
    }

    /// Waits (bounded by the start timeout) until member `i` reports healthy, e.g. after a
    /// leader election.
    ///
    /// Errors: the member stays unhealthy for the whole start timeout.
    pub fn wait_member_healthy(&self, i: usize) -> Result<(), HarnessError> {
        self.wait_healthy(i..i + 1)
    }

    /// Process id of member `i`'s etcd process (`None` when it is not running).
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.member(i).ok()?.guard.as_ref().map(|g| g.etcd_pid)
    }

    fn command(&self, i: usize, cmd: &str) -> Result<(), HarnessError> {
        let mut m = self.member(i)?;
        let guard = m
            .guard
            .as_mut()
            .ok_or_else(|| err(format!("member {i} is not running")))?;
        guard.send(cmd)?;
        let mut line = String::new();
        guard
            .stdout
            .read_line(&mut line)
            .map_err(|e| err(format!("member guard pipe: {e}")))?;
        if line.trim() != "done" {
            return Err(err(format!("member guard answered {line:?} to {cmd}")));
        }
        Ok(())
    }

    /// Kills member `i`'s etcd process with SIGKILL and waits until it is gone. Its data
    /// directory stays, so [`EtcdCluster::restart_member`] can bring it back.
    ///
    /// Errors: no such member, or it is not running.
    pub fn kill_member(&self, i: usize) -> Result<(), HarnessError> {
        self.command(i, "kill")?;
        let mut m = self.member(i)?;
        if let Some(g) = m.guard.take() {
            // The guard keeps the data directory when told to forget the member.
            let mut g = g;
            let _ = g.send("forget");
            g.close();
        }
        Ok(())
    }

    /// Freezes member `i` with SIGSTOP (it keeps its sockets but answers nothing).
    ///
    /// Errors: no such member, or it is not running.
    pub fn stop_member(&self, i: usize) -> Result<(), HarnessError> {
        self.command(i, "stop")
    }

    /// Resumes a member frozen by [`EtcdCluster::stop_member`] with SIGCONT.
    ///
    /// Errors: no such member, or it is not running.
    pub fn continue_member(&self, i: usize) -> Result<(), HarnessError> {
        self.command(i, "cont")
    }

    /// Restarts a killed member from its data directory and waits until it is healthy.
    ///
    /// Errors: no such member, it is still running, or it does not become healthy.
    pub fn restart_member(&self, i: usize) -> Result<(), HarnessError> {
        let bin = etcd_binary()?;
        let initial = self.initial_cluster();
        {
            let mut m = self.member(i)?;
            if m.guard.is_some() {
                return Err(err(format!("member {i} is still running")));
            }
            let guard = spawn_member(&bin, &m, &initial, &self.token, &self.options, "existing")?;
            m.guard = Some(guard);
        }
        self.wait_healthy(i..i + 1)
    }
}

fn spawn_member(
    bin: &Path,
    m: &Member,
    initial_cluster: &str,
    token: &str,
    options: &ClusterOptions,
    state: &str,
) -> Result<Guard, HarnessError> {
    let client = format!("http://127.0.0.1:{}", m.client_port);
    let peer = format!("http://127.0.0.1:{}", m.peer_port);
    let mut args: Vec<String> = vec![
        "--name".into(),
        m.name.clone(),
        "--data-dir".into(),
        m.data_dir.display().to_string(),
        "--listen-client-urls".into(),
        client.clone(),
        "--advertise-client-urls".into(),
        client,
        "--listen-peer-urls".into(),
        peer.clone(),
        "--initial-advertise-peer-urls".into(),
        peer,
        "--initial-cluster".into(),
        initial_cluster.to_owned(),
        "--initial-cluster-token".into(),
        token.to_owned(),
        "--initial-cluster-state".into(),
        state.to_owned(),
        "--max-txn-ops".into(),
        options.max_txn_ops.to_string(),
        "--max-request-bytes".into(),
        options.max_request_bytes.to_string(),
        "--auto-compaction-retention".into(),
        "0".into(),
    ];
    if let Some(q) = options.quota_backend_bytes {
        args.push("--quota-backend-bytes".into());
        args.push(q.to_string());
    }
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(GUARD_SCRIPT)
        .arg("nokv-etcd-guard")
        .args(&args)
        .env("NOKV_ETCD_BIN", bin)
        .env("NOKV_ETCD_LOG", &m.log)
        .env("NOKV_ETCD_MEMBER_DIR", &m.data_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| err(format!("cannot start the etcd guard shell: {e}")))?;
    let stdin = child.stdin.take();
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(err("guard shell has no stdout"));
    };
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    let pid = stdout
        .read_line(&mut line)
        .ok()
        .and_then(|_| line.trim().parse::<u32>().ok());
    let guard = Guard {
        wrapper: child,
        stdin,
        stdout,
        etcd_pid: pid.unwrap_or(0),
    };
    if pid.is_none() {
        guard.close();
        return Err(err("the guard shell did not report the etcd pid"));
    }
    Ok(guard)
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in &self.members {
            if let Ok(mut m) = m.lock() {
                if let Some(g) = m.guard.take() {
                    g.close();
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

static SHARED: OnceLock<Result<EtcdCluster, HarnessError>> = OnceLock::new();

/// One three-member cluster per test process, started at first use and killed when the
/// process exits (through the guards; statics are never dropped). Tests that kill or freeze
/// members start their own cluster instead.
///
/// Errors: the start error, returned to every caller.
pub fn shared() -> Result<&'static EtcdCluster, HarnessError> {
    SHARED
        .get_or_init(|| EtcdCluster::start(3))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid_alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
    }

    #[test]
    fn cluster_starts_healthy_and_drop_kills_every_member() {
        if skip_without_etcd() {
            return;
        }
        let cluster = EtcdCluster::start(3).expect("start");
        let pids: Vec<u32> = (0..3).map(|i| cluster.pid(i).expect("pid")).collect();
        assert!((0..3).all(|i| cluster.is_healthy(i)));
        assert!(pids.iter().all(|p| pid_alive(*p)));
        let root = cluster.root.clone();
        drop(cluster);
        assert!(
            pids.iter().all(|p| !pid_alive(*p)),
            "members outlived the handle"
        );
        assert!(!root.exists(), "data directory left behind");
    }

    #[test]
    fn killed_member_restarts_from_its_data() {
        if skip_without_etcd() {
            return;
        }
        let cluster = EtcdCluster::start(3).expect("start");
        let pid = cluster.pid(1).expect("pid");
        cluster.kill_member(1).expect("kill");
        assert!(!pid_alive(pid));
        assert!(!cluster.is_healthy(1));
        // The survivors keep (or elect) a leader.
        cluster.wait_member_healthy(0).expect("member 0 healthy");
        cluster.wait_member_healthy(2).expect("member 2 healthy");
        cluster.restart_member(1).expect("restart");
        assert!(cluster.is_healthy(1));
    }

    /// Child half of `members_die_with_a_killed_test_process`: starts a cluster, prints the
    /// member pids and data root, then waits to be killed. Does nothing unless the parent set
    /// the variable.
    #[test]
    fn guard_child_process() {
        if skip_without_etcd() {
            return;
        }
        if std::env::var_os("NOKV_TESTKIT_GUARD_CHILD").is_none() {
            return;
        }
        let cluster = EtcdCluster::start(1).expect("start");
        println!(
            "PIDS {} {}",
            cluster.pid(0).expect("pid"),
            cluster.root.display()
        );
        std::thread::sleep(Duration::from_secs(120));
    }

    #[test]
    fn members_die_with_a_killed_test_process() {
        if skip_without_etcd() {
            return;
        }
        let exe = std::env::current_exe().expect("exe");
        let mut child = Command::new(exe)
            .args(["--exact", "etcd::tests::guard_child_process", "--nocapture"])
            .env("NOKV_TESTKIT_GUARD_CHILD", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let (pid, root) = loop {
            line.clear();
            assert!(
                out.read_line(&mut line).expect("read") > 0,
                "child ended early"
            );
            if let Some(rest) = line.trim().strip_prefix("PIDS ") {
                let (pid, root) = rest.split_once(' ').expect("two fields");
                break (pid.parse::<u32>().expect("pid"), PathBuf::from(root));
            }
        };
        assert!(pid_alive(pid));
        child.kill().expect("SIGKILL the test process");
        child.wait().expect("reap");
        // The guard notices the closed pipe and kills etcd; bounded wait for that to happen.
        let deadline = Instant::now() + Duration::from_secs(30);
        while pid_alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!pid_alive(pid), "etcd outlived the killed test process");
        while root.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!root.exists(), "member data left behind");
    }
}
