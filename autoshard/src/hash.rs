//! FNV-1a, for every hash that must agree across processes, builds and
//! versions (queue shards of players, lock keys): `std`'s hashers are
//! randomly seeded, and a player whose queue shard moved could see its
//! updates applied out of order.

/// FNV-1a's offset basis: the hash of no bytes.
pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Continues the FNV-1a hash `hash` over `bytes`.
pub(crate) fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Published FNV-1a 64 test vectors: a change here would move every
        // player to another queue shard.
        assert_eq!(fnv(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            fnv(fnv(FNV_OFFSET, b"fo"), b"obar"),
            fnv(FNV_OFFSET, b"foobar")
        );
    }
}
