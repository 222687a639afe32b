// Generated code must name everything by absolute path: the entity's module
// has no prelude and shadows the names a careless expansion would pick up.
#![deny(warnings)]

mod entity {
    #![no_implicit_prelude]
    #![allow(dead_code)]

    extern crate autoshard;
    extern crate std;

    use autoshard::{shard_fold, shard_method, Pending, Shardable};

    struct Result;
    struct Option;
    struct Some;
    struct None;
    struct Ok;
    struct Err;
    struct String;
    struct Vec;
    trait Clone {}
    trait Default {}
    mod core {}

    #[derive(Shardable)]
    pub struct Question {
        #[shard(id)]
        pub id: std::string::String,
        pub title: std::string::String,
        #[shard(neutral = 0, shards = 4)]
        pub votes: i64,
        #[shard(neutral = std::vec::Vec::new())]
        pub tags: std::vec::Vec<std::string::String>,
        #[shard(pending)]
        pub pending: Pending<Self>,
    }

    impl Question {
        #[shard_method]
        pub fn vote(&mut self, tag: std::string::String) -> i64 {
            self.votes += 1;
            self.tags.push(tag);
            self.votes
        }

        #[shard_fold]
        fn fold_votes(a: i64, b: i64) -> i64 {
            a + b
        }

        #[shard_fold]
        fn fold_tags(
            mut a: std::vec::Vec<std::string::String>,
            b: std::vec::Vec<std::string::String>,
        ) -> std::vec::Vec<std::string::String> {
            std::iter::Extend::extend(&mut a, b);
            a.sort();
            a
        }
    }
}

use autoshard::{Pending, Store};
use entity::Question;

fn main() {
    let db = autoshard::Sqlite::memory().unwrap();
    let question = Question {
        id: "q".into(),
        title: "hygiene".into(),
        votes: 0,
        tags: Vec::new(),
        pending: Pending::default(),
    };
    db.insert(&question).unwrap();
    let mut q: Question = db.load(&"q".to_owned()).unwrap().unwrap();
    assert_eq!(q.vote("a".into()), 1);
    db.save(&mut q).unwrap();
    let q: Question = db.load(&"q".to_owned()).unwrap().unwrap();
    assert_eq!(
        (q.votes, q.tags, q.title.as_str()),
        (1, vec!["a".to_owned()], "hygiene")
    );
}
