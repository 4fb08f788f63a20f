//! A line-oriented JSON-RPC client for a `nokv mcp` child process, shared by the MCP tests.
//!
//! Every wait is bounded (a hung server fails the test instead of hanging it).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Longest wait for one answer or for the process to exit.
pub const WAIT: Duration = Duration::from_secs(60);

/// The `nokv` binary under test.
pub fn nokv_bin() -> &'static str {
    env!("CARGO_BIN_EXE_nokv")
}

/// A running `nokv mcp` with piped stdio.
pub struct McpChild {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    /// Every stdout line seen so far (protocol messages only, if the server is correct).
    pub seen: Vec<String>,
    next_id: u64,
}

impl McpChild {
    /// Spawns `nokv <args…>` with extra environment variables.
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> McpChild {
        let mut cmd = Command::new(nokv_bin());
        cmd.args(args)
            .env_remove("NOKV_SERVER")
            .env_remove("NOKV_TOKEN")
            .env_remove("NOKV_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn nokv mcp");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, stderr_lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if etx.send(line).is_err() {
                    break;
                }
            }
        });
        McpChild {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: stderr_lines,
            seen: Vec::new(),
            next_id: 1,
        }
    }

    /// Spawns `nokv --store DIR mcp`.
    pub fn embedded(store: &std::path::Path) -> McpChild {
        McpChild::spawn(
            &["--store", store.to_str().expect("utf-8 path"), "mcp"],
            &[],
        )
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one raw line to stdin.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write stdin");
        stdin.write_all(b"\n").expect("write newline");
        stdin.flush().expect("flush stdin");
    }

    /// Sends a request and returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&msg.to_string());
        id
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str) {
        let msg = json!({"jsonrpc": "2.0", "method": method});
        self.send_line(&msg.to_string());
    }

    /// The next stdout message (parsed), within [`WAIT`].
    pub fn next_message(&mut self) -> Value {
        let line = match self.lines.recv_timeout(WAIT) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => panic!("no message from nokv mcp within {WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("nokv mcp closed stdout; stderr: {}", self.stderr_text())
            }
        };
        self.seen.push(line.clone());
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// Waits for the response with `id`, returning the whole JSON-RPC message. Other messages
    /// (notifications, other ids) are collected in `others`.
    pub fn response_to(&mut self, id: u64, others: &mut Vec<Value>) -> Value {
        loop {
            let msg = self.next_message();
            if msg.get("id").and_then(Value::as_u64) == Some(id) {
                return msg;
            }
            others.push(msg);
        }
    }

    /// Sends a request and returns its `result` (panics on a JSON-RPC error).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let msg = self.response_to(id, &mut Vec::new());
        match msg.get("result") {
            Some(r) => r.clone(),
            None => panic!("{method} failed: {msg}"),
        }
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self) -> Value {
        let result = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "nokv-tests", "version": "0"}
            }),
        );
        self.notify("notifications/initialized");
        result
    }

    /// `tools/call` of `tool` with `arguments`; returns the call result.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// Closes stdin (EOF for the server).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits for the process to exit within [`WAIT`] (kills it and panics otherwise); collects
    /// any remaining stdout lines into `seen`.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Drain what the reader thread still holds.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
                    self.seen.push(line);
                }
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("nokv mcp did not exit within {WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        let mut out = String::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

impl Drop for McpChild {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `structuredContent` of a call result, checking the MCP result shape on the way: one text
/// content block holding the same envelope as compact JSON, and `isError` exactly when the
/// envelope is an error.
pub fn envelope_of(result: &Value) -> Value {
    let structured = result
        .get("structuredContent")
        .cloned()
        .unwrap_or_else(|| panic!("no structuredContent in {result}"));
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1, "one content block: {result}");
    assert_eq!(content[0]["type"], "text");
    let text: Value =
        serde_json::from_str(content[0]["text"].as_str().expect("text")).expect("text is JSON");
    assert_eq!(
        text, structured,
        "text and structuredContent carry one envelope"
    );
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    assert_eq!(
        is_error,
        structured["status"] != "success",
        "isError matches the envelope status: {result}"
    );
    structured
}

/// `nokv schema` output of the binary under test.
pub fn nokv_schema() -> Value {
    let out = Command::new(nokv_bin())
        .arg("schema")
        .output()
        .expect("run nokv schema");
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).expect("schema JSON")
}
