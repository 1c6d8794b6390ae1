//! One constructor per lock kind, for the tests that run the same check
//! over every kind (`Make<K>`).

use redisson_lock::{Client, Lock};

/// Makes the lock `name` of one kind on a client.
pub type Make<K> = fn(&Client, &str) -> Lock<K>;

/// `name: Kind = |c, n| constructor;` makes `pub fn name(c, n) -> Lock<Kind>`.
macro_rules! makers {
    ($($name:ident: $kind:ident = |$c:ident, $n:ident| $make:expr;)*) => {
        $(pub fn $name($c: &Client, $n: &str) -> Lock<redisson_lock::$kind> {
            $make
        })*
    };
}

makers! {
    rlock: Reentrant = |c, n| c.lock(n).unwrap();
    fair: Fair = |c, n| c.fair_lock(n).unwrap();
    non_reentrant_fair: NonReentrantFair = |c, n| c.non_reentrant_fair_lock(n).unwrap();
    non_reentrant: NonReentrant = |c, n| c.non_reentrant_lock(n).unwrap();
    spin: Spin = |c, n| c.spin_lock(n).unwrap();
    fenced: Fenced = |c, n| c.fenced_lock(n).unwrap();
    read: Read = |c, n| c.read_write_lock(n).unwrap().read();
    write: Write = |c, n| c.read_write_lock(n).unwrap().write();
}
