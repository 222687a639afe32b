//! The names of a board's keys: every one in the board's slot (the table
//! of what each holds is in `boards.rs`), and the board registry's.

use super::keys::{key_slot, tag};

/// The names of one board's keys.
pub(crate) struct BoardKeys {
    /// The board's slot: every key below is in it.
    pub slot: u16,
    pub(super) base: String,
}

impl BoardKeys {
    pub fn new(prefix: &str, id: i64) -> Self {
        let slot = key_slot(format!("{prefix}/board/{id}").as_bytes());
        BoardKeys {
            slot,
            base: format!("{prefix}:{{{}}}:rk{id}", tag(slot)),
        }
    }

    pub fn version(&self) -> String {
        format!("{}:v", self.base)
    }

    /// The hashes, ordered set and counter a commit may write, in the
    /// order of `KEYS[3..9]` of `scripts::board_commit`.
    pub fn data(&self) -> Vec<String> {
        let mut data: Vec<String> = ["n", "a", "p", "o"]
            .iter()
            .map(|k| format!("{}:{k}", self.base))
            .collect();
        data.extend([self.dead_letters(), format!("{}:di", self.base)]);
        // Entry data: player -> bytes. After the others, so the indexes
        // above keep their places in the commit script's `KEYS`; then a
        // native board's distinct scores, their multiplicities and its
        // arrival counter (`board_tx/native.rs`).
        data.push(format!("{}:e", self.base));
        data.extend(["s", "m", "c"].iter().map(|k| format!("{}:{k}", self.base)));
        data
    }

    /// The ranking order (sorted set): `desc(score) ‖ arrival ‖ name`.
    pub fn order(&self) -> String {
        format!("{}:o", self.base)
    }

    /// An approximate board's snapshots (`approx.rs`).
    pub fn approx(&self) -> String {
        format!("{}:x", self.base)
    }

    /// The dead letters: id -> JSON (`board_codec::dead_letter_json`).
    pub fn dead_letters(&self) -> String {
        format!("{}:d", self.base)
    }

    pub fn heads(&self) -> String {
        format!("{}:h", self.base)
    }

    pub fn queue(&self, queue: u32) -> String {
        format!("{}:q{queue}", self.base)
    }
}

/// The board registry of a prefix, on a slot of its own.
pub(super) fn registry(prefix: &str) -> String {
    let slot = key_slot(format!("{prefix}/boards").as_bytes());
    format!("{prefix}:{{{}}}:boards", tag(slot))
}
