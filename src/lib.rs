//! A Kafka-style hierarchical timing wheel for Tokio.
//!
//! This revision contains the pure wheel; the Tokio integration builds on it.
#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    rust_2018_idioms
)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Used by tests and benches until the Tokio driver lands on top of it.
#[allow(dead_code)]
mod wheel;

#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals;
