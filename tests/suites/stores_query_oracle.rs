//! `db.query::<T>()` against a brute-force oracle, on every store: random
//! inserts, saves (static shards, dynamic rows left uncompacted or
//! compacted), deletes, then random conditions, orders and pages. The
//! query's answer must be what loading every entity one by one and
//! filtering, sorting and paging in Rust gives, entity for entity.

use autoshard::{shard_method, Comparable, Field, Filter, Pending, Query, Shardable, Store};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::cmp::Ordering;

use crate::stores;
use stores::TestStore;

store_tests!(query_answers_as_loading_every_entity_does);

/// Every kind of field a query reads: a static sum and a dynamic sum SQL
/// aggregates, a fold it does not know (bitwise or, folded in Rust), a
/// dynamic max with `i64::MIN` as neutral, and document fields.
#[derive(Shardable, Debug, Clone, PartialEq)]
struct Item {
    #[shard(id)]
    id: i64,
    label: String,
    weight: i32,
    #[shard(neutral = 0, shards = 3, fold = autoshard::fold::checked_sum)]
    stat: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    dynm: i64,
    #[shard(neutral = 0, shards = 2, fold = Self::or)]
    bits: i64,
    #[shard(neutral = i64::MIN, fold = std::cmp::max)]
    top: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Item {
    #[shard_method]
    fn bump(&mut self, stat: i64, dynm: i64, bit: u8, top: i64) {
        self.stat += stat;
        self.dynm += dynm;
        self.bits |= 1 << bit;
        self.top = self.top.max(top);
    }

    fn or(a: i64, b: i64) -> i64 {
        a | b
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert {
        id: i64,
        label: u8,
        weight: i32,
    },
    Save {
        id: i64,
        stat: i64,
        dynm: i64,
        bit: u8,
        top: i64,
    },
    Compact,
    Delete {
        id: i64,
    },
}

const FIELDS: usize = 7;

/// A field's value as the oracle compares it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Int(i64),
    Text(String),
}

fn key(item: &Item, field: usize) -> Key {
    match field {
        0 => Key::Int(item.stat),
        1 => Key::Int(item.dynm),
        2 => Key::Int(item.bits),
        3 => Key::Int(item.top),
        4 => Key::Int(i64::from(item.weight)),
        5 => Key::Int(item.id),
        _ => Key::Text(item.label.clone()),
    }
}

#[derive(Debug, Clone)]
struct Spec {
    filters: Vec<(usize, u8, i64)>,
    order: Vec<(usize, bool)>,
    limit: Option<usize>,
    offset: usize,
}

fn label(n: i64) -> String {
    format!("l{}", n.rem_euclid(4))
}

/// The operand of a condition on `field`: small, so conditions both hold
/// and fail.
fn operand(field: usize, n: i64) -> Key {
    match field {
        3 if n == 0 => Key::Int(i64::MIN),
        6 => Key::Text(label(n)),
        _ => Key::Int(n),
    }
}

fn holds(op: u8, ordering: Ordering) -> bool {
    match op {
        0 => ordering.is_eq(),
        1 => ordering.is_ne(),
        2 => ordering.is_lt(),
        3 => ordering.is_le(),
        4 => ordering.is_gt(),
        _ => ordering.is_ge(),
    }
}

fn compare<V: Comparable>(field: Field<Item, V>, op: u8, value: V) -> Filter<Item> {
    match op {
        0 => field.eq(value),
        1 => field.ne(value),
        2 => field.lt(value),
        3 => field.le(value),
        4 => field.gt(value),
        _ => field.ge(value),
    }
}

fn build<'s, S: Store>(mut query: Query<'s, S, Item>, spec: &Spec) -> Query<'s, S, Item> {
    for &(field, op, n) in &spec.filters {
        let int = match operand(field, n) {
            Key::Int(i) => i,
            Key::Text(_) => 0,
        };
        query = query.filter(move |f| match field {
            0 => compare(f.stat, op, int),
            1 => compare(f.dynm, op, int),
            2 => compare(f.bits, op, int),
            3 => compare(f.top, op, int),
            4 => compare(f.weight, op, int as i32),
            5 => compare(f.id, op, int),
            _ => compare(f.label, op, label(n)),
        });
    }
    for &(field, descending) in &spec.order {
        query = query.order_by(move |f| {
            let order = |asc: autoshard::SortKey<Item>, desc| if descending { desc } else { asc };
            match field {
                0 => order(f.stat.asc(), f.stat.desc()),
                1 => order(f.dynm.asc(), f.dynm.desc()),
                2 => order(f.bits.asc(), f.bits.desc()),
                3 => order(f.top.asc(), f.top.desc()),
                4 => order(f.weight.asc(), f.weight.desc()),
                5 => order(f.id.asc(), f.id.desc()),
                _ => order(f.label.asc(), f.label.desc()),
            }
        });
    }
    if let Some(limit) = spec.limit {
        query = query.limit(limit);
    }
    query.offset(spec.offset)
}

