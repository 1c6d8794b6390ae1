//! Bad input gets a clear typed error, never a panic or a hang, and leaves
//! Redis exactly as it was: arguments at every boundary, names of every
//! shape, keys of the wrong type and settings out of range, for every lock
//! kind (`arguments`); the errors of bad calls, a closed client and an
//! unreachable server (`typed_errors`).
mod common;

#[path = "bad_input/arguments.rs"]
mod arguments;
#[path = "bad_input/typed_errors.rs"]
mod typed_errors;
