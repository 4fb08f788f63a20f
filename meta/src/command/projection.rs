//! Index projection at publication (docs/metadata-format.md, "Namespace And Workspace Visibility": "final
//! publication updates PathCurrent and the corresponding SecondaryIndex rows in the same
//! metadata command").
//!
//! One published path carries two kinds of fields:
//!
//! - **built-in fields**, derived from the [`PathEntry`] and always projected: `body_digest_uri`
//!   (string), `content_type` (string), `generation` (uint, the publishing commit version),
//!   `logical_size` (uint, bytes), `manifest_id` (string; only when the entry has one), `path`
//!   (string, the workbench-relative path such as `outputs/summary.json`; only when it fits the
//!   4096-byte value limit), `producer` (string) and `workbench_id` (string);
//! - **custom fields** (`index_fields` of the publication request): at most
//!   [`MAX_CUSTOM_FIELDS`] typed scalars keyed by [`FieldId`], never a built-in name. They are
//!   stored, encoded, in `PathEntry.index_projection` (sorted by field id), so the path record
//!   alone reproduces every index row of the path.
//!
//! Every field becomes one SecondaryIndex row `root | field | encoded value | incarnation |
//! ordered path` whose value is `SecondaryIndexEntry { path_generation, projection: [] }` (the
//! compact projection is empty: queries read the full projection from PathCurrent, which they
//! point-read anyway to recheck the row).
//!
//! [`index_mutations`] is the pure function the publication command uses: from the old and the
//! new PathEntry of one path it derives the puts of every new row and the deletes of every old
//! row whose key is not rewritten — at most `2 × (8 + 64)` mutations, with no read and no scan.

use std::collections::{BTreeMap, BTreeSet};

use crate::codec::field_id::FieldId;
use crate::codec::index_value::{IndexValue, MAX_VARIABLE_VALUE_BYTES};
use crate::codec::secondary_index::{SecondaryIndexEntry, SecondaryIndexKey};
use crate::codec::PathEntry;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{RootId, WorkspaceIncarnationId};
use crate::path::NormPath;
use crate::store::Mutation;

/// Most custom fields one publication may attach.
pub const MAX_CUSTOM_FIELDS: usize = 64;

/// Built-in field ids, sorted.
pub const BUILTIN_FIELDS: [&str; 8] = [
    "body_digest_uri",
    "content_type",
    "generation",
    "logical_size",
    "manifest_id",
    "path",
    "producer",
    "workbench_id",
];

/// Most SecondaryIndex mutations one publication produces (puts of the new rows plus deletes of
/// the old ones).
pub const MAX_INDEX_MUTATIONS: usize = 2 * (BUILTIN_FIELDS.len() + MAX_CUSTOM_FIELDS);

/// Custom index fields of one publication: field id → typed scalar.
pub type IndexFields = BTreeMap<FieldId, IndexValue>;

/// Whether `field` is one of the [`BUILTIN_FIELDS`].
pub fn is_builtin(field: &str) -> bool {
    BUILTIN_FIELDS.contains(&field)
}

/// Validates custom fields: at most [`MAX_CUSTOM_FIELDS`], no built-in name, every value
/// encodable (strings and bytes at most 4096 bytes; floats are finite by construction).
///
/// Errors: [`Error::InvalidArgument`] naming the offending field.
pub fn validate_index_fields(fields: &IndexFields) -> Result<()> {
    if fields.len() > MAX_CUSTOM_FIELDS {
        return Err(Error::invalid(format!(
            "{} index fields given; at most {MAX_CUSTOM_FIELDS} are allowed per artifact",
            fields.len()
        )));
    }
    for (field, value) in fields {
        if is_builtin(field.as_str()) {
            return Err(Error::invalid(format!(
                "index field `{field}` is a built-in field and is set by the store"
            )));
        }
        value.encode().map_err(|e| {
            Error::invalid(format!(
                "index field `{field}` has an unstorable value: {e}"
            ))
        })?;
    }
    Ok(())
}

/// The encoded `PathEntry.index_projection` of custom fields, sorted by field id.
///
/// Errors: as [`validate_index_fields`].
pub fn encode_projection(fields: &IndexFields) -> Result<Vec<(String, Vec<u8>)>> {
    validate_index_fields(fields)?;
    fields
        .iter()
        .map(|(f, v)| Ok((f.as_str().to_owned(), v.encode()?)))
        .collect()
}

/// Decodes a stored `PathEntry.index_projection` back into typed custom fields.
///
/// Errors: [`Error::Codec`] (family `path_current`) for an invalid field id, a malformed value,
/// or fields out of order / repeated.
pub fn decode_projection(projection: &[(String, Vec<u8>)]) -> Result<IndexFields> {
    let mut out = IndexFields::new();
    let mut last: Option<&str> = None;
    for (field, value) in projection {
        if last.is_some_and(|l| l >= field.as_str()) {
            return Err(Error::codec(
                "path_current",
                "index projection fields are not strictly sorted",
            ));
        }
        last = Some(field);
        let id = FieldId::from_stored("path_current", field.as_bytes())?;
        out.insert(id, IndexValue::decode(value)?);
    }
    Ok(out)
}

