//! The wire contract: generated gRPC code, the error table, the one spelling
//! of every wire enum (`names`) and W3C trace-context propagation over gRPC
//! metadata. Nothing else lives here.

pub mod error;
pub mod names;
pub mod trace;

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
