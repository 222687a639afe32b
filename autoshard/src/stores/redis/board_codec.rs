//! How a board's rows are written in Redis: hash fields, ranking-order
//! members, queue entries, dead letters, the replies that carry them, and
//! the registry record of a board's configuration.

use crate::error::{Error, Result};
use crate::seam::{BoardSpec, Columns, DeadLetter, Part, QueuedRow};
use redis::Value;

/// Positions are below 2^63 (the seam's `Storage` says so), so they print
/// as `i64`s do.
pub(crate) fn node_field(height: u32, idx: u64, part: Part, shard: u32) -> Vec<u8> {
    format!("{height}:{idx}:{}:{shard}", part as u8).into_bytes()
}

pub(crate) fn arrival_field(score: i64, height: u32, idx: u64) -> Vec<u8> {
    format!("{score}:{height}:{idx}").into_bytes()
}

/// Scores descending as unsigned big-endian keys: byte order is ranking
/// order, which `ZRANGEBYLEX` walks.
pub(crate) fn descending(score: i64) -> u64 {
    !((score as u64) ^ (1 << 63))
}

pub(crate) fn ascending(key: u64) -> i64 {
    ((!key) ^ (1 << 63)) as i64
}

pub(crate) fn order_member(player: &str, score: i64, arrival: u64) -> Vec<u8> {
    let mut member = Vec::with_capacity(16 + player.len());
    member.extend_from_slice(&descending(score).to_be_bytes());
    member.extend_from_slice(&arrival.to_be_bytes());
    member.extend_from_slice(player.as_bytes());
    member
}

pub(crate) fn bound(inclusive: bool, bytes: &[u8]) -> Vec<u8> {
    let mut b = vec![if inclusive { b'[' } else { b'(' }];
    b.extend_from_slice(bytes);
    b
}

pub(crate) fn count(n: u64) -> Vec<u8> {
    n.min(i64::MAX as u64).to_string().into_bytes()
}

pub(crate) fn bytes(value: Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    }
}

pub(crate) fn array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) | Value::Set(items) => items,
        _ => Vec::new(),
    }
}

/// A flat `HGETALL` reply as pairs.
pub(crate) fn pairs(value: Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut items = array(value).into_iter().map(bytes);
    let mut out = Vec::new();
    while let (Some(Some(k)), Some(Some(v))) = (items.next(), items.next()) {
        out.push((k, v));
    }
    out
}

pub(crate) fn dead_letter_json(
    queue: u32,
    seq: i64,
    player: &str,
    score: Option<i64>,
    reason: &str,
) -> String {
    serde_json::json!({
        "queue": queue, "seq": seq, "player": player, "score": score, "reason": reason,
    })
    .to_string()
}

pub(crate) fn parse_dead_letter(board: i64, id: &str, json: &str) -> Result<DeadLetter> {
    let corrupt = |reason: String| Error::Corrupt {
        kind: "ranking",
        id: format!("(board id {board})"),
        field: format!("dead letter {id:?}"),
        reason,
    };
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| corrupt(e.to_string()))?;
    let letter = || -> Option<DeadLetter> {
        Some(DeadLetter {
            id: id.parse().ok()?,
            queue: u32::try_from(v["queue"].as_u64()?).ok()?,
            seq: v["seq"].as_i64()?,
            player: v["player"].as_str()?.to_owned(),
            score: match &v["score"] {
                serde_json::Value::Null => None,
                s => Some(s.as_i64()?),
            },
            reason: v["reason"].as_str()?.to_owned(),
        })
    };
    letter().ok_or_else(|| corrupt(format!("unreadable: {json}")))
}