/// The value of built-in `field` for a path, `None` when the field is not built in or not
/// projected for this entry (no `manifest_id`; a `path` over 4096 bytes).
pub fn builtin_value(
    field: &str,
    workbench_id: &str,
    path: &NormPath,
    entry: &PathEntry,
) -> Option<IndexValue> {
    Some(match field {
        "body_digest_uri" => IndexValue::String(entry.body_digest_uri.clone()),
        "content_type" => IndexValue::String(entry.content_type.clone()),
        "generation" => IndexValue::UInt(entry.generation),
        "logical_size" => IndexValue::UInt(entry.logical_size),
        "manifest_id" => IndexValue::String(entry.manifest_id.clone()?),
        "path" if path.as_str().len() <= MAX_VARIABLE_VALUE_BYTES => {
            IndexValue::String(path.as_str().to_owned())
        }
        "producer" => IndexValue::String(entry.producer.clone()),
        "workbench_id" => IndexValue::String(workbench_id.to_owned()),
        _ => return None,
    })
}

/// Every field of a published path — built-in and custom — sorted by field id.
///
/// Errors: as [`decode_projection`].
pub fn entry_fields(
    workbench_id: &str,
    path: &NormPath,
    entry: &PathEntry,
) -> Result<Vec<(FieldId, IndexValue)>> {
    let mut all: BTreeMap<FieldId, IndexValue> = decode_projection(&entry.index_projection)?;
    for name in BUILTIN_FIELDS {
        if let Some(v) = builtin_value(name, workbench_id, path, entry) {
            // Built-in names are valid field ids; a stored custom field never uses one.
            all.insert(FieldId::new(name)?, v);
        }
    }
    Ok(all.into_iter().collect())
}

/// The SecondaryIndex rows `(key, value)` of one published path.
///
/// Errors: as [`entry_fields`]; [`Error::InvalidArgument`] for an unencodable value.
pub fn index_rows(
    root: &RootId,
    incarnation: &WorkspaceIncarnationId,
    workbench_id: &str,
    path: &NormPath,
    entry: &PathEntry,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let value = SecondaryIndexEntry {
        path_generation: entry.generation,
        projection: Vec::new(),
    }
    .encode();
    entry_fields(workbench_id, path, entry)?
        .into_iter()
        .map(|(index_id, v)| {
            let key = SecondaryIndexKey {
                root: *root,
                index_id,
                value: v,
                incarnation: *incarnation,
                path: path.clone(),
            }
            .encode()?;
            Ok((key, value.clone()))
        })
        .collect()
}

