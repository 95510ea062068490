//! Day-two operations: what an operator does to a running deployment.

mod migrations;
