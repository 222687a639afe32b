//! The node encoding the ranking algorithms share; the [`Storage`] they read
//! and write through is the seam's (`crate::seam`).
//!
//! Node vectors are stored as little-endian `i64`s with trailing zeros
//! trimmed (a missing entry reads as 0): a fresh arrival tree or a sparse
//! leaf costs a few bytes instead of `8 * B`.

pub(crate) use crate::seam::{Part, Storage};

/// Entry `i` of an encoded vector (0 past its end).
pub(crate) fn get(blob: &[u8], i: usize) -> i64 {
    match blob.get(8 * i..8 * i + 8) {
        Some(bytes) => i64::from_le_bytes(bytes.try_into().expect("8 bytes")),
        None => 0,
    }
}

/// The stored entries of an encoded vector, from index 0.
pub(crate) fn entries(blob: &[u8]) -> impl Iterator<Item = i64> + '_ {
    blob.chunks_exact(8)
        .map(|bytes| i64::from_le_bytes(bytes.try_into().expect("8 bytes")))
}

/// Sum of entries `from..` (to the end of the vector).
pub(crate) fn sum_from(blob: &[u8], from: usize) -> i128 {
    let start = (8 * from).min(blob.len());
    entries(&blob[start..]).map(i128::from).sum()
}

/// Sum of entries `..to`.
pub(crate) fn sum_to(blob: &[u8], to: usize) -> i128 {
    let end = (8 * to).min(blob.len());
    entries(&blob[..end]).map(i128::from).sum()
}

/// Whether `blob` is a well-formed vector of at most `b` entries.
pub(crate) fn well_formed(blob: &[u8], b: usize) -> bool {
    blob.len().is_multiple_of(8) && blob.len() <= 8 * b
}

/// Adds an encoded vector into `out` (which has `B` entries).
pub(crate) fn add_into(blob: &[u8], out: &mut [i64]) -> Option<()> {
    for (slot, value) in out.iter_mut().zip(entries(blob)) {
        *slot = slot.checked_add(value)?;
    }
    Some(())
}

/// Encodes `v` into `out` (cleared first), trailing zeros trimmed.
pub(crate) fn encode(v: &[i64], out: &mut Vec<u8>) {
    out.clear();
    let len = v.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    for x in &v[..len] {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_trims_trailing_zeros_and_reads_them_back() {
        let mut blob = Vec::new();
        encode(&[3, 0, -7, 0, 0], &mut blob);
        assert_eq!(blob.len(), 24);
        assert_eq!(
            (0..6).map(|i| get(&blob, i)).collect::<Vec<_>>(),
            [3, 0, -7, 0, 0, 0]
        );
        assert_eq!(
            (sum_from(&blob, 1), sum_from(&blob, 9), sum_to(&blob, 1)),
            (-7, 0, 3)
        );
        encode(&[0, 0], &mut blob);
        assert!(blob.is_empty());
        encode(&[i64::MIN, i64::MAX], &mut blob);
        assert_eq!(sum_from(&blob, 0), -1);
        assert!(well_formed(&blob, 2) && !well_formed(&blob, 1) && !well_formed(&blob[1..], 2));
        let mut out = [1, 1, 1];
        assert_eq!(add_into(&blob, &mut out), None, "i64::MAX + 1 overflows");
    }
}