/// The SecondaryIndex mutations that move one path from `old` to `new` (either may be `None`:
/// a first publication, or a removal): a put for every row of `new` and a delete for every row
/// of `old` whose key `new` does not rewrite. Pure: no read, no scan; at most
/// [`MAX_INDEX_MUTATIONS`] mutations.
///
/// Errors: as [`index_rows`].
pub fn index_mutations(
    root: &RootId,
    incarnation: &WorkspaceIncarnationId,
    workbench_id: &str,
    path: &NormPath,
    old: Option<&PathEntry>,
    new: Option<&PathEntry>,
) -> Result<Vec<Mutation>> {
    let new_rows = match new {
        Some(e) => index_rows(root, incarnation, workbench_id, path, e)?,
        None => Vec::new(),
    };
    let new_keys: BTreeSet<&[u8]> = new_rows.iter().map(|(k, _)| k.as_slice()).collect();
    let mut out = Vec::new();
    if let Some(e) = old {
        for (key, _) in index_rows(root, incarnation, workbench_id, path, e)? {
            if !new_keys.contains(key.as_slice()) {
                out.push(Mutation::Delete {
                    family: Family::SecondaryIndex,
                    key,
                });
            }
        }
    }
    for (key, value) in new_rows {
        out.push(Mutation::put(Family::SecondaryIndex, key, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ArtifactRevisionId;
    use crate::path::normalize;

    fn entry(generation: u64, custom: &IndexFields) -> PathEntry {
        PathEntry {
            generation,
            artifact_revision_id: ArtifactRevisionId([9; 16]),
            logical_size: 11,
            body_digest_uri: format!("sha256:{}", "a".repeat(64)),
            manifest_digest_uri: format!("sha256:{}", "b".repeat(64)),
            dependency_count: 0,
            dependency_depth: 0,
            content_type: "application/json".into(),
            producer: "test".into(),
            manifest_id: None,
            created_version: 2,
            modified_version: generation,
            index_projection: encode_projection(custom).unwrap(),
        }
    }

    fn fields(pairs: &[(&str, IndexValue)]) -> IndexFields {
        pairs
            .iter()
            .map(|(k, v)| (FieldId::new(*k).unwrap(), v.clone()))
            .collect()
    }

    fn keys_of(muts: &[Mutation], put: bool) -> Vec<SecondaryIndexKey> {
        muts.iter()
            .filter_map(|m| match m {
                Mutation::Put { family, key, .. } if put => Some((family, key)),
                Mutation::Delete { family, key } if !put => Some((family, key)),
                _ => None,
            })
            .map(|(family, key)| {
                assert_eq!(*family, Family::SecondaryIndex);
                SecondaryIndexKey::decode(key).unwrap()
            })
            .collect()
    }

    #[test]
    fn first_publication_puts_builtin_and_custom_rows_only() {
        let root = RootId([1; 16]);
        let inc = WorkspaceIncarnationId([2; 16]);
        let path = normalize("outputs/summary.json").unwrap();
        let new = entry(
            7,
            &fields(&[("species", IndexValue::String("Gentoo".into()))]),
        );
        let muts = index_mutations(&root, &inc, "run-gentoo", &path, None, Some(&new)).unwrap();
        let puts = keys_of(&muts, true);
        assert!(keys_of(&muts, false).is_empty());
        let names: Vec<&str> = puts.iter().map(|k| k.index_id.as_str()).collect();
        // No manifest_id: that built-in is projected only when present.
        assert_eq!(
            names,
            [
                "body_digest_uri",
                "content_type",
                "generation",
                "logical_size",
                "path",
                "producer",
                "species",
                "workbench_id"
            ]
        );
        let species = puts
            .iter()
            .find(|k| k.index_id.as_str() == "species")
            .unwrap();
        assert_eq!(species.value, IndexValue::String("Gentoo".into()));
        assert_eq!((species.incarnation, &species.path), (inc, &path));
        let gen = puts
            .iter()
            .find(|k| k.index_id.as_str() == "generation")
            .unwrap();
        assert_eq!(gen.value, IndexValue::UInt(7));
    }

    #[test]
    fn replacement_deletes_exactly_the_rows_whose_value_changed() {
        let root = RootId([1; 16]);
        let inc = WorkspaceIncarnationId([2; 16]);
        let path = normalize("outputs/m.json").unwrap();
        let old = entry(
            5,
            &fields(&[
                ("acc", IndexValue::float(0.5).unwrap()),
                ("model", IndexValue::String("a".into())),
                ("gone", IndexValue::Bool(true)),
            ]),
        );
        let new = entry(
            9,
            &fields(&[
                ("acc", IndexValue::float(0.9).unwrap()),
                ("model", IndexValue::String("a".into())),
            ]),
        );
        let muts = index_mutations(&root, &inc, "wb", &path, Some(&old), Some(&new)).unwrap();
        let mut deleted: Vec<(String, IndexValue)> = keys_of(&muts, false)
            .into_iter()
            .map(|k| (k.index_id.as_str().to_owned(), k.value))
            .collect();
        deleted.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            deleted,
            vec![
                ("acc".to_owned(), IndexValue::float(0.5).unwrap()),
                ("generation".to_owned(), IndexValue::UInt(5)),
                ("gone".to_owned(), IndexValue::Bool(true)),
            ]
        );
        // Every new row is (re)written, including unchanged keys (their path_generation moves):
        // 7 built-in (no manifest_id) + 2 custom.
        assert_eq!(keys_of(&muts, true).len(), 9);
        for m in &muts {
            if let Mutation::Put { value, .. } = m {
                assert_eq!(
                    SecondaryIndexEntry::decode(value).unwrap().path_generation,
                    9
                );
            }
        }
        // Removal deletes every old row.
        let removal = index_mutations(&root, &inc, "wb", &path, Some(&new), None).unwrap();
        assert_eq!(keys_of(&removal, false).len(), 9);
        assert!(keys_of(&removal, true).is_empty());
    }

    #[test]
    fn custom_fields_are_validated() {
        let too_many: IndexFields = (0..=MAX_CUSTOM_FIELDS)
            .map(|i| (FieldId::new(format!("f{i}")).unwrap(), IndexValue::Int(1)))
            .collect();
        assert!(matches!(
            validate_index_fields(&too_many),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            validate_index_fields(&fields(&[("generation", IndexValue::Int(1))])),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            validate_index_fields(&fields(&[("s", IndexValue::String("x".repeat(4097)))])),
            Err(Error::InvalidArgument(_))
        ));
        let ok = fields(&[
            ("b", IndexValue::Null),
            ("a", IndexValue::Bytes(vec![0, 1])),
        ]);
        let enc = encode_projection(&ok).unwrap();
        assert_eq!(enc[0].0, "a");
        assert_eq!(decode_projection(&enc).unwrap(), ok);
        let mut unsorted = enc.clone();
        unsorted.reverse();
        assert!(matches!(
            decode_projection(&unsorted),
            Err(Error::Codec { .. })
        ));
    }

    #[test]
    fn a_path_longer_than_the_value_limit_is_not_projected() {
        let long = crate::path::normalize_stored(&format!("outputs/{}", "p".repeat(4090))).unwrap();
        let e = entry(3, &IndexFields::new());
        assert!(builtin_value("path", "wb", &long, &e).is_none());
        let rows = index_rows(
            &RootId([1; 16]),
            &WorkspaceIncarnationId([2; 16]),
            "wb",
            &long,
            &e,
        )
        .unwrap();
        assert_eq!(rows.len(), 6);
    }
}
