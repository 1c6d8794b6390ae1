//! Exit statuses (the `sysexits.h` numbers where one fits, so that `run`'s
//! own statuses stay apart from the small numbers commands usually return)
//! and the tool's error type.

use std::fmt;

/// Success.
pub const OK: u8 = 0;
/// `status`: nothing under the name; `force-unlock`: nothing was held.
pub const NOT_FOUND: u8 = 1;
/// Bad command line (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// Redis unreachable or unavailable (`EX_UNAVAILABLE`).
pub const UNAVAILABLE: u8 = 69;
/// Any other error (`EX_SOFTWARE`).
pub const SOFTWARE: u8 = 70;
/// `run`: the lock could not be had within `--wait` (`EX_TEMPFAIL`).
pub const BUSY: u8 = 75;
/// `run`: the lock was lost while the command ran.
pub const LOST: u8 = 76;
/// Credentials or ACL refused (`EX_NOPERM`).
pub const NOPERM: u8 = 77;
/// Invalid configuration, e.g. a bad URL (`EX_CONFIG`).
pub const CONFIG: u8 = 78;
/// `run`: the command exists but could not be executed (as shells).
pub const CANNOT_EXECUTE: u8 = 126;
/// `run`: the command was not found (as shells).
pub const NOT_FOUND_COMMAND: u8 = 127;

/// What went wrong, and so which status to exit with.
#[derive(Debug)]
pub enum CliError {
    /// From the library.
    Lock(redisson_lock::Error),
    /// From a raw Redis command the tool sends itself.
    Redis(redisson_lock::fred::error::Error),
    /// Anything else, with its status.
    Other(u8, String),
}

impl CliError {
    pub fn status(&self) -> u8 {
        use redisson_lock::fred::error::ErrorKind;
        use redisson_lock::Error;
        match self {
            CliError::Lock(e) if e.is_transient() => UNAVAILABLE,
            CliError::Lock(Error::Auth(_)) => NOPERM,
            CliError::Lock(Error::Config(_)) => CONFIG,
            CliError::Lock(Error::InvalidArgument(_) | Error::InvalidName { .. }) => USAGE,
            CliError::Lock(_) => SOFTWARE,
            CliError::Redis(e) => match e.kind() {
                ErrorKind::IO | ErrorKind::Timeout | ErrorKind::Canceled => UNAVAILABLE,
                ErrorKind::Auth => NOPERM,
                ErrorKind::Config | ErrorKind::Url => CONFIG,
                _ if e.details().starts_with("NOPERM") => NOPERM,
                _ => SOFTWARE,
            },
            CliError::Other(status, _) => *status,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Lock(e) => write!(f, "{e}"),
            CliError::Redis(e) => write!(f, "Redis error: {}", e.details()),
            CliError::Other(_, m) => f.write_str(m),
        }
    }
}

impl From<redisson_lock::Error> for CliError {
    fn from(e: redisson_lock::Error) -> Self {
        CliError::Lock(e)
    }
}

impl From<redisson_lock::fred::error::Error> for CliError {
    fn from(e: redisson_lock::fred::error::Error) -> Self {
        CliError::Redis(e)
    }
}

pub type CliResult<T> = Result<T, CliError>;
