//! The etcd key layout of a shard (see the module docs of [`super`]) and the registry record.

use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::LogicalShardId;
use crate::store::txn::RegistryEntry;

const FAMILY: &str = "etcd_registry";

/// Cluster-wide prefix of the compaction records. Compaction is cluster-wide, so the floors of
/// every shard of every NoKV namespace on the cluster live under one prefix.
pub(crate) const COMPACTION_PREFIX: &[u8] = b"/nokv-compaction/";

/// Every etcd key of one shard, derived from the deployment namespace and the logical shard.
#[derive(Debug, Clone)]
pub(crate) struct ShardKeys {
    /// `<ns>shards/<shard hex>/`
    shard: Vec<u8>,
    /// `/nokv-compaction/floors/`
    floors: Vec<u8>,
    /// `/nokv-compaction/compacted`
    compacted: Vec<u8>,
    /// `/nokv-compaction/floors/<sha256(shard prefix), 32 hex>`
    floor: Vec<u8>,
}

impl ShardKeys {
    /// Keys of `shard` under `namespace` (which ends with `/`).
    pub(crate) fn new(namespace: &str, shard: &LogicalShardId) -> Self {
        use sha2::Digest;
        let shard = format!("{namespace}shards/{shard}/").into_bytes();
        let mut floors = COMPACTION_PREFIX.to_vec();
        floors.extend_from_slice(b"floors/");
        let mut compacted = COMPACTION_PREFIX.to_vec();
        compacted.extend_from_slice(b"compacted");
        let digest = sha2::Sha256::digest(&shard);
        let mut floor = floors.clone();
        floor.extend_from_slice(crate::ids::to_hex(&digest[..16]).as_bytes());
        ShardKeys {
            shard,
            floors,
            compacted,
            floor,
        }
    }

    /// `<shard>d<tag>`: the prefix of every row of `family`.
    pub(crate) fn family_prefix(&self, family: Family) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.shard.len() + 2);
        k.extend_from_slice(&self.shard);
        k.push(b'd');
        k.push(family.tag());
        k
    }

    /// `<shard>d<tag><key>`: one row.
    pub(crate) fn row(&self, family: Family, key: &[u8]) -> Vec<u8> {
        let mut k = self.family_prefix(family);
        k.extend_from_slice(key);
        k
    }

    /// `<shard>e/clock`: the shard commit clock (u64be commit version; absent = version 0).
    pub(crate) fn clock(&self) -> Vec<u8> {
        self.engine(b"clock")
    }

    /// `<shard>e/registry`: the registry record.
    pub(crate) fn registry(&self) -> Vec<u8> {
        self.engine(b"registry")
    }

    fn engine(&self, name: &[u8]) -> Vec<u8> {
        let mut k = self.shard.clone();
        k.extend_from_slice(b"e/");
        k.extend_from_slice(name);
        k
    }

    /// `<shard>v<u64be version>`: created by the commit of `version` (its create revision is
    /// the etcd revision of that commit; its value the commit's 16-byte write nonce).
    pub(crate) fn version(&self, version: u64) -> Vec<u8> {
        Self::version_under(&self.shard, version)
    }

    /// The commit-version index key of `version` in the shard whose prefix is `shard`.
    fn version_under(shard: &[u8], version: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(shard.len() + 9);
        k.extend_from_slice(shard);
        k.push(b'v');
        k.extend_from_slice(&version.to_be_bytes());
        k
    }

    /// This shard's floor record key (value: [`encode_floor`]).
    pub(crate) fn floor(&self) -> Vec<u8> {
        self.floor.clone()
    }

    /// The floor record value of this shard at `floor`.
    pub(crate) fn floor_value(&self, floor: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(8 + self.shard.len());
        v.extend_from_slice(&floor.to_be_bytes());
        v.extend_from_slice(&self.shard);
        v
    }

    /// Every shard's floor record (cluster-wide).
    pub(crate) fn floors_prefix(&self) -> &[u8] {
        &self.floors
    }

    /// The commit-version index key of `version` of the shard whose key prefix is `shard`.
    pub(crate) fn version_in(shard: &[u8], version: u64) -> Vec<u8> {
        Self::version_under(shard, version)
    }

    /// `/nokv-compaction/compacted`: the highest revision NoKV has compacted (or is about to
    /// compact) the cluster to (u64be).
    pub(crate) fn compacted(&self) -> &[u8] {
        &self.compacted
    }
}

/// The smallest key greater than every key that starts with `prefix` (`None`: no such key,
/// the prefix is all `0xff`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The smallest key strictly greater than `key`.
pub(crate) fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// Decodes a floor record: `u64be floor | shard key prefix`.
///
/// Errors: [`Error::Codec`] for fewer than 8 bytes.
pub(crate) fn decode_floor(b: &[u8]) -> Result<(u64, &[u8])> {
    let (head, prefix) = b
        .split_at_checked(8)
        .ok_or_else(|| Error::codec("etcd_floor", "shorter than 8 bytes"))?;
    Ok((decode_u64("etcd_floor", head)?, prefix))
}

