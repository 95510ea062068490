//! Websocket delivery of one execution ("watch"): the sealed single-use token
//! behind a `websocket_url` and the `wait_id` of the polling fallback
//! (`token`), and the socket that streams the owner view (`socket`). The HTTP
//! routes are `rest::watch`. Nothing here is state another replica needs: a
//! token opens on any replica holding the same key, and only its single use is
//! shared, recorded by the coordinator.

pub(crate) mod socket;
pub(crate) mod token;
