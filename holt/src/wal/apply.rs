//! Applying logged records to a [`State`]: replay on open (a record borrowed from its segment)
//! and the live path of tree creation and floor changes (a record just logged). Commits are
//! applied by the committer while it builds the record (see `mvcc::write`); replay applies
//! their physical writes here.

use crate::error::Result;
use crate::registry::TreeMeta;
use crate::slot::Value;
use crate::state::State;
use crate::wal::record::{Record, RecordRef, HEADER_LEN};

/// How a record failed to apply: a read of an older layer failed (`Err` of the outer result),
/// or the record does not fit the state (the inner `String`) — a corrupt or foreign log.
pub(crate) type Applied = Result<std::result::Result<(), String>>;

impl State {
    /// Applies a logged record at `lsn` (the live path for registry and floor changes). The
    /// inner error describes a record that does not fit this state — a sign of a corrupt or
    /// foreign log; the outer one a failed read of an image.
    pub(crate) fn apply_record(&mut self, rec: Record, lsn: u64) -> Applied {
        let payload = match rec.frame(lsn) {
            Ok(framed) => framed,
            Err(e) => return Ok(Err(e.to_string())),
        };
        match RecordRef::parse(&payload[HEADER_LEN..]) {
            Ok(r) => self.apply_record_ref(r, lsn),
            Err(e) => Ok(Err(e)),
        }
    }

    /// Applies a record borrowed from the log (replay): nothing is copied but the keys and
    /// values that end up in the delta. Errors as [`State::apply_record`].
    pub(crate) fn apply_record_ref(&mut self, rec: RecordRef<'_>, lsn: u64) -> Applied {
        match rec {
            RecordRef::Commit { version, ops } => {
                if version != self.version + 1 {
                    return Ok(Err(format!(
                        "commit version {version} does not follow version {}",
                        self.version
                    )));
                }
                let registry = self.registry.clone();
                for op in ops {
                    let (tag, key, value) = match op {
                        Ok(op) => op,
                        Err(e) => return Ok(Err(e)),
                    };
                    let Some(meta) = registry.get(tag) else {
                        return Ok(Err(format!("write to unregistered tree tag {tag:#04x}")));
                    };
                    self.apply(meta, key, Value::from_bytes(value), version)?;
                }
                self.version = version;
            }
            RecordRef::CreateTree {
                tag,
                versioned,
                name,
            } => {
                if let Err(e) = self.registry.check_new(name, tag) {
                    return Ok(Err(format!("cannot register tree {name:?}: {e}")));
                }
                self.registry = self.registry.with(TreeMeta {
                    name: name.to_string(),
                    tag,
                    versioned,
                });
            }
            RecordRef::SetFloor { floor } => {
                if floor <= self.floor || floor > self.version {
                    return Ok(Err(format!(
                        "history floor {floor} outside ({}, {}]",
                        self.floor, self.version
                    )));
                }
                self.raise_floor(floor);
            }
        }
        self.lsn = lsn;
        Ok(Ok(()))
    }
}
