//! Locks on the other server topologies, each of real local processes the
//! harness starts: a Redis [`cluster`] (3 masters, 3 replicas), [`sentinel`]
//! (1 master, 1 replica, 3 sentinels) and a master with [`replicas`]
//! (`Config::replica_sync`).
mod common;

#[path = "topologies/cluster.rs"]
mod cluster;
#[path = "topologies/replicas.rs"]
mod replicas;
#[path = "topologies/sentinel.rs"]
mod sentinel;
