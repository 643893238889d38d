//! tower-http's timeout middleware on the wheel: a 408 request timeout and body timeouts.
//!
//! The names are tower-http's (`tower_http::timeout`), so switching is an import:
//!
//! - [`TimeoutLayer`] / [`Timeout`]: a response not ready in time is answered with
//!   `408 Request Timeout` and an empty body (or another status, [`TimeoutLayer::with_status_code`]),
//!   so it works on `axum::Router::layer` as is, no `HandleErrorLayer`.
//! - [`RequestBodyTimeoutLayer`] / [`ResponseBodyTimeoutLayer`]: wrap the request (response)
//!   body in a [`TimeoutBody`], which fails with [`TimeoutError`] when no frame arrives for the
//!   limit. Each body has one wheel timer, moved in place after each frame: a streaming body
//!   of a million frames costs one registration, not a million.
//!
//! They work under any server: [`serve`](crate::server::serve), axum, or plain hyper-util.
//!
//! Every constructor and accessor of tower-http's is here under its name
//! (`Timeout::layer_with_status_code`, `RequestBodyTimeout::layer`, `get_mut`, ...). One thing
//! is not: tower-http's `TimeoutLayer` and `Timeout` are `Copy`, these are only `Clone` (they
//! hold the timer they run on), so code that uses a layer again after moving it needs a
//! `.clone()`.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! use tokio_timing_wheel::http::{RequestBodyTimeoutLayer, TimeoutLayer};
//! use tower::ServiceBuilder;
//!
//! let app = tower::service_fn(|_req: http::Request<tokio_timing_wheel::http::TimeoutBody<String>>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hi")))
//! });
//! let app = ServiceBuilder::new()
//!     .layer(TimeoutLayer::new(Duration::from_secs(10)))
//!     .layer(RequestBodyTimeoutLayer::new(Duration::from_secs(30)))
//!     .service(app);
//! # let _ = app;
//! ```

mod body;
mod timeout;

pub use self::body::{
    RequestBodyTimeout, RequestBodyTimeoutLayer, ResponseBodyTimeout, ResponseBodyTimeoutFuture,
    ResponseBodyTimeoutLayer, TimeoutBody, TimeoutError,
};
pub use self::timeout::{ResponseFuture, Timeout, TimeoutLayer};
