//! Where a new board's keys live, as the ranking layer asks
//! (`seam::Placement`): anywhere, beside another board (a family's boards,
//! written in one transaction, share its slot), or as a split board's tree.
//!
//! A split board's trees (`RankingConfig::trees(k)`): tree `t`
//! of `k` on the `t`-th of `k` slots spaced evenly over the ring from the
//! board's home slot ([`spaced_slot`], which places entities' buckets too),
//! so with `k` masters owning equal ranges (what `redis-cli --cluster
//! create` makes) the trees sit on `k` different masters and their writers
//! do not share a master's core. Before, a tree's slot was its random id's
//! hash, so all `k` trees shared a master with probability `1/m^(k-1)`
//! and two of three trees on three masters did 7 times in 9.
//!
//! A board's keys are named after its id (`BoardKeys::new`), and ids are
//! random and never reused (`lifecycle.rs`); a tree's id is drawn the same
//! at random, with its last six digits chosen so its keys fall on the
//! tree's slot ([`id_on_slot`]), so nothing that reads a board by id
//! learns anything new and boards stored before keep their keys.

use super::boards::BoardKeys;
use super::keys::{crc16_update, hash_tag, home_slot, spaced_slot, SLOTS};
use super::RedisCluster;
use crate::entity::Key;
use crate::seam::Placement;

/// The slot tree `t` of the `k` trees of board `board` lives on.
pub(super) fn tree_slot(board: &str, t: u32, k: u32) -> u16 {
    let home = home_slot("\u{1f}board", Key::Text(board));
    spaced_slot(home, t % k.max(1), k.max(1))
}

/// Endings a placed id is chosen among: its last six decimal digits.
const ENDINGS: i64 = 1_000_000;

/// A fresh random board id whose keys fall on `slot`: a random head, then
/// the first of the million six-digit endings, from a random one, whose
/// key (`{prefix}/board/{id}`, no hash tag: prefixes have no braces)
/// hashes to the slot; 61 of them do on average, and each is tried by
/// continuing the head's CRC over six bytes. Drawing whole ids until one
/// fell on the slot formatted and hashed 16,384 keys on average, ~1 s of
/// CPU per board in a debug build, most of the Redis family tests' time.
pub(super) fn id_on_slot(prefix: &str, slot: u16) -> i64 {
    loop {
        // `head * ENDINGS + ending` prints as the head's digits, then the
        // ending's six (zero-padded), and stays below `i64::MAX`.
        let head = crate::random::range(1..=(i64::MAX - (ENDINGS - 1)) / ENDINGS);
        let start = format!("{prefix}/board/{head}");
        debug_assert!(hash_tag(start.as_bytes()).is_none(), "{start}");
        let crc = crc16_update(0, start.as_bytes());
        let first = crate::random::range(0..ENDINGS);
        for i in 0..ENDINGS {
            let ending = (first + i) % ENDINGS;
            if crc16_update(crc, &six_digits(ending)) % SLOTS == slot {
                let id = head * ENDINGS + ending;
                debug_assert_eq!(BoardKeys::new(prefix, id).slot, slot);
                return id;
            }
        }
        // No ending of this head reaches the slot (odds ~e^-61): another head.
    }
}

/// `n` (below a million) as six ASCII digits, zero-padded.
fn six_digits(mut n: i64) -> [u8; 6] {
    let mut digits = [b'0'; 6];
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
    digits
}

