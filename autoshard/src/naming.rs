//! Which names may become SQL identifiers, and the table names derived from
//! them. Names are checked against an allow-list and then quoted anyway, so
//! neither a hostile nor an unlucky name can ever become SQL.

use crate::error::{Error, Result};

/// Longest kind (or board) name: keeps every derived table name under
/// PostgreSQL's 63-byte identifier limit, where longer names would be
/// truncated and could collide silently.
pub const MAX_NAME_LEN: usize = 48;

/// Checks a kind name and returns the lower-cased form used in table names
/// (SQL identifiers are case-insensitive, so `Question` and `question` would
/// share tables; the stores' registries reject that pair).
pub fn table_base(name: &str) -> Result<String> {
    let invalid = |reason: &str| Error::InvalidName {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(invalid("must be 1 to 48 bytes long"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return Err(invalid("must start with an ASCII letter or `_`"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(invalid("may only contain ASCII letters, digits and `_`"));
    }
    Ok(name.to_ascii_lowercase())
}

/// `"name"`, for a name that passed [`table_base`].
pub fn quote(identifier: &str) -> String {
    debug_assert!(!identifier.contains('"'));
    format!("\"{identifier}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_names_and_lowercases() {
        assert_eq!(table_base("Question").unwrap(), "question");
        assert_eq!(table_base("_x9").unwrap(), "_x9");
    }

    #[test]
    fn rejects_hostile_names() {
        for name in [
            "",
            "9lives",
            "a b",
            "q\"; DROP TABLE x; --",
            "naïve",
            "a-b",
            &"x".repeat(49),
        ] {
            let err = table_base(name).unwrap_err();
            assert!(matches!(err, Error::InvalidName { .. }), "{name}: {err}");
        }
    }
}
