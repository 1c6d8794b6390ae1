//! Every script that writes (the locks', the semaphores' and the latch's)
//! checks its arguments before its first write (`lua/args.lua`): a bad one is refused with an `INVALID_ARGUMENT` error
//! naming its position, and Redis is left exactly as it was (keys, values,
//! TTLs, no latch, nothing published). Each script is also run once with good
//! arguments, to show that the checks let them through.
//!
//! The scripts are run by plain EVAL, their bodies concatenated the way
//! `src/connection/script.rs` does it.
mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use bench::Bench;
use fred::prelude::*;

/// The files in `lua/`, concatenated in order, the rest run through
/// `args.lua`'s `run_body` (as `script!` in src/connection/script.rs).
macro_rules! body {
    ("args.lua", $($file:literal),+) => {
        concat!(
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/args.lua")),
            "\nreturn run_body(function()\n",
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),)+
            "\nend)\n"
        )
    };
}

/// A permit-expirable-semaphore script: `count.lua`, `pes_reclaim.lua`, then
/// the file.
macro_rules! pes_body {
    ($file:literal) => {
        body!("args.lua", "count.lua", "pes_reclaim.lua", $file)
    };
}

/// What an argument is, and so which values it must refuse.
#[derive(Clone, Copy)]
enum Kind {
    /// Milliseconds, 1..=100 years.
    Ms,
    /// Milliseconds, 0..=100 years (the fair-lock thread-wait time).
    Ms0,
    /// The caller's epoch milliseconds.
    Epoch,
    /// How many owner fields follow (rw_renew_read).
    Count,
    /// An owner field or a message: any non-empty string.
    Text,
    /// "PUBLISH" or "SPUBLISH".
    Publish,
    /// "0" or "1".
    Flag,
    /// A permit count, 1..=i32::MAX.
    Permits,
    /// A permit count, 0..=i32::MAX.
    Permits0,
    /// A change of permits, i32::MIN..=i32::MAX.
    Delta,
    /// A latch count, 1..=2^53 - 1.
    Positive,
    /// A permit id: 16 bytes.
    Id,
}

const I64_MAX: &str = "9223372036854775807";

impl Kind {
    fn bad_values(self) -> &'static [&'static str] {
        match self {
            Kind::Ms => &[
                I64_MAX,
                "0",
                "-1",
                "abc",
                "1.5",
                "",
                "3155760000001",
                "1e3",
                "01",
                " 5",
            ],
            Kind::Ms0 => &[I64_MAX, "-1", "abc", "1.5", "", "3155760000001", "1e3"],
            Kind::Epoch => &["0", "-1", "abc", "1.5", "", "9007199254740992", I64_MAX],
            // Each test gives one owner per count: "2" claims one too many.
            Kind::Count => &["0", "-1", "abc", "1.5", "", "2"],
            Kind::Text => &[""],
            Kind::Publish => &["publish", "SET", "DEL", "", "SPUBLISH "],
            Kind::Flag => &["2", "", "yes"],
            Kind::Permits => &["0", "-1", "abc", "1.5", "", "2147483648", "01", "1e3"],
            Kind::Permits0 => &["-1", "abc", "1.5", "", "2147483648", "01"],
            Kind::Delta => &[
                "abc",
                "1.5",
                "",
                "2147483648",
                "-2147483649",
                "--1",
                "-0",
                "01",
                "+1",
            ],
            Kind::Positive => &["0", "-1", "abc", "", "9007199254740992", I64_MAX],
            Kind::Id => &["", "short", "0123456789abcdefX"],
        }
    }
}

/// One script call: body, keys, good arguments with their kinds, and every
/// key whose state must not change when an argument is refused.
struct Case {
    body: &'static str,
    keys: Vec<String>,
    args: Vec<(Kind, String)>,
    watch: Vec<String>,
}

/// `case!(body; keys…; Kind value, …; watched…)`: a [`Case`]; keys and
/// watched keys are `String` locals (cloned), each value goes through [`s`],
/// and `..watch` gives the watched keys as one `Vec`.
macro_rules! case {
    ($body:expr; $($key:ident),+; $($kind:ident $value:expr),+; ..$watch:expr) => {
        $crate::Case {
            body: $body,
            keys: vec![$($key.clone()),+],
            args: vec![$(($crate::Kind::$kind, $crate::s($value))),+],
            watch: $watch,
        }
    };
    ($body:expr; $($key:ident),+; $($kind:ident $value:expr),+; $($watched:ident),+) => {
        case!($body; $($key),+; $($kind $value),+; ..vec![$($watched.clone()),+])
    };
}

impl Case {
    fn good(&self) -> Vec<String> {
        self.args.iter().map(|(_, v)| v.clone()).collect()
    }
}

// The tests, by kind (declared after the macros above, which they use).
#[path = "scripts/bench.rs"]
mod bench;
#[path = "scripts/fair.rs"]
mod fair;
#[path = "scripts/locks.rs"]
mod locks;
#[path = "scripts/rw.rs"]
mod rw;
#[path = "scripts/sync.rs"]
mod sync;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// An array reply's elements as integers.
fn ints(reply: Value) -> Vec<Option<i64>> {
    reply.into_array().iter().map(|v| v.as_i64()).collect()
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

fn latch(name: &str) -> String {
    format!(
        "redisson_unlock_latch:{{{name}}}:{}",
        uuid::Uuid::new_v4().simple()
    )
}

/// The fair lock's keys: N, Q, Z, channel base.
fn fair_keys(name: &str) -> [String; 4] {
    [
        name.to_string(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("redisson_lock__channel:{{{name}}}"),
    ]
}

#[tokio::test]
async fn args_error_text() {
    let t = Bench::new("text").await;
    let keys = vec![t.name.clone()];
    // The lock script's error for these arguments.
    let refused = |args: Vec<String>| async {
        let body = body!("args.lua", "lock.lua");
        t.eval(body, &keys, args).await.unwrap_err()
    };
    let error = refused(vec![s("abc"), s("c:1")]).await;
    assert!(
        error.details().starts_with(
            "INVALID_ARGUMENT ARGV[1] must be an integer of milliseconds in [1, 3155760000000], got \"abc\""
        ),
        "{error:?}"
    );
    let error = refused(vec![s("1000")]).await;
    assert!(
        error
            .details()
            .starts_with("INVALID_ARGUMENT ARGV[2] must be a non-empty string, got nothing"),
        "{error:?}"
    );
    let error = refused(vec![s("1\r\n2"), s("c:1")]).await;
    assert!(error.details().contains("got \"1??2\""), "{error:?}");
    assert_eq!(t.cmd(&["EXISTS", &t.name]).await.as_i64(), Some(0));
}
