//! Where an entity's keys live: hash slots, the hash tags that reach them,
//! and the key names.
//!
//! Redis Cluster puts a key on the master that owns its hash slot,
//! `CRC16(tag) mod 16384`, where the tag is the part of the key between the
//! first `{` and the next `}`. A plain tag per shard (`{Question/42/votes/3}`)
//! lands wherever CRC16 throws it, so 4 of 6 shards may share a master. Here
//! every entity instead gets a *home slot* `h` (FNV-1a of kind and id) and
//! [`BUCKETS`] buckets at fixed offsets from it, spaced evenly over the
//! ring (see [`ORDER`]), whatever the number of shards: the slot of a
//! shard must not depend on `shards = N`, which may change while rows
//! written under the old `N` still count. A key is placed on a slot by writing, as its tag, a short
//! string whose CRC16 is that slot ([`tag`]; the table of all 16,384 is
//! computed once).

use crate::entity::Key;
use crate::hash::{fnv, FNV_OFFSET};
use std::fmt::Write as _;
use std::sync::OnceLock;

/// Hash slots in Redis Cluster.
pub(crate) const SLOTS: u16 = 16_384;

/// Buckets per entity: static shard `s` lives in bucket `s mod BUCKETS`, a
/// dynamic row in a bucket of the saving writer's choice.
pub(crate) const BUCKETS: usize = 12;

/// Bucket `b` sits `ORDER[b] / 12` of the ring after the home slot. Every
/// three consecutive buckets are a third of the ring apart, so with 3
/// masters owning equal ranges (what `redis-cli --cluster create` makes)
/// the first `n` buckets differ by at most one per master, for any home
/// slot: the first three are on three different masters. The second
/// triple sits halfway between the first, so 6 buckets are even over 2 and
/// 6 masters too, and all 12 over 2, 3, 4, 6 or 12.
const ORDER: [u32; BUCKETS] = [0, 4, 8, 2, 6, 10, 1, 5, 9, 3, 7, 11];

/// CRC16-CCITT (XMODEM), the hash of Redis Cluster's key slots.
pub(crate) fn crc16(bytes: &[u8]) -> u16 {
    crc16_update(0, bytes)
}

/// [`crc16`] of the bytes hashed so far (`crc`) followed by `bytes`, so a
/// caller trying many endings of one key hashes its start once.
pub(crate) fn crc16_update(crc: u16, bytes: &[u8]) -> u16 {
    bytes.iter().fold(crc, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ byte)]
    })
}

/// The CRC of each byte value, one table lookup per byte instead of eight
/// shifts: board placement hashes ~16,000 candidate keys per board
/// (`placement.rs`).
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// The hash tag of `key`: what is between its first `{` and the next `}`,
/// if not empty.
pub(crate) fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// The slot Redis assigns to a key (its hash tag, if it has a non-empty
/// one, else the whole key).
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS
}

/// A hash tag whose slot is `slot`: the first string in the order `0`..`9`,
/// `a`..`z`, `00`, `01`, ... that hashes there.
pub(crate) fn tag(slot: u16) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut tags = vec![String::new(); usize::from(SLOTS)];
        let mut missing = usize::from(SLOTS);
        let mut candidate = Vec::new();
        // Every slot is reached by some string of at most 4 characters
        // (36^4 candidates for 16,384 slots); the unit test checks it.
        'lengths: for len in 1..=4u32 {
            for mut n in 0..ALPHABET.len().pow(len) {
                candidate.clear();
                for _ in 0..len {
                    candidate.push(ALPHABET[n % ALPHABET.len()]);
                    n /= ALPHABET.len();
                }
                let slot = usize::from(crc16(&candidate) % SLOTS);
                if tags[slot].is_empty() {
                    tags[slot] = String::from_utf8(candidate.clone()).expect("ASCII");
                    missing -= 1;
                    if missing == 0 {
                        break 'lengths;
                    }
                }
            }
        }
        tags
    });
    &tags[usize::from(slot % SLOTS)]
}

/// The home slot of an entity: its document's slot, and bucket 0's.
pub(crate) fn home_slot(base: &str, key: Key<'_>) -> u16 {
    let hash = fnv(fnv(FNV_OFFSET, base.as_bytes()), &[0]);
    let hash = match key {
        Key::Int(i) => fnv(fnv(hash, b"i"), &i.to_le_bytes()),
        Key::Text(s) => fnv(fnv(hash, b"s"), s.as_bytes()),
    };
    (hash % u64::from(SLOTS)) as u16
}

