//! The write path of the SDK: [`Client::put`], [`Client::put_reader`] (create-only or
//! generation-CAS replace) and [`Client::append`] — each runs as one durable Publish operation
//! (object-first, metadata-last; docs/design.md, "Immutable Bodies And Publication").

use std::collections::BTreeSet;
use std::io::Read;
use std::path::PathBuf;

use meta::{ArtifactRevisionId, NormPath, PathCondition};

use super::plan::{BodyPlan, OpSpec, Source};
use super::put_request::PutStart;
use crate::client::{
    map_publish_error, map_workspace_error, validate_content_type, AppendReceipt, Client,
    PutOptions, PutReceipt, WriteCondition, MAX_DEPENDENCY_DEPTH, MAX_DEPENDENCY_OWNERS,
};
use crate::error::{Error, Result};
use crate::index_fields::{json_object_fields, IndexFields, MAX_INDEX_JSON_BYTES};

impl Client {
    /// Publishes a whole body held in memory. See [`Client::put_reader`].
    pub fn put(
        &self,
        workbench_id: &str,
        path: &str,
        body: &[u8],
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        self.put_source(workbench_id, path, Source::Slice(body), options)
    }

    /// Publishes a body streamed from `reader` (memory bounded by one block; with
    /// `index_json` the body is buffered, at most 16 MiB).
    ///
    /// The precondition and the index fields are checked before any byte is uploaded and again,
    /// atomically, by the publishing metadata command, which also writes the artifact's
    /// SecondaryIndex rows. Errors: [`Error::WorkbenchNotFound`], [`Error::AlreadyExists`],
    /// [`Error::NotFound`], [`Error::GenerationConflict`], [`Error::DirectoryExists`] (create)
    /// or [`Error::NotArtifact`] (replace) when the path is an implicit directory,
    /// [`Error::NotDirectory`] when a proper prefix of the path is a file (a path is a file or a
    /// directory, never both), [`Error::InvalidPath`] (also for the
    /// reserved run/restore manifests, paths below them, and paths that would shadow a section),
    /// [`Error::InvalidArgument`] for invalid index fields or an `index_json` body that is not a
    /// JSON object (or is larger than 16 MiB), [`Error::ObjectUnavailable`], [`Error::LocalIo`]
    /// when the reader fails.
    pub fn put_reader(
        &self,
        workbench_id: &str,
        path: &str,
        mut reader: impl Read,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        self.put_source(workbench_id, path, Source::Reader(&mut reader), options)
    }

    /// [`Client::put`] / [`Client::put_reader`]: a body in memory stages up to 100 block rows
    /// per metadata command; a stream stages one block at a time.
    fn put_source(
        &self,
        workbench_id: &str,
        path: &str,
        mut source: Source<'_>,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        let path = self.publishable_path(path)?;
        validate_content_type(&options.content_type)?;
        // A request id is decided first: a replay answers before the checks an ordinary put
        // makes against the live state (the path exists now: it is the replayed put's).
        let op = match options.request_id {
            None => OpSpec::fresh(workbench_id, &path)?,
            Some(request_id) => {
                match self.put_request_start(
                    workbench_id,
                    &path,
                    &mut source,
                    options,
                    request_id,
                )? {
                    PutStart::Replay(receipt) => return Ok(receipt),
                    PutStart::Run(op) => op,
                }
            }
        };
        let mut index_fields = options.index_fields.clone();
        let buffered = if options.index_json {
            let body = match source {
                Source::Slice(bytes) => {
                    if bytes.len() > MAX_INDEX_JSON_BYTES {
                        return Err(Error::InvalidArgument(format!(
                            "index_json bodies are at most {MAX_INDEX_JSON_BYTES} bytes; publish larger bodies with explicit index_fields"
                        )));
                    }
                    bytes.to_vec()
                }
                Source::Reader(ref mut reader) => read_capped(*reader, MAX_INDEX_JSON_BYTES)?,
            };
            for (field, value) in json_object_fields(&body)? {
                index_fields.entry(field).or_insert(value);
            }
            Some(body)
        } else {
            None
        };
        meta::index::projection::validate_index_fields(&index_fields)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let read = self.meta().read();
        let ws = read
            .visible_workspace(workbench_id)
            .map_err(|e| map_workspace_error(e, workbench_id))?;
        let current = read.path_entry(&ws.incarnation, &path)?;
        if current.is_none() {
            // The namespace rule, checked before any byte is uploaded (the publishing command
            // repeats it atomically).
            let wanted = match options.condition {
                WriteCondition::Create => PathCondition::Create,
                WriteCondition::Replace { .. } => PathCondition::Replace {
                    expected_generation: 0,
                },
            };
            read.check_creatable(&ws.incarnation, &path)
                .map_err(|e| map_publish_error(e, &path, workbench_id, wanted))?;
        }
        let condition = match (options.condition, &current) {
            (WriteCondition::Create, Some(_)) => {
                return Err(Error::AlreadyExists {
                    path: path.as_str().to_string(),
                })
            }
            (WriteCondition::Create, None) => PathCondition::Create,
            (WriteCondition::Replace { .. }, None) => {
                return Err(Error::NotFound {
                    path: path.as_str().to_string(),
                })
            }
            (
                WriteCondition::Replace {
                    expected_generation,
                },
                Some(entry),
            ) => {
                let expected = expected_generation.unwrap_or(entry.generation);
                if expected != entry.generation {
                    return Err(Error::GenerationConflict {
                        path: path.as_str().to_string(),
                        expected: Some(expected),
                        actual: Some(entry.generation),
                    });
                }
                PathCondition::Replace {
                    expected_generation: expected,
                }
            }
        };
        drop(read);
        let revision_id = ArtifactRevisionId::random()?;
        let plan = BodyPlan {
            op,
            workbench_id: workbench_id.to_string(),
            path: path.clone(),
            condition,
            revision_id,
            base: None,
            dependency_depth: 0,
            content_type: options.content_type.clone(),
            producer: options.producer.clone(),
            manifest_id: options.manifest_id.clone(),
            index_fields,
            hasher: objstore::Sha256Stream::new(),
            expected_digest_uri: options.expected_digest_uri.clone(),
        };
        let published = match &buffered {
            Some(body) => self.publish_body(plan, Source::Slice(body))?,
            None => self.publish_body(plan, source)?,
        };
        let receipt = published.receipt;
        Ok(PutReceipt {
            path,
            generation: receipt.generation,
            size_bytes: receipt.entry.logical_size,
            digest_uri: receipt.entry.body_digest_uri.clone(),
            content_type: options.content_type.clone(),
            created: receipt.created,
            idempotent_replay: false,
        })
    }

