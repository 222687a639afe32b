//! The [`Shardable`] trait, entity ids, and [`Pending`].

pub(crate) mod check;
pub(crate) mod document;
pub(crate) mod support;
use crate::error::{Error, Result};
use crate::value::Value;
use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};

/// A struct that autoshard can persist with property sharding.
///
/// Implement it with `#[derive(Shardable)]`; the items whose names start with
/// `__` are generated plumbing for the stores and not part of the API.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a shardable entity",
    label = "`{Self}` does not implement `Shardable`",
    note = "add `#[derive(autoshard::Shardable)]` to the declaration of `{Self}`"
)]
pub trait Shardable: Sized {
    /// The type of the `#[shard(id)]` field.
    type Id: EntityId;
    #[doc(hidden)]
    type __Pending: Send + Sync + 'static;
    /// The entity kind: the struct's name, or `#[shard(kind = "...")]`.
    /// Stores derive their table names from it.
    const KIND: &'static str;
    #[doc(hidden)]
    const __FIELDS: &'static [FieldSpec];
    #[doc(hidden)]
    const __RANKED: crate::__private::Ranked = crate::__private::Ranked::NONE;

    /// The entity's id.
    fn id(&self) -> &Self::Id;

    #[doc(hidden)]
    fn __neutral() -> Self::__Pending;
    #[doc(hidden)]
    fn __pending_mut(&mut self) -> Option<&mut Pending<Self>>;
    #[doc(hidden)]
    fn __pending_ref(&self) -> Option<&Pending<Self>>;
    #[doc(hidden)]
    fn __swap_pending(&mut self);
    #[doc(hidden)]
    fn __encode_document(&self) -> Result<String>;
    #[doc(hidden)]
    fn __encode_field(&self, field: usize) -> Result<Value>;
    #[doc(hidden)]
    fn __encode_pending(&mut self, field: usize) -> Result<Option<Value>>;
    #[doc(hidden)]
    fn __check_field(
        &self,
        field: usize,
        base: &Value,
        delta: Option<&Value>,
    ) -> Result<crate::__private::Checked>;
    #[doc(hidden)]
    fn __fold(
        field: usize,
        values: &mut dyn Iterator<Item = Value>,
    ) -> std::result::Result<Value, crate::fold::FoldError>;
    #[doc(hidden)]
    fn __from_parts(id: Self::Id, parts: &mut crate::__private::Parts) -> Result<Self>;
}

/// An entity id as a store keys it: an integer or a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key<'a> {
    /// Integer ids (stored as a 64-bit signed integer).
    Int(i64),
    /// String ids.
    Text(&'a str),
}

/// Whether a kind's ids are integers or strings; fixes the id column type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// Integer ids.
    Int,
    /// String ids.
    Text,
}

impl KeyKind {
    /// The name every store records for the kind in its registry, so a
    /// changed id type is caught on open.
    pub(crate) fn registry_name(self) -> &'static str {
        match self {
            KeyKind::Int => "integer",
            KeyKind::Text => "text",
        }
    }
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Int(i) => write!(f, "{i}"),
            Key::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// Types usable as `#[shard(id)]`: the integer types and `String`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an entity id",
    label = "not an integer type or `String`",
    note = "a `#[shard(id)]` field is an integer (stored as i64) or a `String`"
)]
pub trait EntityId: Clone + fmt::Debug + Send + Sync + 'static {
    /// Integer or string.
    const KEY_KIND: KeyKind;
    /// The key to store; fails for `u64` ids above `i64::MAX`, which no
    /// 64-bit signed id column can hold.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an integer
    /// id that does not fit `i64`.
    fn key(&self) -> Result<Key<'_>>;

    /// The id a stored key came from (a query reads keys, not ids); `None`
    /// for a key this type cannot have produced.
    #[doc(hidden)]
    fn __from_key(key: Key<'_>) -> Option<Self>;
}

macro_rules! int_ids {
    ($($t:ty),*) => {$(
        impl EntityId for $t {
            const KEY_KIND: KeyKind = KeyKind::Int;
            fn key(&self) -> Result<Key<'_>> {
                i64::try_from(*self).map(Key::Int).map_err(|_| Error::InvalidName {
                    name: self.to_string(),
                    reason: "integer ids must fit in i64".into(),
                })
            }
            fn __from_key(key: Key<'_>) -> Option<Self> {
                match key {
                    Key::Int(i) => <$t>::try_from(i).ok(),
                    Key::Text(_) => None,
                }
            }
        }
    )*};
}
int_ids!(i8, i16, i32, i64, u8, u16, u32, u64, usize);