/// A u64be value (the clock, the floor). Errors: [`Error::Codec`] unless exactly 8 bytes.
pub(crate) fn decode_u64(what: &'static str, b: &[u8]) -> Result<u64> {
    let arr: [u8; 8] = b
        .try_into()
        .map_err(|_| Error::codec(what, format!("{} byte(s), expected 8", b.len())))?;
    Ok(u64::from_be_bytes(arr))
}

/// Encodes the registry record: `u16be 1 | u32be count | (u8 tag | u8 versioned | u16be len |
/// name)*`.
pub(crate) fn encode_registry(entries: &[RegistryEntry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(6 + entries.len() * 24);
    v.extend_from_slice(&1u16.to_be_bytes());
    v.extend_from_slice(
        &u32::try_from(entries.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    for e in entries {
        v.push(e.tag);
        v.push(u8::from(e.versioned));
        let name = e.name.as_bytes();
        v.extend_from_slice(&u16::try_from(name.len()).unwrap_or(u16::MAX).to_be_bytes());
        v.extend_from_slice(name);
    }
    v
}

/// Decodes the registry record (fail-closed: unknown version, truncation, trailing bytes,
/// non-UTF-8 names, a versioned flag other than 0/1).
pub(crate) fn decode_registry(b: &[u8]) -> Result<Vec<RegistryEntry>> {
    let err = |r: String| Error::codec(FAMILY, r);
    let mut pos = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let end = pos
            .checked_add(n)
            .filter(|e| *e <= b.len())
            .ok_or_else(|| err(format!("truncated at byte {pos}")))?;
        let s = &b[pos..end];
        pos = end;
        Ok(s)
    };
    let version = u16::from_be_bytes(take(2)?.try_into().map_err(|_| err("short".into()))?);
    if version != 1 {
        return Err(err(format!("unknown registry version {version}")));
    }
    let count = u32::from_be_bytes(take(4)?.try_into().map_err(|_| err("short".into()))?);
    if count > 1024 {
        return Err(err("implausible registry size".into()));
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let head = take(2)?;
        let (tag, flag) = (head[0], head[1]);
        let versioned = match flag {
            0 => false,
            1 => true,
            x => return Err(err(format!("versioned flag {x}"))),
        };
        let len = u16::from_be_bytes(take(2)?.try_into().map_err(|_| err("short".into()))?);
        let name = std::str::from_utf8(take(usize::from(len))?)
            .map_err(|_| err("name is not UTF-8".into()))?
            .to_owned();
        out.push(RegistryEntry {
            name,
            tag,
            versioned,
        });
    }
    if pos != b.len() {
        return Err(err(format!("{} trailing byte(s)", b.len() - pos)));
    }
    Ok(out)
}

/// The registry an etcd-backed shard records at initialization: every family with its seed
/// tag and versioned flag, and `history` (0x00) standing for etcd's own MVCC history.
pub(crate) fn expected_registry() -> Vec<RegistryEntry> {
    let mut v = vec![RegistryEntry {
        name: crate::family::HISTORY_TREE.to_owned(),
        tag: crate::family::HISTORY_TAG,
        versioned: false,
    }];
    v.extend(Family::ALL.iter().map(|f| RegistryEntry {
        name: f.name().to_owned(),
        tag: f.tag(),
        versioned: f.versioned(),
    }));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_skips_trailing_ff_bytes() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
        assert_eq!(successor(b"a"), b"a\0".to_vec());
    }

    #[test]
    fn registry_record_round_trips_and_fails_closed() {
        let r = expected_registry();
        let b = encode_registry(&r);
        assert_eq!(decode_registry(&b).expect("decode"), r);
        let mut trailing = b.clone();
        trailing.push(0);
        assert!(decode_registry(&trailing).is_err());
        assert!(decode_registry(&b[..b.len() - 1]).is_err());
        let mut v2 = b.clone();
        v2[1] = 2;
        assert!(decode_registry(&v2).is_err());
    }

    #[test]
    fn floor_records_name_their_shard_version_index() {
        let shard = LogicalShardId::from_bytes([7; 16]);
        let k = ShardKeys::new("/nokv/", &shard);
        let value = k.floor_value(9);
        let (floor, prefix) = decode_floor(&value).expect("decode");
        assert_eq!(floor, 9);
        assert_eq!(ShardKeys::version_in(prefix, 10), k.version(10));
        assert!(k.floor().starts_with(k.floors_prefix()));
        let other = ShardKeys::new("/other/", &shard);
        assert_ne!(
            other.floor(),
            k.floor(),
            "namespaces have their own floor records"
        );
        assert!(decode_floor(&[1, 2]).is_err());
        assert!(k
            .row(Family::PathCurrent, b"x")
            .starts_with(&k.family_prefix(Family::PathCurrent)));
    }
}
