//! A subject of scenarios 1 and 2: a library, or the floor client.

use anyhow::Result;

use crate::floor::Floor;
use crate::libs::{Kind, Lib};

/// What runs a scenario-1 or -2 round: a library, or the floor client (one
/// blocking connection per task). Held once per subject, so unboxed.
#[allow(clippy::large_enum_variant)]
pub enum Runner {
    Lib(Lib),
    Floor(Vec<Floor>),
}

/// One subject of an interleaved scenario, connected once for all its rounds.
pub struct Subject {
    pub kind: Kind,
    pub runner: Runner,
}

impl Subject {
    /// Connect `kind`; the floor opens `floor_connections` connections, the
    /// pipelined floor one.
    pub async fn connect(kind: Kind, url: &str, floor_connections: usize) -> Result<Subject> {
        let floor_connections = if kind == Kind::FloorP {
            1
        } else {
            floor_connections
        };
        let runner = if matches!(kind, Kind::Floor | Kind::FloorP) {
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
}
