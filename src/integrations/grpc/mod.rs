//! gRPC deadlines on the wheel: `grpc-timeout` honoured with DEADLINE_EXCEEDED, and propagated.
//!
//! - [`GrpcTimeoutLayer`] (server side) reads the request's `grpc-timeout` header, caps it with
//!   its own [`max`](GrpcTimeoutLayer::max) (which also applies when the header is absent), and
//!   answers a trailers-only `DEADLINE_EXCEEDED` (HTTP 200, `content-type: application/grpc`,
//!   `grpc-status: 4`, a `grpc-message`) when the handler is late. The handler sees the
//!   [`Deadline`] as a request extension and as [`Deadline::current`]. Only the handler's
//!   future is timed, as by tonic's server: a response whose headers went out in time (a
//!   server stream included) streams on past the deadline, and the stream does not see
//!   [`Deadline::current`]; bound it yourself with the request's [`Deadline`]. Every request
//!   it wraps is answered as a gRPC call (as by tonic's server-wide timeout), whatever its
//!   `content-type`: on a router that also serves REST routes, layer it onto the gRPC routes
//!   only (a slow REST request under it would get HTTP 200 with `grpc-status: 4` and an empty
//!   body), and under gRPC-Web's translating layer (such as tonic-web's), whose clients expect
//!   `application/grpc-web` back.
//! - [`PropagateDeadlineLayer`] (client side) sets `grpc-timeout` on outgoing requests from the
//!   deadline of the request being served, so a deadline holds through a chain of services.
//! - [`parse_grpc_timeout`] and [`format_grpc_timeout`] are the header's codec.
//!
//! No gRPC library is needed: these are tower layers over `http` requests. They are tested with
//! tonic's generated-service machinery (`tonic::server::Grpc`) served by `serve` (feature
//! `server`), and with tonic's client. tonic's own `transport::Server` enforces
//! `grpc-timeout` itself, answering Cancelled at the same instant; with this layer added to it
//! (`Server::builder().layer(..)`), the layer answers DEADLINE_EXCEEDED first, as tonic's
//! timeout polls the service before its own sleep, which starts later. tonic's `Channel` also
//! gives up at the deadline on the client's side.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! use tokio_timing_wheel::grpc::{GrpcTimeoutLayer, PropagateDeadlineLayer};
//!
//! // Server side: honour the client's deadline, at most 30 s.
//! let server_layer = GrpcTimeoutLayer::new().max(Duration::from_secs(30));
//! // Client side (inside a handler): pass what is left of it on.
//! let client_layer = PropagateDeadlineLayer::new();
//! # let _ = (server_layer, client_layer);
//! ```

mod deadline;
mod header;
mod propagate;
mod timeout;

pub use self::deadline::Deadline;
use self::header::format_grpc_timeout_left;
pub use self::header::{format_grpc_timeout, parse_grpc_timeout};
pub use self::propagate::{PropagateDeadline, PropagateDeadlineLayer};
pub use self::timeout::{GrpcTimeout, GrpcTimeoutLayer, ResponseFuture};
