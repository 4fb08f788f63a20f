//! The data path of [`RemoteClient`]: create a workbench, put (bytes or a stream), stat, range
//! and whole reads (resumed across broken connections, fenced by the generation), list, append
//! and the change feed — the same names and types as the embedded [`nokv::Client`].

use std::io::Read;

use serde_json::Value;

use nokv::client::{PutOptions, PutReceipt, WriteCondition};
use nokv::error::{Error, Result};

use crate::client::{Payload, RemoteClient};
use crate::wire::{
    content_range_end, encode_component, encode_path, entry_from_json, envelope_result, field_arg,
    header, is_transport_code, new_request_id, request_id_or_new, server_error,
};

/// Most bytes one range request of a resumed download asks for (one 4 MiB block: the server
/// answers a range from memory).
const RESUME_CHUNK: u64 = 4 << 20;

impl RemoteClient {
    /// Creates a workbench, or finds the visible one (idempotent); returns whether this call
    /// created it.
    ///
    /// Errors: [`Error::OperationFailed`] (`InvalidArguments`, `AlreadyExists` for a reserved
    /// name), [`Error::Connection`], [`Error::Server`].
    pub fn create_workbench(&self, workbench_id: &str) -> Result<bool> {
        let v = self.post_json(
            &format!("/v1/workbenches/{}", encode_component(workbench_id)),
            &Value::Null,
            true,
        )?;
        let v = envelope_result(v)?;
        Ok(v.get("created").and_then(Value::as_bool).unwrap_or(false))
    }

    fn upload_query(options: &PutOptions) -> Result<String> {
        let mut q = vec![
            format!("content_type={}", encode_component(&options.content_type)),
            format!("producer={}", encode_component(&options.producer)),
        ];
        if let WriteCondition::Replace {
            expected_generation,
        } = options.condition
        {
            q.push("replace=true".into());
            if let Some(g) = expected_generation {
                q.push(format!("expected_generation={g}"));
            }
        }
        if let Some(m) = &options.manifest_id {
            q.push(format!("manifest_id={}", encode_component(m)));
        }
        if options.index_json {
            q.push("index_json=true".into());
        }
        if let Some(id) = &options.request_id {
            q.push(format!("request_id={}", objstore::hex_lower(id)));
        }
        if !options.index_fields.is_empty() {
            let specs = options
                .index_fields
                .iter()
                .map(|(k, v)| field_arg(k.as_str(), v))
                .collect::<Result<Vec<String>>>()?;
            let text =
                serde_json::to_string(&specs).map_err(|e| Error::InvalidArgument(e.to_string()))?;
            q.push(format!("fields={}", encode_component(&text)));
        }
        Ok(q.join("&"))
    }

