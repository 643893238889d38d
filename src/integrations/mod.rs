//! What sits on top of the timer: the hyper and tower integrations, [`IdleTimeout`] for
//! connections, and the timer reference they share.
//!
//! [`IdleTimeout`]: crate::IdleTimeout

#[cfg(feature = "hyper")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
pub mod hyper;
pub(crate) mod idle;
mod timer_ref;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
