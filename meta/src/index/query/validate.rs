//! Request validation and the canonical request digests (resume tokens bind them).

use super::types::{
    Direction, Predicate, QueryScope, SearchRequest, MAX_FACETS, MAX_FIELDS, MAX_PAGE,
    MAX_PREDICATES, MAX_SORT_KEYS,
};
use crate::error::{Error, Result};
use crate::ids::validate_workbench_id;
use crate::index::FieldId;
use sha2::{Digest, Sha256};

pub(super) fn put_bytes(h: &mut Sha256, b: &[u8]) {
    h.update((b.len() as u64).to_be_bytes());
    h.update(b);
}

/// Hashes a scope and predicates canonically (length-prefixed parts).
pub(crate) fn hash_query(h: &mut Sha256, scope: &QueryScope, predicates: &[Predicate]) {
    for part in [
        &scope.workbench_id,
        &scope.path.as_ref().map(|p| p.as_str().to_owned()),
    ] {
        match part {
            None => h.update([0u8]),
            Some(s) => {
                h.update([1u8]);
                put_bytes(h, s.as_bytes());
            }
        }
    }
    h.update((predicates.len() as u64).to_be_bytes());
    for p in predicates {
        put_bytes(h, p.field.as_str().as_bytes());
        put_bytes(h, p.op.as_str().as_bytes());
        h.update((p.operands.len() as u64).to_be_bytes());
        for o in &p.operands {
            put_bytes(h, &o.encode().unwrap_or_default());
        }
    }
}

pub(crate) fn hash_fields(h: &mut Sha256, fields: &[FieldId]) {
    h.update((fields.len() as u64).to_be_bytes());
    for f in fields {
        put_bytes(h, f.as_str().as_bytes());
    }
}

impl SearchRequest {
    /// SHA-256 over everything that defines the row sequence and its shape — scope, predicates,
    /// projection, sort and facets — but not `limit` or `resume` (domain
    /// `nokv.query.search.v1`). Continuations are bound to it.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"nokv.query.search.v1\0");
        hash_query(&mut h, &self.scope, &self.predicates);
        match &self.fields {
            None => h.update([0u8]),
            Some(f) => {
                h.update([1u8]);
                hash_fields(&mut h, f);
            }
        }
        h.update((self.sort.len() as u64).to_be_bytes());
        for k in &self.sort {
            put_bytes(&mut h, k.field.as_str().as_bytes());
            h.update([u8::from(k.direction == Direction::Desc)]);
        }
        hash_fields(&mut h, &self.facets);
        h.finalize().into()
    }

    /// Checks every cap and operand. Errors: [`Error::InvalidArgument`].
    pub fn validate(&self) -> Result<()> {
        validate_common(&self.scope, &self.predicates)?;
        if self.fields.as_ref().is_some_and(|f| f.len() > MAX_FIELDS) {
            return Err(Error::invalid(format!(
                "at most {MAX_FIELDS} fields may be projected"
            )));
        }
        if self.sort.len() > MAX_SORT_KEYS {
            return Err(Error::invalid(format!(
                "at most {MAX_SORT_KEYS} sort keys are allowed"
            )));
        }
        if self.facets.len() > MAX_FACETS {
            return Err(Error::invalid(format!(
                "at most {MAX_FACETS} facets are allowed"
            )));
        }
        if !(1..=MAX_PAGE).contains(&self.limit) {
            return Err(Error::invalid(format!("limit must be 1..={MAX_PAGE}")));
        }
        Ok(())
    }
}

/// Checks the scope id and the predicates. Errors: [`Error::InvalidArgument`].
pub(crate) fn validate_common(scope: &QueryScope, predicates: &[Predicate]) -> Result<()> {
    if let Some(id) = &scope.workbench_id {
        validate_workbench_id(id)?;
    }
    if predicates.len() > MAX_PREDICATES {
        return Err(Error::invalid(format!(
            "at most {MAX_PREDICATES} predicates are allowed"
        )));
    }
    predicates.iter().try_for_each(Predicate::validate)
}