impl EntityId for String {
    const KEY_KIND: KeyKind = KeyKind::Text;
    fn key(&self) -> Result<Key<'_>> {
        Ok(Key::Text(self))
    }
    fn __from_key(key: Key<'_>) -> Option<Self> {
        match key {
            Key::Text(s) => Some(s.to_owned()),
            Key::Int(_) => None,
        }
    }
}

/// Longest string id, in bytes of UTF-8, on every store: `insert`, `load`,
/// `save`, `delete` and `shard_count` refuse a longer one with
/// [`Error::InvalidValue`] (field `<id>`) before any SQL runs.
///
/// PostgreSQL keeps the id in B-tree indexes, whose rows may not exceed a
/// third of a page (2,704 bytes of an 8 KiB page, less what compression
/// saves), and a shard-table index row holds the field name as well; 1,024
/// bytes leaves room for both. SQLite has no such limit but gets the same
/// one, so a program that runs on one store runs on the other.
pub const MAX_ID_LEN: usize = 1024;

/// The key of `id`, with a string id held to [`MAX_ID_LEN`]: every entity
/// call of the public API makes its key here.
pub(crate) fn key_of<T: Shardable>(id: &T::Id) -> Result<Key<'_>> {
    match id.key()? {
        Key::Text(s) if s.len() > MAX_ID_LEN => Err(Error::InvalidValue {
            kind: T::KIND,
            field: "<id>",
            reason: format!(
                "a string id is at most autoshard::MAX_ID_LEN = {MAX_ID_LEN} bytes long; \
                 this one is {} bytes",
                s.len()
            ),
        }),
        key => Ok(key),
    }
}

/// The unsaved shard deltas of an entity, and what it looked like when last
/// loaded, inserted or saved.
///
/// Declare one field of this type with `#[shard(pending)]` and initialise it
/// with `Pending::default()`. Shard methods write into it; `save` folds it
/// into the store and resets it to the neutral elements.
///
/// Two `Pending` values always compare equal, so `#[derive(PartialEq)]` on an
/// entity compares its data, not its bookkeeping.
///
/// Cloning an entity (`#[derive(Clone)]`) while it holds unsaved changes
/// gives copies that share those changes; only the first copy to save them
/// may ([`Error::StaleCopy`] for the others), so they are stored once.
pub struct Pending<T> {
    // A Mutex (not a plain field) so `insert(&entity)` can reset the deltas
    // through a shared reference; `&mut` access uses `get_mut` and never locks.
    state: Mutex<State>,
    _entity: PhantomData<fn() -> T>,
}

struct State {
    // `T::__Pending` behind `Any`: naming the associated type in the struct
    // would require `T: Shardable` wherever `Pending<Self>` is written, which a
    // generic entity's own declaration cannot promise.
    values: Box<dyn Any + Send + Sync>,
    // The unsharded document as last read or written, to skip writing the
    // main row when only sharded fields changed.
    snapshot: Option<String>,
    mode: Mode,
    // The incarnation of the stored entity this object was loaded or
    // inserted as; `None` for an object built in code.
    incarnation: Option<i64>,
    // Per sharded field, its aggregate as last loaded, inserted or saved,
    // encoded (empty for an object built in code): with the pending delta
    // it says what the store will hold, so a save can tell a field changed
    // outside a shard method. Encoded because the field types need not be
    // `Clone`.
    bases: Vec<Value>,
    // Shared by the copies `clone` made while deltas were pending.
    copies: Option<Arc<Copies>>,
}

/// What copies of one object that share pending deltas know of each other:
/// whether one of them committed those deltas. Saves of the copies take
/// turns on the lock, so two cannot both commit them.
#[derive(Default)]
pub(crate) struct Copies {
    committed: Mutex<bool>,
}

impl Copies {
    /// Waits for the other copies' saves; the guard holds whether one of
    /// them committed the shared deltas.
    pub(crate) fn turn(&self) -> MutexGuard<'_, bool> {
        // A panic in a fold during another copy's save poisons the lock;
        // the flag is still right, since that save did not commit.
        self.committed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// [`Pending::bases`].
pub(crate) struct Bases<'a>(MutexGuard<'a, State>);

impl std::ops::Deref for Bases<'_> {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.0.bases
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    Idle,
    ShardRun,
    AggregateRun,
}

impl<T: Shardable> Default for Pending<T> {
    fn default() -> Self {
        Self::with_snapshot(None)
    }
}

impl<T: Shardable> Pending<T> {
    /// A pending value holding the neutral elements.
    pub fn new() -> Self {
        Self::default()
    }

    fn with_snapshot(snapshot: Option<String>) -> Self {
        Pending {
            state: Mutex::new(State {
                values: Box::new(T::__neutral()),
                snapshot,
                mode: Mode::Idle,
                incarnation: None,
                bases: Vec::new(),
                copies: None,
            }),
            _entity: PhantomData,
        }
    }

