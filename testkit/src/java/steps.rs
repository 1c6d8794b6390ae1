//! The log of what each side did, shared by the peer and the test.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The logs made on each test's thread (see [`Steps::of_test`]).
static REGISTRY: Mutex<Vec<(String, Vec<Steps>)>> = Mutex::new(Vec::new());

/// The sequence of what each side did, shared by the peer and the test.
#[derive(Clone)]
pub struct Steps {
    start: Instant,
    lines: Arc<Mutex<Vec<String>>>,
    /// Printed at the top of every failure: `Redisson 4.7.0, <scenario>`.
    pub label: String,
}

impl Steps {
    /// A new log labelled `label`, registered under the current thread's
    /// name (see [`of_test`](Self::of_test)).
    pub fn new(label: impl Into<String>) -> Steps {
        let steps = Steps {
            start: Instant::now(),
            lines: Arc::new(Mutex::new(Vec::new())),
            label: label.into(),
        };
        if let Some(test) = std::thread::current().name() {
            let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
            match registry.iter_mut().find(|(t, _)| t == test) {
                Some((_, list)) => list.push(steps.clone()),
                None => registry.push((test.to_string(), vec![steps.clone()])),
            }
        }
        steps
    }

    /// Every log [`new`](Self::new) made on the thread named `test` (a
    /// test's own thread), for a test that ran out of time.
    pub fn of_test(test: &str) -> String {
        let registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for (_, list) in registry.iter().filter(|(t, _)| t == test) {
            for steps in list {
                out.push_str(&format!("[{}]\n{}", steps.label, steps.dump()));
            }
        }
        out
    }

    /// Record one step (`rust: ...`, `java t1: ...`).
    pub fn note(&self, what: impl AsRef<str>) {
        let line = format!(
            "{:>7.1} ms  {}",
            self.start.elapsed().as_secs_f64() * 1000.0,
            what.as_ref()
        );
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    /// The log so far, one step per line.
    pub fn dump(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let skip = lines.len().saturating_sub(150);
        let mut out = String::new();
        if skip > 0 {
            out.push_str(&format!("  ... {skip} earlier steps\n"));
        }
        for l in &lines[skip..] {
            out.push_str("  ");
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    /// Panic with `msg`, the label and the steps.
    #[track_caller]
    pub fn fail(&self, msg: impl AsRef<str>) -> ! {
        panic!(
            "[{}] {}\nsteps (both sides, in order):\n{}",
            self.label,
            msg.as_ref(),
            self.dump()
        )
    }

    /// Assert `cond`, else [`fail`](Self::fail) with `msg`.
    #[track_caller]
    pub fn check(&self, cond: bool, msg: impl AsRef<str>) {
        if !cond {
            self.fail(msg);
        }
    }

    /// Assert equality, naming both values.
    #[track_caller]
    pub fn eq<T: PartialEq + std::fmt::Debug>(&self, got: T, want: T, what: impl AsRef<str>) {
        if got != want {
            self.fail(format!("{}: got {got:?}, expected {want:?}", what.as_ref()));
        }
    }
}
