//! A subject of scenarios 1 and 2: a library, or the floor client.

use anyhow::Result;

use crate::floor::Floor;
use crate::java::{Java, JavaSpec};
use crate::libs::{Kind, Lib};

/// What runs a scenario-1 or -2 round: a library, or the floor client (one
/// blocking connection per task). Held once per subject, so unboxed.
#[allow(clippy::large_enum_variant)]
pub enum Runner {
    Lib(Lib),
    Floor(Vec<Floor>),
    /// The JVM, whose threads run the round (`java.rs`).
    Java(Java),
}

/// One subject of an interleaved scenario, connected once for all its rounds.
pub struct Subject {
    pub kind: Kind,
    pub runner: Runner,
}

impl Subject {
    /// Connect `kind`; the floor opens `floor_connections` connections, the
    /// pipelined floor one; Java starts (and warms) a JVM.
    pub async fn connect(
        kind: Kind,
        url: &str,
        floor_connections: usize,
        java: Option<&JavaSpec>,
    ) -> Result<Subject> {
        let floor_connections = if kind == Kind::FloorP {
            1
        } else {
            floor_connections
        };
        let runner = if let (true, Some(java)) = (kind.is_java(), java) {
            // Scenario 1 runs one thread's pairs, scenario 2 many threads'.
            let path = if floor_connections > 1 {
                crate::java::Warm::Parallel
            } else {
                crate::java::Warm::Pairs
            };
            Runner::Java(java.start(kind, url, path).await?)
        } else if matches!(kind, Kind::Floor | Kind::FloorP) {
            let url = url.to_owned();
            Runner::Floor(
                tokio::task::spawn_blocking(move || {
                    (0..floor_connections)
                        .map(|_| Floor::connect(&url))
                        .collect::<Result<Vec<_>>>()
                })
                .await??,
            )
        } else {
            Runner::Lib(Lib::connect(kind, url).await?)
        };
        Ok(Subject { kind, runner })
    }

    /// The JVM's pid when the subject is Java (its CPU is the client's).
    pub fn jvm(&self) -> Option<u32> {
        match &self.runner {
            Runner::Java(java) => Some(java.pid()),
            _ => None,
        }
    }
}
