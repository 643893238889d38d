//! `serve`: an HTTP/1 and HTTP/2 server whose every timer runs on the wheel.
//!
//! [`serve`](fn@serve) takes a `tokio::net::TcpListener` and a tower service (an `axum::Router`, a
//! tonic service, a `tower::service_fn`) and serves it the way `axum::serve` does, with the
//! limits a server facing the internet needs, each on the wheel:
//!
//! | limit | closes a connection that | reason |
//! |---|---|---|
//! | [`header_read_timeout`](Serve::header_read_timeout) | takes longer to send an HTTP/1 request head | [`CloseReason::HeaderRead`] |
//! | [`keep_alive_timeout`](Serve::keep_alive_timeout) | has no request in flight for this long | [`CloseReason::KeepAlive`] |
//! | [`idle_timeout`](Serve::idle_timeout) | neither reads nor writes for this long | [`CloseReason::Idle`] |
//! | [`max_connection_age`](Serve::max_connection_age) | is this old (drained gracefully) | [`CloseReason::MaxAge`] |
//! | [`shutdown_timeout`](Serve::shutdown_timeout) | outlives the graceful shutdown by this | [`CloseReason::ShutdownTimeout`] |
//!
//! The header-read and keep-alive limits are independent: hyper's own header-read timer also
//! runs while a keep-alive connection waits for its next request (so its shorter limit would
//! close idle connections), so `serve` runs it itself, from the first byte of each request
//! head. hyper's remaining timers (HTTP/2 keep-alive pings) run on
//! [`HyperTimer`](crate::hyper::HyperTimer). Each close is counted by reason in
//! [`ServeMetrics`] and logged with `tracing`.
//!
//! # Examples
//!
//! ```
//! use std::convert::Infallible;
//! use std::time::Duration;
//!
//! use tokio_timing_wheel::server::{serve, CloseReason};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let app = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
//!     Ok::<_, Infallible>(http::Response::new(String::from("hello\n")))
//! });
//! let server = serve(listener, app)
//!     .header_read_timeout(Duration::from_secs(10))
//!     .keep_alive_timeout(Duration::from_secs(60))
//!     .with_graceful_shutdown(async {});
//! let metrics = server.metrics();
//! tokio::spawn(std::future::IntoFuture::into_future(server)).await.unwrap()?;
//! assert_eq!(metrics.closed(CloseReason::HeaderRead), 0);
//! # Ok(())
//! # }
//! ```

mod conn;
mod metrics;
mod serve;
mod tracked;

pub use self::metrics::{CloseReason, ServeMetrics};
pub use self::serve::{serve, Serve, ServeFuture};
