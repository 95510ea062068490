//! Day-two operations on a running deployment: what an operator does to it
//! after the first install, tested as the operator does it.

mod key_retirement;
mod migrations;
