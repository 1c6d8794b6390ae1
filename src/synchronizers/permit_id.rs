//! [`PermitId`], the id of a permit-expirable semaphore's permit, and
//! [`PermitLease`], what its remaining lease is.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use fred::types::Value;

use crate::base::error::Error;

/// The id of one permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore): 16 random bytes,
/// stored as such in Redis (Redisson ≥ 3.17) and shown, as Java shows it,
/// as 32 lowercase hex digits. Parse that text back with [`str::parse`].
///
/// ```
/// use redisson_lock::PermitId;
///
/// let id: PermitId = "00112233445566778899aabbccddeeff".parse()?;
/// assert_eq!(id.to_string(), "00112233445566778899aabbccddeeff");
/// assert_eq!(id.as_bytes()[15], 0xff);
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId([u8; 16]);

impl PermitId {
    /// A new random id.
    pub fn random() -> PermitId {
        PermitId(rand::random())
    }

    /// The id of these 16 bytes (as stored in Redis).
    pub const fn from_bytes(bytes: [u8; 16]) -> PermitId {
        PermitId(bytes)
    }

    /// The 16 bytes stored in Redis.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    pub(crate) fn value(&self) -> Value {
        Value::Bytes(self.0.to_vec().into())
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

impl FromStr for PermitId {
    type Err = ParsePermitIdError;

    /// 32 hex digits (either case), as Java shows permit ids.
    fn from_str(text: &str) -> Result<PermitId, ParsePermitIdError> {
        let bad = || ParsePermitIdError {
            got: text.chars().take(40).collect(),
        };
        let digits = text.as_bytes();
        // Hex digits only (`from_str_radix` would also take a `+`).
        if digits.len() != 32 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(PermitId(bytes))
    }
}

/// Text that is not a [`PermitId`] (32 hex digits): what
/// [`str::parse`] returns for it. Converts into
/// [`Error::InvalidArgument`], so `?` works in code returning the crate's
/// [`Result`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsePermitIdError {
    /// The text, cut to 40 characters.
    got: String,
}

impl fmt::Display for ParsePermitIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a permit id is 32 hex digits, got {:?}", self.got)
    }
}

impl std::error::Error for ParsePermitIdError {}

impl From<ParsePermitIdError> for Error {
    fn from(e: ParsePermitIdError) -> Error {
        Error::InvalidArgument(e.to_string())
    }
}

/// The remaining lease of a permit ([`PermitExpirableSemaphore::lease_time`](crate::PermitExpirableSemaphore::lease_time)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PermitLease {
    /// The permit expires after this long (per the acquiring client's clock).
    Expires(Duration),
    /// The permit never expires (taken without a lease).
    Never,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_show_as_java_shows_them_and_parse_back() {
        let id = PermitId::from_bytes([
            0x00, 0x01, 0xab, 0xcd, 0xef, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90,
            0xa0, 0xff,
        ]);
        let text = id.to_string();
        assert_eq!(text, "0001abcdef102030405060708090a0ff");
        assert_eq!(text.parse::<PermitId>().unwrap(), id);
        assert_eq!(text.to_uppercase().parse::<PermitId>().unwrap(), id);
        for bad in [
            "",
            "0001",
            "zz01abcdef102030405060708090a0ff",
            "é01abcdef102030405060708090a0f",
        ] {
            let err = bad.parse::<PermitId>().unwrap_err();
            assert!(err.to_string().starts_with("a permit id is 32 hex digits"));
            assert!(matches!(Error::from(err), Error::InvalidArgument(_)));
        }
        assert_ne!(PermitId::random(), PermitId::random());
    }
}