    fn put_receipt(v: Value) -> Result<PutReceipt> {
        let v = envelope_result(v)?;
        let rel = v
            .get("relative_path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(PutReceipt {
            path: nokv::Client::normalize(rel)?,
            generation: v.get("generation").and_then(Value::as_u64).unwrap_or(0),
            size_bytes: v.get("size_bytes").and_then(Value::as_u64).unwrap_or(0),
            digest_uri: v
                .get("digest_uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            content_type: v
                .get("content_type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            created: v.get("created").and_then(Value::as_bool).unwrap_or(false),
            idempotent_replay: v
                .get("idempotent_replay")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Publishes a whole body held in memory (see [`nokv::Client::put`]): retried with the same
    /// request id after a lost response, so it is applied at most once.
    ///
    /// Errors: [`Error::OperationFailed`] with the Workbench code (`NotFound`, `AlreadyExists`,
    /// `Conflict`, `InvalidArguments`, …), [`Error::Connection`], [`Error::Server`].
    pub fn put(
        &self,
        workbench_id: &str,
        path: &str,
        body: &[u8],
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        let target = format!(
            "/v1/workbenches/{}/files/{}?{}",
            encode_component(workbench_id),
            encode_path(path),
            Self::upload_query(options)?
        );
        // The `Idempotency-Key`: the caller's request id (the server then dedupes the put in the
        // store itself, docs/server.md), else a fresh one.
        let key = request_id_or_new(options.request_id.as_ref())?;
        // The declared digest the server checks before publishing: the caller's, else the body's.
        let declared = options
            .expected_digest_uri
            .clone()
            .unwrap_or_else(|| objstore::sha256_uri(body));
        let digest = vec![(nokv_protocol::headers::CONTENT_SHA256, declared)];
        let v = self.retrying(|| {
            let mut reader: &[u8] = body;
            let resp = self.exchange(
                "PUT",
                &target,
                Some(&key),
                &digest,
                Payload::Reader(&mut reader),
            )?;
            self.read_json(resp)
        })?;
        Self::put_receipt(v)
    }

    /// Publishes a body streamed from `reader` (see [`nokv::Client::put_reader`]; memory bounded
    /// by the transfer buffers). Not retried: the stream cannot be replayed — on
    /// [`Error::Connection`] nothing or everything was published (the server publishes only
    /// complete bodies); [`RemoteClient::stat`] tells which — or, with
    /// [`PutOptions::request_id`], simply send the same put again: the store answers the first
    /// receipt (`idempotent_replay`) if the first one was published.
    ///
    /// Errors: as [`RemoteClient::put`].
    pub fn put_reader(
        &self,
        workbench_id: &str,
        path: &str,
        mut reader: impl Read,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        let target = format!(
            "/v1/workbenches/{}/files/{}?{}",
            encode_component(workbench_id),
            encode_path(path),
            Self::upload_query(options)?
        );
        // The `Idempotency-Key`: the caller's request id (the server then dedupes the put in the
        // store itself, docs/server.md), else a fresh one.
        let key = request_id_or_new(options.request_id.as_ref())?;
        // A declared digest is checked by the server before it publishes (see `PutOptions`).
        let declared: Vec<_> = options
            .expected_digest_uri
            .iter()
            .map(|d| (nokv_protocol::headers::CONTENT_SHA256, d.clone()))
            .collect();
        let resp = self.exchange(
            "PUT",
            &target,
            Some(&key),
            &declared,
            Payload::Reader(&mut reader),
        )?;
        Self::put_receipt(self.read_json(resp)?)
    }

    /// The path entry at `path` (live state; see [`nokv::Client::stat`]).
    ///
    /// Errors: [`Error::OperationFailed`] (`NotFound`, …), [`Error::Connection`],
    /// [`Error::Server`].
    pub fn stat(&self, workbench_id: &str, path: &str) -> Result<meta::PathEntry> {
        let target = format!(
            "/v1/workbenches/{}/stat/{}",
            encode_component(workbench_id),
            encode_path(path)
        );
        let v = self.retrying(|| {
            let resp = self.exchange("GET", &target, None, &[], Payload::None)?;
            self.read_envelope(resp)
        })?;
        let v = envelope_result(v)?;
        entry_from_json(v.get("entry").unwrap_or(&Value::Null))
    }

    /// Reads an error-or-success envelope from an endpoint that uses the status line for
    /// operation errors too (the byte endpoints): any JSON envelope is returned as is.
    fn read_envelope(&self, mut resp: ureq::http::Response<ureq::Body>) -> Result<Value> {
        let (status, value) = self.json_body(&mut resp, 64 << 20)?;
        if status == 200 || value.get("code").is_some_and(|c| !is_transport_code(c)) {
            return Ok(value);
        }
        Err(self.refused(status, &value))
    }

    /// Reads `[offset, offset + len)` of the artifact at `path` (live state; verified by the
    /// server block by block). Errors: as [`RemoteClient::stat`], plus
    /// [`Error::RangeOutOfBounds`].
    pub fn read_range(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        if len == 0 {
            let entry = self.stat(workbench_id, path)?;
            if offset > entry.logical_size {
                return Err(Error::RangeOutOfBounds {
                    offset,
                    len,
                    size: entry.logical_size,
                });
            }
            return Ok(Vec::new());
        }
        self.download_range(workbench_id, path, offset, len, None, None)
    }

    /// The non-empty range read behind the `read_range*` methods: downloads
    /// `[offset, offset + len)` (`len > 0`) at `version` / only at `generation` when given and
    /// checks that exactly `len` bytes came back.
    fn download_range(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
        version: Option<u64>,
        generation: Option<u64>,
    ) -> Result<Vec<u8>> {
        let end = offset.checked_add(len - 1).ok_or(Error::RangeOutOfBounds {
            offset,
            len,
            size: 0,
        })?;
        let (bytes, size) = self.download(
            workbench_id,
            path,
            Some((offset, end)),
            version,
            generation,
            &mut |r, out| std::io::copy(r, out),
        )?;
        if bytes.len() as u64 != len {
            return Err(Error::RangeOutOfBounds { offset, len, size });
        }
        Ok(bytes)
    }

    /// Reads `[offset, offset + len)` of the artifact at `path` as of read version `version`
    /// (MVCC: e.g. a leased snapshot's read version, whose history the lease holds). `len = 0`
    /// reads nothing and sends nothing.
    ///
    /// Errors: as [`RemoteClient::read_range`]; a version the store no longer holds fails with
    /// the server's error.
    pub fn read_range_at(
        &self,
        workbench_id: &str,
        path: &str,
        version: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        self.download_range(workbench_id, path, offset, len, Some(version), None)
    }

    /// Reads `[offset, offset + len)` of the artifact at `path` (live state) only while the path
    /// is still at `generation`: the read of a file object pinned to one revision. `len = 0`
    /// reads nothing and sends nothing.
    ///
    /// Errors: [`Error::GenerationConflict`] when the path now holds another generation (it was
    /// replaced or removed and published again; the bytes of the other revision are dropped
    /// unread); otherwise as [`RemoteClient::read_range`].
    pub fn read_range_of_generation(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
        generation: u64,
    ) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        self.download_range(workbench_id, path, offset, len, None, Some(generation))
    }

    /// Reads the whole artifact at `path` (live state).
    ///
    /// Errors: as [`RemoteClient::stat`]; [`Error::OperationFailed`] `ObjectUnavailable` when a
    /// block of the body is lost or damaged (see [`RemoteClient::read_to_writer_at`]).
    pub fn read_all(&self, workbench_id: &str, path: &str) -> Result<Vec<u8>> {
        self.download(workbench_id, path, None, None, None, &mut |r, out| {
            std::io::copy(r, out)
        })
        .map(|(b, _)| b)
    }

    /// Downloads a body (or the inclusive byte range `range`), at `version` when given, through
    /// `copy`; returns the bytes and the body size. With `generation`, a body at another
    /// generation (the server's `x-nokv-generation`) is [`Error::GenerationConflict`], unread.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn download(
        &self,
        workbench_id: &str,
        path: &str,
        range: Option<(u64, u64)>,
        version: Option<u64>,
        generation: Option<u64>,
        copy: &mut dyn FnMut(&mut dyn Read, &mut Vec<u8>) -> std::io::Result<u64>,
    ) -> Result<(Vec<u8>, u64)> {
        let mut target = format!(
            "/v1/workbenches/{}/files/{}",
            encode_component(workbench_id),
            encode_path(path)
        );
        if let Some(v) = version {
            target.push_str(&format!("?version={v}"));
        }
        let extra: Vec<(&str, String)> = range
            .map(|(a, b)| vec![("Range", format!("bytes={a}-{b}"))])
            .unwrap_or_default();
        self.retrying(|| {
            let mut resp = self.exchange("GET", &target, None, &extra, Payload::None)?;
            let status = resp.status().as_u16();
            let size = header(&resp, "content-range")
                .and_then(|v| v.rsplit('/').next())
                .and_then(|v| v.parse().ok())
                .or_else(|| header(&resp, "content-length").and_then(|v| v.parse().ok()))
                .unwrap_or(0u64);
            if let (Some(expected), 200 | 206 | 416) = (generation, status) {
                let actual = header(&resp, "x-nokv-generation").and_then(|v| v.parse::<u64>().ok());
                if actual != Some(expected) {
                    return Err(Error::GenerationConflict {
                        path: path.to_string(),
                        expected: Some(expected),
                        actual,
                    });
                }
            }
            match status {
                200 | 206 => {
                    let start = range.map_or(0, |r| r.0);
                    let end = if status == 200 {
                        Some(size)
                    } else {
                        content_range_end(&resp)
                    };
                    let answered = header(&resp, "x-nokv-generation").map(str::to_string);
                    let mut out = Vec::new();
                    let mut body = resp.body_mut().as_reader();
                    if let Err(e) = copy(&mut body, &mut out) {
                        let at = start + out.len() as u64;
                        self.resume_download(
                            &target,
                            at,
                            end,
                            answered.as_deref(),
                            e,
                            &mut out,
                            &mut |_| {},
                        )?;
                    }
                    Ok((out, size))
                }
                416 => Err(Error::RangeOutOfBounds {
                    offset: range.map_or(0, |r| r.0),
                    len: range.map_or(0, |r| r.1.saturating_sub(r.0) + 1),
                    size,
                }),
                _ => {
                    let v = self.read_envelope(resp)?;
                    envelope_result(v).map(|_| (Vec::new(), size))
                }
            }
        })
    }

    /// Finishes a body download from `target` that broke after its status line, `at` bytes into
    /// the body, with range requests of at most [`RESUME_CHUNK`] bytes up to `end` (exclusive;
    /// the body's size, or the end of the requested range), written to `out`; returns `end`.
    ///
    /// Once the server has sent `200` it can only end a failing stream by cutting the connection
    /// (a block it cannot read, a server that died, a network cut), and bytes it sent just before
    /// may be lost with the connection, so the break offset can lie before the block that
    /// failed. The range requests (the same read version when `target` names one) tell the cases
    /// apart and lose nothing: a block the server cannot serve answers with its error envelope
    /// (`ObjectUnavailable`, reason `object_missing` or `object_damaged`), returned as
    /// [`Error::OperationFailed`]; a transient cut is simply resumed. Each request either
    /// advances or ends the resume, so it ends after at most `(end - at) / RESUME_CHUNK + 1`
    /// requests.
    ///
    /// Errors: [`Error::OperationFailed`] as above; [`Error::Connection`] (retryable) when a
    /// range request cannot connect or breaks too, when `end` is unknown, or when the answer
    /// belongs to another generation than `generation` (the path was replaced meanwhile);
    /// [`Error::LocalIo`] when `out` fails.
    #[allow(clippy::too_many_arguments)]
    fn resume_download(
        &self,
        target: &str,
        mut at: u64,
        end: Option<u64>,
        generation: Option<&str>,
        broke: std::io::Error,
        out: &mut dyn std::io::Write,
        on_progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let broke_at = at;
        let cut = |detail: String| Error::Connection {
            url: self.base.clone(),
            reason: format!("the body download broke after {broke_at} bytes: {broke}{detail}"),
        };
        let Some(end) = end else {
            return Err(cut(String::new()));
        };
        while at < end {
            let last = at.saturating_add(RESUME_CHUNK).min(end) - 1;
            let range = [("Range", format!("bytes={at}-{last}"))];
            let mut resp = match self.exchange("GET", target, None, &range, Payload::None) {
                Ok(r) => r,
                Err(e) => return Err(cut(format!("; resuming it failed: {e}"))),
            };
            if resp.status().as_u16() != 206 {
                return match self.read_envelope(resp).and_then(envelope_result) {
                    Err(e @ Error::OperationFailed { .. }) => Err(e),
                    _ => Err(cut(String::new())),
                };
            }
            if generation.is_some() && header(&resp, "x-nokv-generation") != generation {
                return Err(cut("; the path now holds another generation".into()));
            }
            let bytes = match resp
                .body_mut()
                .with_config()
                .limit(RESUME_CHUNK)
                .read_to_vec()
            {
                Ok(b) if b.len() as u64 == last - at + 1 => b,
                Ok(_) => return Err(cut("; a resumed range came back short".into())),
                Err(e) => return Err(cut(format!("; resuming it broke too: {e}"))),
            };
            out.write_all(&bytes).map_err(|source| Error::LocalIo {
                op: "write",
                path: std::path::PathBuf::from("<output>"),
                source,
            })?;
            at = last + 1;
            on_progress(at);
        }
        Ok(end)
    }

    /// Streams the body of `path` at read version `version` into `out` (materialize); returns
    /// the bytes written.
    ///
    /// A stream the server cuts is finished with range requests (see `resume_download`).
    ///
    /// Errors: as [`RemoteClient::stat`]; [`Error::OperationFailed`] `ObjectUnavailable` when
    /// a block of the body is lost or damaged; [`Error::Connection`] when the stream broke and
    /// could not be resumed.
    pub fn read_to_writer_at(
        &self,
        workbench_id: &str,
        path: &str,
        version: u64,
        out: &mut dyn std::io::Write,
        on_progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let target = format!(
            "/v1/workbenches/{}/files/{}?version={version}",
            encode_component(workbench_id),
            encode_path(path)
        );
        let mut resp = self.exchange("GET", &target, None, &[], Payload::None)?;
        if resp.status().as_u16() != 200 {
            let v = self.read_envelope(resp)?;
            envelope_result(v)?;
            return Ok(0);
        }
        let size = header(&resp, "content-length").and_then(|v| v.parse::<u64>().ok());
        let answered = header(&resp, "x-nokv-generation").map(str::to_string);
        let mut body = resp.body_mut().as_reader();
        let mut buf = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            let n = match body.read(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    return self.resume_download(
                        &target,
                        written,
                        size,
                        answered.as_deref(),
                        e,
                        out,
                        on_progress,
                    )
                }
            };
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n]).map_err(|source| Error::LocalIo {
                op: "write",
                path: std::path::PathBuf::from("<output>"),
                source,
            })?;
            written += n as u64;
            on_progress(written);
        }
        Ok(written)
    }

    /// Every artifact of `workbench_id` under `prefix`, with the read version they were listed
    /// at (see [`nokv::materialize::list_files`]).
    ///
    /// Errors: [`Error::OperationFailed`] (`NotFound`, …), [`Error::Connection`],
    /// [`Error::Server`].
    pub fn list_files(
        &self,
        workbench_id: &str,
        prefix: Option<&str>,
    ) -> Result<(u64, Vec<(meta::NormPath, meta::PathEntry)>)> {
        let mut target = format!("/v1/workbenches/{}/entries", encode_component(workbench_id));
        if let Some(p) = prefix {
            target.push_str(&format!("?prefix={}", encode_component(p)));
        }
        let v = self.retrying(|| {
            let resp = self.exchange("GET", &target, None, &[], Payload::None)?;
            self.read_envelope(resp)
        })?;
        let v = envelope_result(v)?;
        let version = v.get("read_version").and_then(Value::as_u64).unwrap_or(0);
        let mut files = Vec::new();
        for f in v
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let path = f.get("path").and_then(Value::as_str).unwrap_or_default();
            files.push((
                nokv::Client::normalize(path)?,
                entry_from_json(f.get("entry").unwrap_or(&Value::Null))?,
            ));
        }
        Ok((version, files))
    }

    /// Durable idempotent append (see [`nokv::Client::append_idempotent_with_create_type`]) →
    /// the envelope `nokv append` prints (success or error). `create_type`: the content type of
    /// a file the append creates when `content_type` is `None` (server default
    /// `text/plain; charset=utf-8`).
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn append_envelope(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        operation_id: &str,
        content_type: Option<&str>,
        create_type: Option<&str>,
    ) -> Result<Value> {
        let mut target = format!(
            "/v1/workbenches/{}/append/{}?operation_id={}",
            encode_component(workbench_id),
            encode_path(path),
            encode_component(operation_id)
        );
        if let Some(ct) = content_type {
            target.push_str(&format!("&content_type={}", encode_component(ct)));
        }
        if let Some(ct) = create_type {
            target.push_str(&format!("&create_content_type={}", encode_component(ct)));
        }
        let key = new_request_id()?;
        self.retrying(|| {
            let resp = self.exchange("POST", &target, Some(&key), &[], Payload::Bytes(bytes))?;
            self.read_json(resp)
        })
    }

    /// Durable idempotent append returning the receipt fields as the envelope's JSON object
    /// (see [`RemoteClient::append_envelope`]).
    ///
    /// Errors: [`Error::OperationFailed`] with the Workbench code, [`Error::Connection`],
    /// [`Error::Server`].
    pub fn append_idempotent(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        operation_id: [u8; 16],
        content_type: Option<&str>,
    ) -> Result<Value> {
        let hex = objstore::hex_lower(&operation_id);
        envelope_result(self.append_envelope(
            workbench_id,
            path,
            bytes,
            &hex,
            content_type,
            None,
        )?)
    }

    /// Opens the change feed (`GET /v1/changes`) and returns the response reader of its NDJSON
    /// lines (exactly what `nokv changes` prints).
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn changes_stream(&self, query: &str) -> Result<Box<dyn Read + Send>> {
        let target = format!("/v1/changes?{query}");
        let resp = self.exchange("GET", &target, None, &[], Payload::None)?;
        if resp.status().as_u16() != 200 {
            let v = self.read_json(resp)?;
            return Err(server_error(400, &v));
        }
        Ok(Box::new(resp.into_body().into_reader()))
    }
}
