//! What every synchronizer handle is: its client, its name (the key of its
//! count) and the channel it publishes on, shared by the handle's clones.

use std::sync::Arc;
use std::time::Duration;

use crate::base::error::Result;
use crate::client::Client;
use crate::connection::pubsub::Wake;
use crate::engine::acquire::Wanted;
use crate::engine::shared::Inner;

/// A synchronizer's client, name and channel.
pub(crate) struct Handle {
    pub(crate) client: Client,
    /// `N`, after name mapping.
    pub(crate) name: String,
    /// The channel its changes are published on.
    pub(crate) channel: String,
}

impl Handle {
    /// The handle of `name` (mapped and checked) on `client`, whose
    /// channel `channel` derives from the mapped name.
    pub(crate) fn new(client: &Client, name: &str, channel: fn(&str) -> String) -> Result<Handle> {
        let name = client.map_name(name)?;
        Ok(Handle {
            client: client.clone(),
            channel: channel(&name),
            name,
        })
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.client.inner
    }

    /// A wait of at most `wait` (`None`: no time limit) on this handle,
    /// of the synchronizer kind `kind`, whose waiters its channel wakes as
    /// `wake` says.
    pub(crate) fn wanted(
        &self,
        kind: &'static str,
        wake: Wake,
        wait: Option<Duration>,
    ) -> Wanted<'_> {
        Wanted {
            kind,
            name: &self.name,
            channel: &self.channel,
            wake,
            wait,
            permits: None,
        }
    }
}

/// The accessors of a synchronizer handle type whose `shared.handle` is a
/// [`Handle`]; `$what` names it in their docs.
macro_rules! handle_accessors {
    ($type:ty, $what:literal, $wake:expr) => {
        impl $type {
            pub(crate) fn inner(&self) -> &std::sync::Arc<crate::engine::shared::Inner> {
                self.shared.handle.inner()
            }

            #[doc = concat!("The ", $what, "'s name (its Redis key, after name mapping).")]
            pub fn name(&self) -> &str {
                &self.shared.handle.name
            }

            /// The client this handle belongs to.
            pub fn client(&self) -> &crate::client::Client {
                &self.shared.handle.client
            }

            #[doc = concat!("The channel the ", $what, " publishes on (after the name mapper).")]
            pub fn channel(&self) -> &str {
                &self.shared.handle.channel
            }

            #[doc = concat!("Listen to the ", $what, " (Redisson's `addListener`): a stream of")]
            /// every message on its channel and, where the server publishes
            /// keyspace notifications, its key's removal and expiry
            /// ([`ObjectEvent`](crate::ObjectEvent)). Subscribed when it
            /// returns; dropping the stream removes the listener.
            ///
            /// # Errors
            ///
            /// A transient error if the subscription could not be made;
            /// [`Error::Auth`](crate::Error::Auth) if the ACL refuses the
            /// channel; [`Error::Closed`](crate::Error::Closed) after
            /// shutdown.
            ///
            /// # Cancel safety
            ///
            /// Dropped part-way, it leaves what it joined.
            #[doc(alias = "addListener")]
            pub async fn events(
                &self,
            ) -> crate::base::error::Result<crate::engine::events::ObjectEvents> {
                crate::engine::events::listen(
                    self.inner(),
                    &self.shared.handle.name,
                    &self.shared.handle.channel,
                    $wake,
                )
                .await
            }
        }
    };
}
pub(crate) use handle_accessors;
