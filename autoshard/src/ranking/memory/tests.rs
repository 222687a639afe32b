use super::harness::Board;
use super::*;
use crate::error::Error;

fn g(range: std::ops::Range<i64>, b: u32) -> Geometry {
    Geometry::new(range.start, range.end, b).unwrap()
}

fn enc(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    storage::encode(v, &mut out);
    out
}

#[test]
fn an_empty_vector_deletes_the_row() {
    let st = MemoryStorage::new("t", g(0..100, 10));
    st.write_unchecked(|tx| {
        tx.put_node_part(2, 0, Part::A, 3, &enc(&[1, 2]))?;
        tx.put_node_part(2, 0, Part::B, 3, &enc(&[1]))?;
        tx.put_arrival_node(7, 1, 0, &enc(&[0, 1]))?;
        tx.put_node_part(2, 0, Part::A, 3, &[])?;
        tx.put_arrival_node(7, 1, 0, &[])?;
        // Deleting what is not there is a no-op.
        tx.put_arrival_node(8, 1, 0, &[])?;
        tx.delete_player("nobody")
    })
    .unwrap();
    let t = st.tables();
    assert_eq!(t.nodes.keys().collect::<Vec<_>>(), [&(2, 0, Part::B, 3)]);
    assert!(t.arrivals.is_empty());
}

#[test]
fn player_rows_keep_the_ranking_index() {
    let st = MemoryStorage::new("t", g(-10..10, 4));
    st.write_unchecked(|tx| {
        for (p, s, a) in [
            ("a", 5, 0),
            ("b", 5, 1),
            ("c", 5, 2),
            ("d", 3, 0),
            ("e", -10, 0),
        ] {
            tx.put_player(p, s, a)?;
        }
        tx.put_player("a", 5, 3)?; // a moves behind c
        tx.put_player("f", 9, 0)?;
        tx.delete_player("f")
    })
    .unwrap();
    st.read(|tx| {
        let mut out = Vec::new();
        tx.entries_at(5, 0, 10, &mut out)?;
        assert_eq!(out, [("b".into(), 5), ("c".into(), 5), ("a".into(), 5)]);
        out.clear();
        tx.entries_at(5, 2, 1, &mut out)?;
        assert_eq!(out, [("c".into(), 5)]);
        out.clear();
        tx.entries_at(4, 0, 10, &mut out)?;
        assert!(out.is_empty());
        tx.entries_below(6, 2, &mut out)?;
        assert_eq!(out, [("b".into(), 5), ("c".into(), 5)]);
        out.clear();
        tx.entries_below(5, u64::MAX, &mut out)?;
        assert_eq!(out, [("d".into(), 3), ("e".into(), -10)]);
        out.clear();
        tx.entries_below(-10, 10, &mut out)?;
        tx.entries_below(i64::MIN, 10, &mut out)?;
        tx.entries_at(5, 0, 0, &mut out)?;
        assert!(out.is_empty());
        assert_eq!(tx.player("a")?, Some((5, 3)));
        assert_eq!(tx.player("f")?, None);
        let mut scanned = Vec::new();
        tx.scan_players(&mut |s, a| {
            scanned.push((s, a));
            Ok(())
        })?;
        scanned.sort_unstable();
        assert_eq!(scanned, [(-10, 0), (3, 0), (5, 1), (5, 2), (5, 3)]);
        Ok(())
    })
    .unwrap();
}