/// A queue stream entry (`[id, [field, value, ...]]`) as a row; an entry
/// that is not an update is passed on marked unreadable, for the worker to
/// set aside. `Err` only for an id that is not `<seq>-<n>`, which Redis
/// never hands out.
pub(crate) fn queued_row(entry: Value) -> std::result::Result<QueuedRow, String> {
    let mut entry = array(entry).into_iter();
    let id = entry.next().and_then(bytes).unwrap_or_default();
    let id = String::from_utf8_lossy(&id).into_owned();
    let seq = id
        .split_once('-')
        .and_then(|(seq, _)| seq.parse().ok())
        .ok_or_else(|| format!("entry id {id:?}"))?;
    let fields = entry.next().map(pairs).unwrap_or_default();
    let field = |name: &[u8]| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let mut unreadable = Vec::new();
    let player = match field(b"p") {
        Some(p) => String::from_utf8(p.clone()).unwrap_or_else(|_| {
            unreadable.push("the player is not valid UTF-8".to_owned());
            String::from_utf8_lossy(p).into_owned()
        }),
        None => {
            unreadable.push("the entry has no player".to_owned());
            String::new()
        }
    };
    let score = field(b"s").and_then(|s| {
        let parsed = std::str::from_utf8(s).ok().and_then(|s| s.parse().ok());
        if parsed.is_none() {
            let shown = String::from_utf8_lossy(s);
            unreadable.push(format!("the score {shown:?} is not an integer"));
        }
        parsed
    });
    Ok(QueuedRow {
        seq,
        player,
        score,
        data: field(b"d").cloned(),
        unreadable: (!unreadable.is_empty()).then(|| unreadable.join("; ")),
    })
}

/// The last field of the record of a board stored natively (sorted sets,
/// no count tree: `board_tx/native.rs`). Boards recorded without it keep
/// the count tree's layout and are served by it, as before.
const NATIVE: &str = "~native";

/// A board's registry record: its id and catalog record
/// ([`BoardSpec::record`], which holds no `|`), `|`-separated, and
/// [`NATIVE`] last for a natively stored board.
pub(super) fn record(id: i64, spec: &BoardSpec, native: bool) -> String {
    match native {
        true => format!("{id}|{}|{NATIVE}", spec.record()),
        false => format!("{id}|{}", spec.record()),
    }
}

/// The start of the field of an approximate board's record before the
/// catalog record: `~approx=<buckets>:<exact top>`.
const APPROX: &str = "~approx=";

