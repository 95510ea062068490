//! The wire contract: generated gRPC code, the error table, the one spelling
//! of every wire enum (`names`), W3C trace-context propagation over gRPC
//! metadata, the clock every time on the wire is read from, and the rule of
//! which versions may talk to each other (`version`). Nothing else lives here.

pub mod clock;
pub mod error;
pub mod names;
pub mod trace;
pub mod version;

pub mod coordinator {
    pub mod v1 {
        tonic::include_proto!("baton.coordinator.v1");
    }
}

pub mod worker {
    pub mod v1 {
        tonic::include_proto!("baton.worker.v1");
    }
}
