//! Secondary-index building blocks (docs/metadata-format.md, "SecondaryIndex").
//!
//! - [`FieldId`]: the validated index/field id that names one index inside a root
//!   (`[A-Za-z0-9_.-]`, 1..=128 bytes, case-sensitive);
//! - [`value_codec`]: the versioned, order-preserving encoding of typed index values that sits
//!   between the field id and the workspace incarnation in every SecondaryIndex key.
//!
//! - [`projection`]: the pure PathEntry → SecondaryIndex row projection the publication
//!   command writes (built-in and custom `index_fields`);
//! - [`query`]: the search executor at one read version (plan, visibility recheck, sort,
//!   facets, bounded pages); [`aggregate`] and [`catalog`] build on it.
//!
//! The SecondaryIndex key/value codec itself lives in [`crate::codec::secondary_index`].

pub mod aggregate;
pub mod catalog;
pub mod query;

/// The index projection every publication writes (it belongs to the command layer; see
/// [`crate::command::projection`]).
pub use crate::command::projection;

pub use crate::codec::field_id::{FieldId, MAX_FIELD_ID_BYTES};
/// The typed value codec of the index (it lives with the other codecs; see
/// [`crate::codec::index_value`]).
pub use crate::codec::index_value as value_codec;
pub use value_codec::{
    domain_key_bounds, string_prefix_bound, FiniteF64, IndexValue, Timestamp, ValueDomain,
    VALUE_CODEC_VERSION,
};
