//! Lock names as users give them: the [`NameMapper`] every name goes
//! through, and the check every name passes.

use crate::base::error::{Error, Result};

/// Maps every lock name to the name Redis sees, like Redisson's
/// `NameMapper`: a prefix per tenant or environment, applied to the key of
/// every lock kind and so to every key and channel derived from it. Set it
/// with [`Config::name_mapper`](crate::Config::name_mapper); mirror the Java
/// side's mapper to share locks with it.
pub trait NameMapper: std::fmt::Debug + Send + Sync + 'static {
    /// The name Redis sees for the lock `name`.
    fn map(&self, name: &str) -> String;
    /// The lock name of a name Redis sees (the inverse of [`map`](Self::map)).
    fn unmap(&self, name: &str) -> String;
}

/// A [`NameMapper`] that puts a fixed prefix before every name.
///
/// ```
/// use redisson_lock::{NameMapper, PrefixMapper};
///
/// let mapper = PrefixMapper::new("staging:");
/// assert_eq!(mapper.map("orders"), "staging:orders");
/// assert_eq!(mapper.unmap("staging:orders"), "orders");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixMapper {
    prefix: String,
}

impl PrefixMapper {
    /// Prefix every name with `prefix`.
    pub fn new(prefix: impl Into<String>) -> PrefixMapper {
        PrefixMapper {
            prefix: prefix.into(),
        }
    }
}

impl NameMapper for PrefixMapper {
    fn map(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn unmap(&self, name: &str) -> String {
        name.strip_prefix(&self.prefix).unwrap_or(name).to_owned()
    }
}

/// Refuse names no lock can live under.
pub(crate) fn validate(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName {
            name: name.to_owned(),
            reason: "a lock name must not be empty",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_name_is_refused() {
        assert!(matches!(validate(""), Err(Error::InvalidName { .. })));
    }
}