/// The slot of bucket `bucket` of the entity whose home slot is `home`.
pub(crate) fn bucket_slot(home: u16, bucket: usize) -> u16 {
    spaced_slot(home, ORDER[bucket], BUCKETS as u32)
}

/// The `i`-th of `n` slots spaced evenly over the ring from `home`
/// (`i / n` of the ring after it, rounded): with `m` masters owning equal
/// ranges and `n` a multiple of `m`, every master gets `n / m` of them up
/// to a slot of rounding at a range boundary. Entities' buckets and a
/// split board's trees (`placement.rs`) are placed by it.
pub(crate) fn spaced_slot(home: u16, i: u32, n: u32) -> u16 {
    let offset = (i * u32::from(SLOTS) + n / 2) / n;
    ((u32::from(home) + offset) % u32::from(SLOTS)) as u16
}

/// The bucket of static shard `shard`.
pub(crate) fn static_bucket(shard: i64) -> usize {
    shard.rem_euclid(BUCKETS as i64) as usize
}

/// An id as it ends a key: `i<decimal>` or `s<the string's bytes>`. Last in
/// the key, so it needs no escaping.
pub(crate) fn encode_id(key: Key<'_>) -> String {
    match key {
        Key::Int(i) => format!("i{i}"),
        Key::Text(s) => format!("s{s}"),
    }
}

/// The names of one kind's keys under one prefix.
#[derive(Debug, Clone)]
pub(crate) struct KindKeys {
    prefix: String,
    /// The lower-cased kind name (SQLite's and PostgreSQL's table base).
    pub base: String,
}

impl KindKeys {
    pub fn new(prefix: &str, base: String) -> Self {
        KindKeys {
            prefix: prefix.to_owned(),
            base,
        }
    }

    /// The entity's document: a hash with `doc` (the JSON) and `inc` (its
    /// incarnation, new on every insert).
    pub fn document(&self, home: u16, id: &str) -> String {
        format!("{}:{{{}}}:{}:d:{id}", self.prefix, tag(home), self.base)
    }

    /// Bucket `bucket` of the entity: a hash with `~` (the incarnation it
    /// belongs to), `~seq` (its last dynamic row number) and one field
    /// `r:<field>:<shard>` per shard row.
    pub fn bucket(&self, home: u16, bucket: usize, id: &str) -> String {
        let slot = bucket_slot(home, bucket);
        format!(
            "{}:{{{}}}:{}:b{bucket}:{id}",
            self.prefix,
            tag(slot),
            self.base
        )
    }

    /// The kind's intent table in `slot`: board writes that pieces of
    /// the kind's saves, inserts and deletes in this slot owe an entity
    /// board, field `<writer>:<seq>` (the board write's operation id), until
    /// they are applied (`ranked.rs`).
    pub fn intents(&self, slot: u16) -> String {
        format!("{}:{{{}}}:{}:i", self.prefix, tag(slot), self.base)
    }

    /// A `SCAN MATCH` pattern of every intent table of the kind.
    pub fn intents_pattern(&self) -> String {
        let mut pattern = String::with_capacity(self.prefix.len() + self.base.len() + 8);
        for c in self.prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        let _ = write!(pattern, ":{{*}}:{}:i", self.base);
        pattern
    }

    /// Every entity id of the kind, for compaction (a sorted set, all
    /// scores 0, so members are in byte order).
    pub fn index(&self) -> String {
        let slot = key_slot(format!("{}/{}/index", self.prefix, self.base).as_bytes());
        format!("{}:{{{}}}:{}:ix", self.prefix, tag(slot), self.base)
    }
}

/// The writer table of a slot: writer id -> `seq:unix time` of its last
/// piece applied in that slot (see `exec.rs`).
pub(crate) fn writers(prefix: &str, slot: u16) -> String {
    format!("{prefix}:{{{}}}:w", tag(slot))
}

/// The kind registry: table base -> `kind|id type`.
pub(crate) fn registry(prefix: &str) -> String {
    let slot = key_slot(format!("{prefix}/kinds").as_bytes());
    format!("{prefix}:{{{}}}:kinds", tag(slot))
}