#[test]
fn reads_come_in_the_promised_orders() {
    let st = MemoryStorage::new("t", g(0..1000, 10));
    st.write_unchecked(|tx| {
        // Written out of order on purpose.
        for (h, idx, part, shard) in [(2, 1, Part::B, 0), (1, 5, Part::A, 0), (2, 1, Part::A, 2)] {
            tx.put_node_part(h, idx, part, shard, &enc(&[1]))?;
        }
        tx.put_node_part(2, 1, Part::A, 0, &enc(&[2]))?;
        tx.put_node_part(3, 0, Part::A, 0, &enc(&[3]))?;
        for (score, h, idx) in [(9, 1, 0), (-1, 2, 0), (9, 1, 0), (-1, 1, 1), (9, 2, 0)] {
            tx.put_arrival_node(score, h, idx, &enc(&[4]))?;
        }
        Ok(())
    })
    .unwrap();
    st.read(|tx| {
        let mut seen = Vec::new();
        tx.scan_nodes(&mut |key, part, shard, _| {
            seen.push((key, part, shard));
            Ok(())
        })?;
        let want = [
            ((1, 5), Part::A, 0),
            ((2, 1), Part::A, 0),
            ((2, 1), Part::A, 2),
            ((2, 1), Part::B, 0),
            ((3, 0), Part::A, 0),
        ];
        assert_eq!(seen, want);
        let mut arrivals = Vec::new();
        tx.scan_arrival_nodes(&mut |score, h, idx, _| {
            arrivals.push((score, h, idx));
            Ok(())
        })?;
        assert_eq!(arrivals, [(-1, 1, 1), (-1, 2, 0), (9, 1, 0), (9, 2, 0)]);
        // A path: part A of every shard of each node, part B only where
        // asked, nothing for a node that is not stored.
        let mut rows = Vec::new();
        tx.path_rows(
            &[(3, 0, true), (2, 1, false), (2, 7, true)],
            &mut |h, part, shard, v| {
                rows.push((h, part, shard, storage::get(v, 0)));
                Ok(())
            },
        )?;
        assert_eq!(
            rows,
            [(3, Part::A, 0, 3), (2, Part::A, 0, 2), (2, Part::A, 2, 1)]
        );
        rows.clear();
        tx.path_rows(&[(2, 1, true)], &mut |h, part, shard, v| {
            rows.push((h, part, shard, storage::get(v, 0)));
            Ok(())
        })?;
        assert_eq!(rows.len(), 3);
        let mut heights = Vec::new();
        tx.arrival_path(9, &[(2, 0), (1, 0), (1, 1)], &mut |h, _| {
            heights.push(h);
            Ok(())
        })?;
        assert_eq!(heights, [2, 1]);
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_failed_write_transaction_is_rolled_back() {
    let st = MemoryStorage::new("t", g(0..10, 2));
    st.write_unchecked(|tx| tx.put_player("a", 1, 0)).unwrap();
    let before = st.tables().clone();
    let err = st
        .write_unchecked(|tx| {
            tx.put_player("b", 2, 0)?;
            tx.put_node_part(1, 0, Part::A, 0, &enc(&[1]))?;
            Err::<(), _>(tx.corrupt("f".into(), "r".into()))
        })
        .unwrap_err();
    assert!(
        matches!(err, Error::Corrupt { ref id, .. } if id == "t"),
        "{err}"
    );
    assert_eq!(*st.tables(), before);
}

type Case = Box<dyn Fn(&MemoryTx<'_>) -> Result<()>>;

fn case(f: impl Fn(&MemoryTx<'_>) -> Result<()> + 'static) -> Case {
    Box::new(f)
}

/// Runs `case` on a fresh board; its panic message, if it panicked.
fn panics(write: bool, case: &Case) -> Option<String> {
    let st = MemoryStorage::new("t", g(0..100, 10));
    let run = std::panic::AssertUnwindSafe(|| match write {
        true => st.write(|tx| case(tx)),
        false => st.read(|tx| case(tx)),
    });
    let panic = std::panic::catch_unwind(run).err()?;
    Some(panic.downcast_ref::<String>().cloned().unwrap_or_default())
}

/// The checks of the callers' side: each case breaks one rule of the
/// locking protocol or the encoding, and must panic saying so.
#[test]
fn broken_promises_panic() {
    let locked = |tx: &MemoryTx<'_>| {
        tx.lock_players(&[])?;
        tx.lock_leaves(&[0])
    };
    let cases = [
        (
            "player \"a\" is not locked",
            case(|tx| tx.player("a").map(drop)),
        ),
        (
            "locked once, after the players",
            case(|tx| tx.lock_leaves(&[0])),
        ),
        (
            "locked once, before the leaves",
            case(|tx| {
                tx.lock_players(&["a"])?;
                tx.lock_players(&["b"])
            }),
        ),
        (
            "leaf 1 is not locked",
            case(move |tx| {
                locked(tx)?;
                tx.node_shard(1, 1, 0, &mut |_, _| Ok(()))
            }),
        ),
        (
            "leaf 2 is not locked",
            case(move |tx| {
                locked(tx)?;
                tx.arrival_path(25, &[(1, 0)], &mut |_, _| Ok(()))
            }),
        ),
        (
            "read before the leaves are locked",
            case(|tx| tx.node_shard(2, 0, 0, &mut |_, _| Ok(()))),
        ),
        (
            "(2, 0, 3) read after (2, 1, 0)",
            case(move |tx| {
                locked(tx)?;
                tx.node_shard(2, 1, 0, &mut |_, _| Ok(()))?;
                tx.node_shard(2, 0, 3, &mut |_, _| Ok(()))
            }),
        ),
        (
            "written before it is read",
            case(move |tx| {
                locked(tx)?;
                tx.node_shard(2, 0, 0, &mut |_, _| Ok(()))?;
                tx.put_node_part(2, 0, Part::A, 1, &enc(&[1]))
            }),
        ),
        (
            "player \"a\" written twice",
            case(|tx| {
                tx.lock_players(&["a"])?;
                tx.put_player("a", 1, 0)?;
                tx.delete_player("a")
            }),
        ),
        (
            "not a canonical vector",
            case(move |tx| {
                locked(tx)?;
                tx.put_node_part(1, 0, Part::A, 0, &[1; 12])
            }),
        ),
        (
            "not a canonical vector",
            case(move |tx| {
                locked(tx)?;
                let untrimmed = [enc(&[1]), vec![0; 8]].concat();
                tx.put_node_part(1, 0, Part::A, 0, &untrimmed)
            }),
        ),
        (
            "not a canonical vector",
            case(move |tx| {
                locked(tx)?;
                tx.put_arrival_node(3, 1, 0, &enc(&[1; 11]))
            }),
        ),
        (
            "idx 9223372036854775808 is not below 2^63",
            case(|tx| tx.path_rows(&[(1, 1 << 63, false)], &mut |_, _, _, _| Ok(()))),
        ),
    ];
    for (want, case) in &cases {
        let message = panics(true, case).unwrap_or_else(|| panic!("no panic: {want}"));
        assert!(message.contains(want), "{message:?} does not say {want:?}");
    }
    // Readers neither write nor lock.
    for case in [
        case(|tx| tx.put_player("a", 1, 0)),
        case(|tx| tx.lock_players(&["a"])),
        case(|tx| tx.node_shard(1, 0, 0, &mut |_, _| Ok(()))),
    ] {
        let message = panics(false, &case).expect("a read transaction wrote or locked");
        assert!(message.contains("in a read transaction"), "{message}");
    }
    // The protocol followed: no panic.
    let followed = case(|tx| {
        tx.lock_players(&["a"])?;
        assert_eq!(tx.player("a")?, None);
        tx.lock_leaves(&[0])?;
        tx.node_shard(1, 0, 0, &mut |_, _| Ok(()))?;
        tx.arrival_path(5, &[(1, 0)], &mut |_, _| Ok(()))?;
        tx.node_shard(2, 0, 0, &mut |_, _| Ok(()))?;
        tx.put_node_part(2, 0, Part::A, 0, &enc(&[1]))?;
        tx.put_node_part(1, 0, Part::A, 0, &enc(&[0, 0, 0, 0, 0, 1]))?;
        tx.put_arrival_node(5, 1, 0, &enc(&[1]))?;
        tx.put_player("a", 5, 0)
    });
    assert_eq!(panics(true, &followed), None);
}

#[test]
fn diff_is_empty_for_equal_storages_and_names_each_difference() {
    // Depth 4 over 0..81: the root's children are 0..27, 27..54, 54..81.
    let (left, right) = (Board::new(0..81, 3, 2), Board::new(0..81, 3, 2));
    for board in [&left, &right] {
        board
            .set_scores(1, &[("a", 5), ("b", 5), ("c", 40)])
            .unwrap();
        board.set_scores(1, &[("d", 80)]).unwrap();
    }
    left.st
        .read(|l| {
            right.st.read(|r| {
                assert_eq!(diff(l, r)?, None);
                assert_same(l, r);
                Ok(())
            })
        })
        .unwrap();

    // Same players and scores, another history: b before a at 5, and
    // inner rows in shard 0 instead of 1.
    let other = Board::new(0..81, 3, 2);
    other
        .set_scores(0, &[("b", 5), ("a", 5), ("c", 40), ("d", 80)])
        .unwrap();
    let shown = left
        .st
        .read(|l| other.st.read(|r| diff(l, r)))
        .unwrap()
        .expect("the storages differ");
    for line in [
        "~ player \"a\": (5, 0) != (5, 1)",
        "~ player \"b\": (5, 1) != (5, 0)",
        "- node (4, 0, A, 1): [2, 1, 1]",
        "+ node (4, 0, A, 0): [2, 1, 1]",
    ] {
        assert!(shown.contains(line), "{line:?} missing from:\n{shown}");
    }
    assert!(!shown.contains("scanned player"), "{shown}");

    // A row only one side has, an untrimmed vector, a listing that
    // disagrees with the rows.
    let damaged = left.st.clone();
    {
        let mut t = damaged.tables_mut();
        t.arrivals.insert((42, 1, 0), enc(&[1]));
        t.nodes.insert(
            (1, 1, Part::A, 0),
            vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        );
        t.players.insert("ghost".into(), (1, 0));
    }
    let shown = left
        .st
        .read(|l| damaged.read(|r| diff(l, r)))
        .unwrap()
        .expect("the storages differ");
    for line in [
        "+ arrival node (42, 1, 0): [1]",
        "(untrimmed)",
        "! right: scan_players disagrees with the listing",
        "+ scanned player (1, 0): 1x",
    ] {
        assert!(shown.contains(line), "{line:?} missing from:\n{shown}");
    }
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        left.st.read(|l| {
            damaged.read(|r| {
                assert_same(l, r);
                Ok(())
            })
        })
    }));
    assert!(panic.is_err(), "assert_same passed on different storages");
}
