//! One constructor per lock kind, for the tests that run the same check
//! over every kind (`Make<K>`).

use redisson_lock::{Client, Lock};

/// Makes the lock `name` of one kind on a client.
pub type Make<K> = fn(&Client, &str) -> Lock<K>;

pub fn rlock(c: &Client, n: &str) -> Lock<redisson_lock::Reentrant> {
    c.lock(n).unwrap()
}
pub fn fair(c: &Client, n: &str) -> Lock<redisson_lock::Fair> {
    c.fair_lock(n).unwrap()
}
pub fn non_reentrant_fair(c: &Client, n: &str) -> Lock<redisson_lock::NonReentrantFair> {
    c.non_reentrant_fair_lock(n).unwrap()
}
pub fn non_reentrant(c: &Client, n: &str) -> Lock<redisson_lock::NonReentrant> {
    c.non_reentrant_lock(n).unwrap()
}
pub fn spin(c: &Client, n: &str) -> Lock<redisson_lock::Spin> {
    c.spin_lock(n).unwrap()
}
pub fn fenced(c: &Client, n: &str) -> Lock<redisson_lock::Fenced> {
    c.fenced_lock(n).unwrap()
}
pub fn read(c: &Client, n: &str) -> Lock<redisson_lock::Read> {
    c.read_write_lock(n).unwrap().read()
}
pub fn write(c: &Client, n: &str) -> Lock<redisson_lock::Write> {
    c.read_write_lock(n).unwrap().write()
}