/// A registry record's id, configuration and whether the board is stored
/// natively.
pub(super) fn parse_record(name: &str, stored: &str) -> Result<(i64, BoardSpec, bool)> {
    let corrupt = |reason: String| Error::Corrupt {
        kind: "ranking",
        id: name.to_owned(),
        field: "configuration".into(),
        reason,
    };
    let unreadable = || corrupt(format!("unreadable registry record {stored:?}"));
    let mut fields: Vec<&str> = stored.split('|').collect();
    let native = fields.last() == Some(&NATIVE);
    if native {
        fields.pop();
    }
    let id = fields[0].parse().map_err(|_| unreadable())?;
    // A catalog record starts with its version (`v1`); the fields of a
    // board recorded before it start with its minimum, a number.
    if let [_, catalog] = fields[..]
        && catalog.starts_with('v')
    {
        return Ok((
            id,
            BoardSpec::from_record(catalog).map_err(|e| e.for_board(name))?,
            native,
        ));
    }
    let approx = match fields.last().and_then(|f| f.strip_prefix(APPROX)) {
        Some(mode) => {
            let (buckets, top) = mode.split_once(':').ok_or_else(unreadable)?;
            let mode = buckets.parse().ok().zip(top.parse().ok());
            fields.pop();
            mode.ok_or_else(unreadable)?
        }
        None => (0, 0),
    };
    let dims = match fields.len() {
        10 => fields
            .pop()
            .filter(|d| !d.is_empty())
            .ok_or_else(unreadable)?,
        _ => "",
    };
    // A record written before policies, orders and entry data existed has
    // six fields; it is a `Replace`, higher-is-better board without data.
    let (min, max, branching, shards, queues, policy, order, entry_data) = match fields[..] {
        [_, min, max, branching, shards, queues] => {
            (min, max, branching, shards, queues, None, None, "0")
        }
        [_, min, max, branching, shards, queues, policy, order, entry_data] => (
            min,
            max,
            branching,
            shards,
            queues,
            Some(policy),
            Some(order),
            entry_data,
        ),
        _ => return Err(unreadable()),
    };
    let columns = || -> Option<Columns<'_>> {
        Some(Columns {
            min: min.parse().ok()?,
            max: max.parse().ok()?,
            branching: branching.parse().ok()?,
            shards: shards.parse().ok()?,
            queues: queues.parse().ok()?,
            policy,
            order,
            entry_data: entry_data.parse().ok()?,
            dims,
            buckets: approx.0,
            exact_top: approx.1,
        })
    };
    let columns = columns().ok_or_else(unreadable)?;
    let spec = BoardSpec::from_columns(columns).map_err(|e| e.for_board(name))?;
    Ok((id, spec, native))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seam::{dims_from_text, DEFAULT_ORDER, DEFAULT_POLICY};

    #[test]
    fn order_members_sort_in_ranking_order() {
        let mut members = [
            order_member("b", 5, 2),
            order_member("a", 5, 2),
            order_member("z", i64::MIN, 0),
            order_member("c", 5, 1),
            order_member("d", -1, 0),
            order_member("e", i64::MAX, 9),
            order_member("f", 6, u64::MAX >> 1),
        ];
        members.sort();
        let names: Vec<u8> = members.iter().map(|m| m[16]).collect();
        assert_eq!(names, b"efcabdz");
        for s in [i64::MIN, -1, 0, 1, i64::MAX] {
            assert_eq!(ascending(descending(s)), s);
        }
    }

    #[test]
    fn dead_letters_round_trip() {
        let json = dead_letter_json(3, 7, "p\"x", None, "why");
        let letter = parse_dead_letter(1, "9", &json).unwrap();
        assert_eq!((letter.id, letter.queue, letter.seq), (9, 3, 7));
        assert_eq!((letter.player.as_str(), letter.score), ("p\"x", None));
        let json = dead_letter_json(0, 0, "p", Some(-4), "r");
        assert_eq!(parse_dead_letter(1, "1", &json).unwrap().score, Some(-4));
        assert!(parse_dead_letter(1, "1", "{}").is_err());
    }

    #[test]
    fn registry_records_round_trip() {
        let spec = BoardSpec {
            min: i64::MIN,
            max: i64::MAX,
            branching: 7,
            shards: 3,
            queues: 2,
            policy: "best".into(),
            order: "lower_is_better".into(),
            entry_data: 0,
            dims: Vec::new(),
            trees: 1,
            buckets: 0,
            exact_top: 0,
        };
        for native in [false, true] {
            assert_eq!(
                parse_record("b", &record(42, &spec, native)).unwrap(),
                (42, spec.clone(), native)
            );
        }
        let composite = BoardSpec {
            dims: dims_from_text("h:0:10,l:-5:5").unwrap(),
            trees: 4,
            ..spec.clone()
        };
        assert_eq!(
            parse_record("b", &record(7, &composite, true)).unwrap(),
            (7, composite.clone(), true)
        );
        let later = record(7, &composite, true).replacen("|v1 ", "|v2 ", 1);
        assert!(matches!(
            parse_record("b", &later),
            Err(Error::UpgradeRequired { version: 2, .. })
        ));

        // Records written before the catalog record: their fields, the
        // tree count on the policy, the dimensions and the approximate
        // mode as fields of their own.
        let old = "42|-9223372036854775808|9223372036854775807|7|3|2";
        let old_composite = format!("{old}|best+trees=4|lower_is_better|0|h:0:10,l:-5:5|~native");
        assert_eq!(
            parse_record("b", &old_composite).unwrap(),
            (42, composite, true)
        );
        let old_approx = format!("{old}|best|lower_is_better|0|~approx=64:10");
        let approximate = BoardSpec {
            buckets: 64,
            exact_top: 10,
            ..spec.clone()
        };
        assert_eq!(
            parse_record("b", &old_approx).unwrap(),
            (42, approximate, false)
        );
        // A record from before policies and orders reads as the defaults.
        assert_eq!(
            parse_record("b", old).unwrap().1,
            BoardSpec {
                policy: DEFAULT_POLICY.into(),
                order: DEFAULT_ORDER.into(),
                ..spec
            }
        );
        for bad in [
            "",
            "1|2|3",
            "x|0|1|2|1|1",
            "1|0|1|2|1|1|9",
            "1|0|1|2|1|1|~approx=x:1",
            "1|v1 min=0",
            "1|0|1|2|1|1|best+trees=x|higher_is_better|0",
        ] {
            assert!(
                matches!(parse_record("b", bad), Err(Error::Corrupt { .. })),
                "{bad}"
            );
        }
    }
}