    #[doc(hidden)]
    pub fn __loaded(document: &str) -> Self {
        Self::with_snapshot(Some(document.to_owned()))
    }

    fn state(&mut self) -> &mut State {
        self.state.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn values_mut(&mut self) -> &mut T::__Pending {
        self.state()
            .values
            .downcast_mut()
            .expect("Pending holds T::__Pending by construction")
    }

    pub(crate) fn mode(&mut self) -> Mode {
        self.state().mode
    }

    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.state().mode = mode;
    }

    pub(crate) fn snapshot(&mut self) -> Option<&str> {
        self.state().snapshot.as_deref()
    }

    pub(crate) fn incarnation(&mut self) -> Option<i64> {
        self.state().incarnation
    }

    /// The copies this object shares its pending deltas with, if any.
    pub(crate) fn copies(&mut self) -> Option<Arc<Copies>> {
        self.state().copies.clone()
    }

    /// The copy token of the pending deltas, made if there is none yet: a
    /// write in flight on another thread holds it as a copy would
    /// (`mapper::OwnedSave`).
    #[cfg(feature = "tokio")]
    pub(crate) fn share_copies(&mut self) -> Arc<Copies> {
        self.state().copies.get_or_insert_with(Arc::default).clone()
    }

    /// The aggregates as last loaded, inserted or saved (none for an
    /// object built in code), through a shared reference so that a save
    /// can compare them with the entity's fields.
    pub(crate) fn bases(&self) -> Bases<'_> {
        Bases(self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// After a load: which incarnation the object came from, and its
    /// aggregates as loaded.
    pub(crate) fn loaded(&mut self, incarnation: i64, bases: Vec<Value>) {
        let state = self.state();
        state.incarnation = Some(incarnation);
        state.bases = bases;
    }

    /// After a committed save: the store now holds `document` and every
    /// delta, so start over from neutral; `bases` are the new aggregates of
    /// the fields that had a delta. The object shares nothing with its
    /// copies any more.
    pub(crate) fn committed(&mut self, document: String, bases: Vec<(usize, Value)>) {
        let state = self.state();
        state.values = Box::new(T::__neutral());
        state.snapshot = Some(document);
        for (index, base) in bases {
            state.bases[index] = base;
        }
        state.copies = None;
    }

    /// After a committed insert, through a shared reference: a new
    /// incarnation holding `bases` and `document`.
    pub(crate) fn inserted(&self, document: String, incarnation: i64, bases: Vec<Value>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.values = Box::new(T::__neutral());
        state.snapshot = Some(document);
        state.incarnation = Some(incarnation);
        state.bases = bases;
        state.copies = None;
    }

    pub(crate) fn is_poisoned_shared(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).mode != Mode::Idle
    }
}

/// A copy made while deltas are pending shares them, and with them a copy
/// token, so only one copy can commit them; a copy made with nothing
/// pending is as independent as a second load.
impl<T: Shardable> Clone for Pending<T>
where
    T::__Pending: Clone + PartialEq,
{
    fn clone(&self) -> Self {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let values: &T::__Pending = state.values.downcast_ref().expect("by construction");
        let values = values.clone();
        let copies = if values == T::__neutral() {
            None
        } else {
            Some(state.copies.get_or_insert_with(Arc::default).clone())
        };
        Pending {
            state: Mutex::new(State {
                values: Box::new(values),
                snapshot: state.snapshot.clone(),
                mode: state.mode,
                incarnation: state.incarnation,
                bases: state.bases.clone(),
                copies,
            }),
            _entity: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pending { .. }")
    }
}

impl<T> PartialEq for Pending<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// One sharded field as declared: its name and `shards = N` or
/// `shards = LOW..=HIGH` (neither: dynamic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// The field's name, which is also its key in the shard table.
    pub name: &'static str,
    /// Static shard count (`N`, or `HIGH` of an automatic count), or `None`
    /// for dynamic sharding. Code that does not know automatic counts
    /// (compaction's surplus, Redis Cluster) sees an automatic field as
    /// static with `HIGH` shards, which is never wrong, only wasteful.
    pub shards: Option<u32>,
    /// `LOW` of an automatic count, `None` for every other field.
    pub min_shards: Option<u32>,
}

impl FieldSpec {
    /// `LOW..=HIGH` of an automatic field.
    pub(crate) fn auto_range(&self) -> Option<(u32, u32)> {
        Some((self.min_shards?, self.shards?))
    }

    /// Rows an insert writes: `N` of a static field, `LOW` of an automatic
    /// one, one of a dynamic one.
    pub(crate) fn initial_shards(&self) -> u32 {
        self.min_shards.or(self.shards).unwrap_or(1)
    }
}