impl RedisCluster {
    /// The id of a new board placed by `placement`: random; for a tree of a
    /// split board, random among those on the tree's slot; beside another
    /// board (a family's), random among those on its slot.
    pub(super) fn new_board_id(&self, placement: Placement<'_>) -> i64 {
        match placement {
            Placement::Anywhere => crate::random::range(1..i64::MAX),
            Placement::Tree { board, t, k } => id_on_slot(self.prefix(), tree_slot(board, t, k)),
            Placement::With(id) => {
                id_on_slot(self.prefix(), BoardKeys::new(self.prefix(), id).slot)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use crate::seam::{Board, BoardSpec, BoardStore};
    use std::collections::BTreeSet;

    fn nodes() -> Vec<String> {
        super::super::parse_url(&autoshard_test_servers::redis_cluster_url())
            .expect("a redis-cluster:// URL")
            .0
    }

    /// The master (its address) owning each slot, asked of the cluster
    /// (`CLUSTER SLOTS`).
    fn master_of(nodes: &[String], slot: u16) -> String {
        let mut conn = redis::Client::open(format!("redis://{}", nodes[0]))
            .and_then(|c| c.get_connection())
            .expect("a node");
        let ranges: Vec<(u16, u16, (String, u16))> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<Vec<redis::Value>>(&mut conn)
            .expect("CLUSTER SLOTS")
            .into_iter()
            .map(|range| {
                let redis::Value::Array(parts) = range else {
                    panic!("a slot range")
                };
                let start: u16 = redis::from_redis_value(parts[0].clone()).unwrap();
                let end: u16 = redis::from_redis_value(parts[1].clone()).unwrap();
                let redis::Value::Array(master) = &parts[2] else {
                    panic!("a master")
                };
                let host: String = redis::from_redis_value(master[0].clone()).unwrap();
                let port: u16 = redis::from_redis_value(master[1].clone()).unwrap();
                (start, end, (host, port))
            })
            .collect();
        let (_, _, (host, port)) = ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .expect("every slot is served");
        format!("{host}:{port}")
    }

    /// The slot the cluster itself computes for `key` (`CLUSTER KEYSLOT`).
    fn keyslot(nodes: &[String], key: &str) -> u16 {
        let mut conn = redis::Client::open(format!("redis://{}", nodes[0]))
            .and_then(|c| c.get_connection())
            .expect("a node");
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .expect("CLUSTER KEYSLOT")
    }

    fn spec(policy: &str) -> BoardSpec {
        BoardSpec {
            min: 0,
            max: 1_000,
            branching: 16,
            shards: 1,
            queues: 1,
            policy: policy.into(),
            order: "higher_is_better".into(),
            entry_data: 0,
            dims: Vec::new(),
            trees: 1,
            buckets: 0,
            exact_top: 0,
        }
    }

    /// The masters the trees of a `trees(3)` board's keys are on, as the
    /// cluster places them; `place: false` creates the trees as plain
    /// boards (random ids), the control.
    fn masters_of_trees(nodes: &[String], prefix: &str, board: &str, place: bool) -> Vec<String> {
        let db = RedisCluster::builder(nodes)
            .prefix(prefix.to_owned())
            .open()
            .expect("the test cluster");
        (0..3)
            .map(|t| {
                let placement = match place {
                    true => Placement::Tree { board, t, k: 3 },
                    false => Placement::Anywhere,
                };
                let name = format!("{board}-{t}");
                let id = db
                    .create_board(&name, &spec("replace"), placement)
                    .expect("a tree");
                let version = BoardKeys::new(prefix, id).version();
                master_of(nodes, keyslot(nodes, &version))
            })
            .collect()
    }

    /// The three trees of each of several boards land on three different
    /// masters of the 3-master test cluster. Control: the same boards'
    /// trees created as plain boards (random ids, as before placement)
    /// share a master for most boards (three random slots miss one of 3
    /// masters with probability 7/9; the control asserts it of 1 in 12).
    #[test]
    fn the_trees_of_a_board_land_on_distinct_masters() {
        let nodes = nodes();
        let prefix = format!(
            "placement_{}_{}",
            std::process::id(),
            crate::random::range(0..u32::MAX)
        );
        let masters: BTreeSet<String> = (0..16u16).map(|s| master_of(&nodes, s * 1024)).collect();
        assert_eq!(masters.len(), 3, "the test cluster has 3 masters");
        let mut shared = 0;
        for b in 0..12 {
            let placed = masters_of_trees(&nodes, &prefix, &format!("b{b}"), true);
            let distinct: BTreeSet<_> = placed.iter().collect();
            assert_eq!(distinct.len(), 3, "board b{b}: trees on {placed:?}");
            let random = masters_of_trees(&nodes, &prefix, &format!("c{b}"), false);
            shared += usize::from(random.iter().collect::<BTreeSet<_>>().len() < 3);
        }
        // (2/9)^12 < 10^-7 that no board of the control shares a master.
        assert!(shared > 0, "control: random trees shared no master");
        let db = RedisCluster::builder(&nodes).prefix(prefix).open().unwrap();
        for name in db.list().unwrap() {
            db.delete(&name).unwrap();
        }
    }

    /// A family's boards, placed beside its registry board, share the
    /// registry board's slot, so one commit writes them all. Control:
    /// boards placed anywhere land on random slots, and a write to two of
    /// them is refused.
    #[test]
    fn a_familys_boards_share_its_slot_and_others_are_refused_together() {
        let nodes = nodes();
        let prefix = format!(
            "family_slot_{}_{}",
            std::process::id(),
            crate::random::range(0..u32::MAX)
        );
        let db = RedisCluster::builder(&nodes)
            .prefix(prefix.clone())
            .open()
            .expect("the test cluster");
        let family = db
            .create_board("family", &spec("replace"), Placement::Anywhere)
            .unwrap();
        let slot = |id| BoardKeys::new(&prefix, id).slot;
        let names = ["players", "day\u{2}20416", "all\u{2}0\u{2}age\u{2}35-44"];
        let members: Vec<i64> = names
            .iter()
            .map(|n| db.create_board(n, &spec("replace"), Placement::With(family)))
            .collect::<Result<_>>()
            .unwrap();
        assert!(members.iter().all(|&m| slot(m) == slot(family)));
        let boards: Vec<Board<'_>> = members.iter().map(|&id| Board { name: "m", id }).collect();
        db.write_boards(&boards, &mut |sts| {
            assert_eq!(sts.len(), 3);
            Ok(())
        })
        .unwrap();
        let plain: Vec<i64> = (0..2)
            .map(|i| db.create_board(&format!("plain-{i}"), &spec("replace"), Placement::Anywhere))
            .collect::<Result<_>>()
            .unwrap();
        assert_ne!(slot(plain[0]), slot(plain[1]), "1 in 16,384");
        let boards: Vec<Board<'_>> = plain.iter().map(|&id| Board { name: "p", id }).collect();
        let refused = db.write_boards(&boards, &mut |_| Ok(()));
        assert!(
            matches!(refused, Err(crate::Error::Unsupported { .. })),
            "{refused:?}"
        );
        for name in db.list().unwrap() {
            db.delete(&name).unwrap();
        }
    }

    #[test]
    fn a_tree_id_falls_on_its_slot_and_trees_are_spaced() {
        for slot in [0, 1, 5_461, 16_383] {
            assert_eq!(BoardKeys::new("app", id_on_slot("app", slot)).slot, slot);
        }
        // Random slots, a long prefix; ids stay random: no two alike.
        let prefix = "p".repeat(64);
        let mut ids = BTreeSet::new();
        for _ in 0..64 {
            let slot = crate::random::range(0..16_384u16);
            let id = id_on_slot(&prefix, slot);
            assert!(id > 0 && BoardKeys::new(&prefix, id).slot == slot, "{id}");
            assert!(ids.insert(id), "{id} drawn twice");
        }
        assert_eq!(six_digits(42), *b"000042");
        assert_eq!(six_digits(999_999), *b"999999");
        let slots: Vec<u16> = (0..3).map(|t| tree_slot("b", t, 3)).collect();
        let gaps: Vec<u32> = (0..3)
            .map(|t| (u32::from(slots[(t + 1) % 3]) + 16_384 - u32::from(slots[t])) % 16_384)
            .collect();
        assert!(gaps.iter().all(|g| g.abs_diff(5_461) <= 1), "{gaps:?}");
    }
}