/// The hash field of a shard row.
pub(crate) fn row_field(field: &str, shard: i64) -> String {
    let mut name = String::with_capacity(field.len() + 24);
    let _ = write!(name, "r:{field}:{shard}");
    name
}

/// `(field, shard)` of a hash field written by [`row_field`].
pub(crate) fn parse_row_field(name: &str) -> Option<(&str, i64)> {
    let rest = name.strip_prefix("r:")?;
    let (field, shard) = rest.rsplit_once(':')?;
    Some((field, shard.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_cluster_specification() {
        // The Redis Cluster specification's test vector.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        // `CLUSTER KEYSLOT foo` is 12182, and tags decide alone.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"x{foo}y"), 12182);
        assert_eq!(key_slot(b"x{}y"), key_slot(b"x{}y"));
        assert_ne!(key_slot(b"x{}y"), 12182);
    }

    /// The table-driven CRC against the bit-by-bit definition, and a CRC
    /// continued over a second part against the whole.
    #[test]
    fn the_table_crc_is_the_bitwise_crc() {
        fn bitwise(bytes: &[u8]) -> u16 {
            let mut crc: u16 = 0;
            for &byte in bytes {
                crc ^= u16::from(byte) << 8;
                for _ in 0..8 {
                    crc = if crc & 0x8000 != 0 {
                        (crc << 1) ^ 0x1021
                    } else {
                        crc << 1
                    };
                }
            }
            crc
        }
        let all: Vec<u8> = (0..=255).collect();
        for n in 0..all.len() {
            assert_eq!(crc16(&all[..n]), bitwise(&all[..n]), "{n} bytes");
            let (a, b) = all[..n].split_at(n / 3);
            assert_eq!(crc16_update(crc16(a), b), bitwise(&all[..n]));
        }
    }

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        for slot in 0..SLOTS {
            let t = tag(slot);
            assert!(!t.is_empty() && t.len() <= 4, "slot {slot}: {t:?}");
            assert_eq!(key_slot(format!("p:{{{t}}}:rest").as_bytes()), slot);
        }
    }

    /// `redis-cli --cluster create` with `m` masters gives master `i` the
    /// slots from `round(i * 16384 / m)` on; count how many of the first
    /// `n` buckets each gets.
    fn spread(home: u16, n: usize, m: u32) -> Vec<usize> {
        let start = |i: u32| (f64::from(i) * f64::from(SLOTS) / f64::from(m)).round() as u32;
        let mut counts = vec![0; m as usize];
        for b in 0..n {
            let slot = u32::from(bucket_slot(home, b));
            let master = (0..m).rev().find(|&i| start(i) <= slot).unwrap();
            counts[master as usize] += 1;
        }
        counts
    }

    #[test]
    fn buckets_spread_over_masters_for_any_home_slot() {
        for home in (0..SLOTS).step_by(7) {
            for m in [2, 3, 4, 6] {
                for n in 1..=BUCKETS {
                    let counts = spread(home, n, m);
                    let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                    // One per master per triple, up to a slot of rounding
                    // at a range boundary.
                    let bound = if m == 3 { 1 } else { 2 };
                    assert!(
                        hi - lo <= bound || near_boundary(home),
                        "home {home}, {n} buckets, {m} masters: {counts:?}"
                    );
                }
                assert!(spread(home, BUCKETS, m).iter().all(|&c| c >= 1));
            }
            let three = spread(home, 3, 3);
            assert!(
                three.iter().all(|&c| c == 1) || near_boundary(home),
                "{home}: {three:?}"
            );
        }
    }

    fn near_boundary(home: u16) -> bool {
        (0..12u32).any(|k| {
            let at = (u32::from(home) + k * u32::from(SLOTS) / 12) % u32::from(SLOTS);
            [5461u32, 10923].iter().any(|b| at.abs_diff(*b) <= 2)
        })
    }

    #[test]
    fn row_fields_round_trip() {
        assert_eq!(parse_row_field(&row_field("votes", 7)), Some(("votes", 7)));
        assert_eq!(parse_row_field(&row_field("a_b", -1)), Some(("a_b", -1)));
        assert_eq!(parse_row_field("~seq"), None);
        assert_eq!(static_bucket(13), 1);
    }
}
