//! Proof, by exhaustion: Baton's execution protocol model-checked through the
//! real state machine (`baton_domain::apply`), so the model cannot drift from
//! the code. `checker` explores every reachable state; `lifecycle` is one
//! execution among coordinators, workers (one of them possibly hostile) and
//! its owner, with commit-unknown, lost and duplicated messages, crashes and
//! reconnects; `admission` is the admission bound across Redis losses and
//! rebuilds under the Postgres fence. Each model also comes in mutants with
//! one guard taken out, and the tests show the checker finds each one.

pub mod admission;
pub mod checker;
pub mod lifecycle;
pub mod sim;

#[cfg(test)]
mod tests;