fn oracle(mut items: Vec<Item>, spec: &Spec) -> Vec<Item> {
    items.retain(|item| {
        spec.filters
            .iter()
            .all(|&(field, op, n)| holds(op, key(item, field).cmp(&operand(field, n))))
    });
    items.sort_by(|a, b| {
        let keys = spec.order.iter().map(|&(field, descending)| {
            let ordering = key(a, field).cmp(&key(b, field));
            if descending {
                ordering.reverse()
            } else {
                ordering
            }
        });
        keys.fold(Ordering::Equal, Ordering::then)
            .then(a.id.cmp(&b.id))
    });
    let page = items.into_iter().skip(spec.offset);
    match spec.limit {
        Some(limit) => page.take(limit).collect(),
        None => page.collect(),
    }
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        2 => (0..8i64, any::<u8>(), -3..4i32)
            .prop_map(|(id, label, weight)| Op::Insert { id, label, weight }),
        4 => (0..8i64, -3..6i64, 0..3i64, 0..6u8, -4..5i64)
            .prop_map(|(id, stat, dynm, bit, top)| Op::Save { id, stat, dynm, bit, top }),
        1 => Just(Op::Compact),
        1 => (0..8i64).prop_map(|id| Op::Delete { id }),
    ];
    proptest::collection::vec(op, 1..40)
}

fn specs() -> impl Strategy<Value = Vec<Spec>> {
    let filter = (0..FIELDS, 0..6u8, -2..6i64);
    let order = (0..FIELDS, any::<bool>());
    let spec = (
        proptest::collection::vec(filter, 0..3),
        proptest::collection::vec(order, 0..3),
        proptest::option::of(1..5usize),
        prop_oneof![3 => Just(0usize), 1 => 1..4usize],
    )
        .prop_map(|(filters, order, limit, offset)| Spec {
            filters,
            order,
            limit,
            offset,
        });
    proptest::collection::vec(spec, 1..6)
}

fn apply<S: TestStore>(db: &S, op: &Op) {
    match *op {
        Op::Insert {
            id,
            label: l,
            weight,
        } => {
            let item = Item {
                id,
                label: label(i64::from(l)),
                weight,
                stat: 0,
                dynm: 0,
                bits: 0,
                top: i64::MIN,
                pending: Pending::default(),
            };
            // A taken id is refused, which is fine here.
            let _ = db.insert(&item);
        }
        Op::Save {
            id,
            stat,
            dynm,
            bit,
            top,
        } => {
            if let Some(mut item) = db.load::<Item>(&id).unwrap() {
                item.bump(stat, dynm, bit, top);
                db.save(&mut item).unwrap();
            }
        }
        Op::Compact => {
            db.compact::<Item>().unwrap();
        }
        Op::Delete { id } => {
            db.delete::<Item>(&id).unwrap();
        }
    }
}

fn query_answers_as_loading_every_entity_does<S: TestStore>() {
    let cases = if S::NAME == "sqlite" { 64 } else { 24 };
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(ops(), specs()), |(ops, specs)| {
            let db = S::fresh();
            for op in &ops {
                apply(&db.store, op);
            }
            let all: Vec<Item> = (0..8).filter_map(|id| db.load(&id).unwrap()).collect();
            for spec in &specs {
                let expected = oracle(all.clone(), spec);
                let found = build(db.query::<Item>(), spec).run().unwrap();
                prop_assert_eq!(&found, &expected, "{:?}", spec);
                let in_rust = build(db.query::<Item>().__in_rust(), spec).run().unwrap();
                prop_assert_eq!(&in_rust, &expected, "in Rust: {:?}", spec);
            }
            Ok(())
        })
        .unwrap();
}
