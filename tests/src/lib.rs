//! Black-box tests live in `tests/it`; this library is intentionally empty.
