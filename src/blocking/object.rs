//! The synchronizers' object methods (Redisson's `RObject`/`RExpirable`:
//! `isExists`, `delete`, `expire`, `clearExpire`, `remainTimeToLive`) on
//! the blocking handles, one macro for the handles that have them all.

/// `expirable!(Type, field)`: the blocking forms of the object methods of
/// the async handle in `self.field`, run on `self.runtime`.
macro_rules! expirable {
    ($type:ty, $field:ident, $async:literal) => {
        impl $type {
            #[doc = concat!("Whether it exists (`EXISTS N`); see [`", $async, "::exists`](crate::", $async, "::exists).")]
            ///
            /// # Errors
            ///
            /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync)
            /// inside an async runtime (nothing is sent); else as the
            /// async call.
            pub fn exists(&self) -> crate::Result<bool> {
                self.runtime.run(self.$field.exists())?
            }

            #[doc = concat!("Delete it (Redisson's `delete`); see [`", $async, "::delete`](crate::", $async, "::delete).")]
            ///
            /// # Errors
            ///
            /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync)
            /// inside an async runtime (nothing is sent); else as the
            /// async call.
            pub fn delete(&self) -> crate::Result<bool> {
                self.runtime.run(self.$field.delete())?
            }

            #[doc = concat!("Let it expire after `ttl` (Redisson's `expire`); see [`", $async, "::expire`](crate::", $async, "::expire).")]
            ///
            /// # Errors
            ///
            /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync)
            /// inside an async runtime (nothing is sent); else as the
            /// async call.
            pub fn expire(&self, ttl: std::time::Duration) -> crate::Result<bool> {
                self.runtime.run(self.$field.expire(ttl))?
            }

            #[doc = concat!("Remove its expiry (Redisson's `clearExpire`); see [`", $async, "::clear_expire`](crate::", $async, "::clear_expire).")]
            ///
            /// # Errors
            ///
            /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync)
            /// inside an async runtime (nothing is sent); else as the
            /// async call.
            pub fn clear_expire(&self) -> crate::Result<bool> {
                self.runtime.run(self.$field.clear_expire())?
            }

            #[doc = concat!("Its count key's time to live (Redisson's `remainTimeToLive`); see [`", $async, "::remain_time_to_live`](crate::", $async, "::remain_time_to_live).")]
            ///
            /// # Errors
            ///
            /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync)
            /// inside an async runtime (nothing is sent); else as the
            /// async call.
            pub fn remain_time_to_live(&self) -> crate::Result<crate::Ttl> {
                self.runtime.run(self.$field.remain_time_to_live())?
            }
        }
    };
}
pub(super) use expirable;
