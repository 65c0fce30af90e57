//! The `keel` binary.

fn main() {}