    /// Appends `bytes` to the artifact at `path`, creating it when missing.
    ///
    /// The new revision reuses the base revision's blocks (immutable segments) and adds blocks for
    /// the appended bytes only; it is published under a generation CAS, retried a bounded number
    /// of times when another writer moved the path. When the reuse would exceed 64 distinct owner
    /// revisions or a dependency depth of 8, the whole body is rematerialised under the new
    /// revision with zero dependencies (docs/metadata-format.md, "Upload And Append").
    ///
    /// `content_type`: `None` keeps the existing type (or `text/plain; charset=utf-8` on create).
    ///
    /// Errors: [`Error::WorkbenchNotFound`], [`Error::NotArtifact`] when the path is an implicit
    /// directory, [`Error::NotDirectory`] when a proper prefix of it is a file,
    /// [`Error::GenerationConflict`] after the bounded retries, [`Error::InvalidPath`],
    /// [`Error::InvalidArgument`], [`Error::ObjectUnavailable`].
    pub fn append(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        content_type: Option<&str>,
        producer: &str,
    ) -> Result<AppendReceipt> {
        self.append_with_create_type(
            workbench_id,
            path,
            bytes,
            content_type,
            crate::json::payload::TEXT_CONTENT_TYPE,
            producer,
        )
    }

    /// Like [`Client::append`], but `create_type` is the content type used when the append
    /// creates the artifact and `content_type` is `None` (the Workbench facade passes the
    /// payload's default: text or `application/octet-stream`). Decided inside the same read as
    /// the append itself, so no extra lookup is needed.
    pub fn append_with_create_type(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        content_type: Option<&str>,
        create_type: &str,
        producer: &str,
    ) -> Result<AppendReceipt> {
        let path = self.publishable_path(path)?;
        if let Some(ct) = content_type {
            validate_content_type(ct)?;
        }
        let delta_digest_uri = objstore::sha256_uri(bytes);
        const ATTEMPTS: usize = 8;
        let mut last_conflict = None;
        for _ in 0..ATTEMPTS {
            match self.append_once(
                workbench_id,
                &path,
                bytes,
                content_type,
                create_type,
                producer,
                OpSpec::fresh(workbench_id, &path)?,
            ) {
                Ok(receipt) => {
                    return Ok(AppendReceipt {
                        delta_digest_uri,
                        ..receipt
                    })
                }
                Err(err @ Error::GenerationConflict { .. }) => last_conflict = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last_conflict.unwrap_or(Error::Busy))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append_once(
        &self,
        workbench_id: &str,
        path: &NormPath,
        bytes: &[u8],
        content_type: Option<&str>,
        create_type: &str,
        producer: &str,
        op: OpSpec,
    ) -> Result<AppendReceipt> {
        let read = self.meta().read();
        let ws = read
            .visible_workspace(workbench_id)
            .map_err(|e| map_workspace_error(e, workbench_id))?;
        let base = read.path_entry(&ws.incarnation, path)?;
        if base.is_none() {
            // The namespace rule, checked before any byte is uploaded (the publishing command
            // repeats it atomically).
            let append = PathCondition::Append {
                expected_generation: None,
            };
            read.check_creatable(&ws.incarnation, path)
                .map_err(|e| map_publish_error(e, path, workbench_id, append))?;
        }
        let revision_id = ArtifactRevisionId::random()?;
        // An append extends the same artifact: its custom index fields carry over.
        let index_fields = match &base {
            Some(entry) => meta::index::projection::decode_projection(&entry.index_projection)?,
            None => IndexFields::new(),
        };
        let mut plan = BodyPlan {
            op,
            workbench_id: workbench_id.to_string(),
            path: path.clone(),
            condition: PathCondition::Append {
                expected_generation: None,
            },
            revision_id,
            base: None,
            dependency_depth: 0,
            content_type: content_type.unwrap_or(create_type).to_string(),
            producer: producer.to_string(),
            manifest_id: None,
            index_fields,
            hasher: objstore::Sha256Stream::new(),
            expected_digest_uri: None,
        };
        let published = match &base {
            None => {
                drop(read);
                self.publish_body(plan, Source::Slice(bytes))?
            }
            Some(entry) => {
                let base_rows = read.manifest(&entry.artifact_revision_id)?;
                plan.content_type = content_type.unwrap_or(&entry.content_type).to_string();
                plan.condition = PathCondition::Append {
                    expected_generation: Some(entry.generation),
                };
                // Distinct physical owners and the depth the new revision would have.
                let mut owners: BTreeSet<ArtifactRevisionId> = BTreeSet::new();
                for row in &base_rows {
                    owners.insert(row.physical_owner_revision);
                }
                let mut max_owner_depth = 0u32;
                for owner in &owners {
                    let rev = read.revision(owner)?.ok_or_else(|| {
                        Error::ObjectUnavailable(
                            "a base revision of the artifact is missing".into(),
                        )
                    })?;
                    max_owner_depth = max_owner_depth.max(rev.dependency_depth);
                }
                drop(read);
                let depth = if owners.is_empty() {
                    0
                } else {
                    max_owner_depth + 1
                };
                let over_limit =
                    owners.len() > MAX_DEPENDENCY_OWNERS || depth > MAX_DEPENDENCY_DEPTH;
                if over_limit {
                    // Rematerialise: copy the whole base body plus the delta under the new
                    // revision (streamed block by block, each staged before it is sent).
                    let base_body = self.read_rows(&base_rows, 0, entry.logical_size)?;
                    let mut chained = std::io::Read::chain(&base_body[..], bytes);
                    self.publish_body(plan, Source::Reader(&mut chained))?
                } else {
                    // Whole-body digest: hash the base body (verified block by block) plus the
                    // delta (O(body) per append; see the crate docs).
                    for row in &base_rows {
                        let block = objstore::get_verified(
                            self.objects().as_ref(),
                            &row.object_key,
                            row.length,
                            &row.digest_uri,
                        )?;
                        plan.hasher.update(&block);
                    }
                    plan.base = Some(meta::codec::PublishBase {
                        revision: entry.artifact_revision_id,
                        row_count: base_rows.len() as u64,
                        logical_size: entry.logical_size,
                    });
                    plan.dependency_depth = depth;
                    self.publish_body(plan, Source::Slice(bytes))?
                }
            }
        };
        let receipt = published.receipt;
        Ok(AppendReceipt {
            path: path.clone(),
            generation: receipt.generation,
            appended_bytes: bytes.len() as u64,
            size_bytes: receipt.entry.logical_size,
            created: base.is_none(),
            delta_digest_uri: String::new(),
            body_digest_uri: receipt.entry.body_digest_uri.clone(),
            content_type: receipt.entry.content_type.clone(),
            dependency_count: receipt.entry.dependency_count,
            dependency_depth: receipt.entry.dependency_depth,
            idempotent_replay: false,
        })
    }
}

/// Reads the whole of `reader`, refusing more than `max` bytes with [`Error::InvalidArgument`].
fn read_capped(reader: &mut dyn Read, max: usize) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    reader
        .take(max as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|source| Error::LocalIo {
            op: "read body",
            path: PathBuf::from("<input>"),
            source,
        })?;
    if body.len() > max {
        return Err(Error::InvalidArgument(format!(
            "index_json bodies are at most {max} bytes; publish larger bodies with explicit index_fields"
        )));
    }
    Ok(body)
}
